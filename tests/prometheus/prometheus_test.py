#!/usr/bin/env python3
"""A real Prometheus server (/usr/bin/prometheus) against Tessera.

  prometheus_test.py advise TESSERA   DCGM-shaped series over three days, backfilled with
      `promtool tsdb create-blocks-from openmetrics`; `tessera advise --prometheus` over the HTTP
      API recommends slices from them; its errors (unreachable server, HTTP error, no series in
      the window, malformed response) are one line, exit 1 and no output file.
  prometheus_test.py report TESSERA   two days of the scheduler's tessera_pod_allocated_gpus and
      tessera_gpu_allocated_ratio, DCGM series and the node agent's per-pod memory, backfilled;
      `tessera report --prometheus` gives the GPU-hours, memory, cost and waste computed here from
      the backfilled values; NaN samples, no series and an unreachable server are one-line errors.
  prometheus_test.py advise-agent TESSERA   the same data through `tessera advise`: a pod DCGM
      does not label is attributed by the agent's series, two pods time-sliced on one T4 are
      reported as unattributable for compute although the agent gives their memory.
  prometheus_test.py scrape TESSERA   Prometheus scrapes `tessera scheduler` and `tessera
      extender`; their values come back through /api/v1/query.
  prometheus_test.py alert SOURCE_DIR  the rules of deploy/monitoring/prometheusrule.yaml (`for:`
      shortened in a test copy) are loaded; a static exporter served here shows a GPU at 92 °C
      and one at 60 °C; GpuTemperatureHigh fires for the first only, with its annotation.

Exit 77 (skipped) without prometheus or promtool.
"""
import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import promlib  # noqa: E402

STEP = 300
DAYS = 3
NAN_SAMPLES = 3


class StaticServer:
    """Serves `body` (a str or a callable returning one) on every GET."""

    def __init__(self, body, content_type="text/plain; version=0.0.4"):
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                data = (body() if callable(body) else body).encode()
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


# ---- advise

def dcgm_openmetrics(base):
    """Three days of 5-minute DCGM samples, and what the test expects of each workload."""
    labels = {
        # ~7 GiB peak on a whole A100-80GB: a daily cycle 5-7 GiB, compute 20-30 %
        "infer": 'gpu="0",UUID="GPU-a0",modelName="NVIDIA A100-SXM4-80GB",Hostname="node-1",'
                 'namespace="ml",pod="infer-0",container="main"',
        # a second replica of the same Deployment, a little below the first
        "infer1": 'gpu="0",UUID="GPU-a2",modelName="NVIDIA A100-SXM4-80GB",Hostname="node-3",'
                  'namespace="ml",pod="infer-1",container="main"',
        # near-full whole A100-80GB, busy: the request stays
        "train": 'gpu="1",UUID="GPU-a1",modelName="NVIDIA A100-SXM4-80GB",Hostname="node-1",'
                 'namespace="ml",pod="train-0",container="main"',
        # a 3g.40gb MIG instance (newer exporter: `hostname`), ~4 GiB, GR_ENGINE_ACTIVE only
        "nb": 'gpu="0",UUID="GPU-b0",modelName="NVIDIA A100-SXM4-80GB",GPU_I_PROFILE="3g.40gb",'
              'GPU_I_ID="1",hostname="node-2",namespace="dev",pod="nb-0",container="lab"',
        # a GPU no pod holds
        "free": 'gpu="1",UUID="GPU-b1",modelName="NVIDIA A100-SXM4-80GB",hostname="node-2"',
    }
    n = DAYS * 86400 // STEP
    fam = {k: [] for k in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_PROF_SM_ACTIVE",
                           "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL")}
    for i in range(n):
        t = base + i * STEP
        day = math.sin(2 * math.pi * (i * STEP % 86400) / 86400)
        fam["DCGM_FI_DEV_FB_USED"].append((labels["infer"], 6144 + 1024 * day, t))
        sm = "NaN" if i in (10, 11, 500) else f"{0.25 + 0.05 * day:.4f}"
        fam["DCGM_FI_PROF_SM_ACTIVE"].append((labels["infer"], sm, t))
        fam["DCGM_FI_DEV_GPU_UTIL"].append((labels["infer"], 30 + 5 * day, t))
        fam["DCGM_FI_DEV_FB_USED"].append((labels["infer1"], 5800 + 1000 * day, t))
        fam["DCGM_FI_PROF_SM_ACTIVE"].append((labels["infer1"], f"{0.2 + 0.05 * day:.4f}", t))
        fam["DCGM_FI_DEV_FB_USED"].append((labels["train"], 74000 + 500 * day, t))
        fam["DCGM_FI_PROF_SM_ACTIVE"].append((labels["train"], 0.9, t))
        fam["DCGM_FI_DEV_FB_USED"].append((labels["nb"], 4096 + 256 * day, t))
        fam["DCGM_FI_PROF_GR_ENGINE_ACTIVE"].append((labels["nb"], 0.4 + 0.1 * day, t))
        fam["DCGM_FI_DEV_FB_USED"].append((labels["free"], 0, t))
        fam["DCGM_FI_DEV_GPU_UTIL"].append((labels["free"], 0, t))
    # kube-state-metrics: infer-0/1 belong to ReplicaSet infer-6f9 of Deployment infer; train-0
    # to Job train; nb-0 has no owner series.
    owners = {
        "kube_pod_owner": [
            'namespace="ml",pod="infer-0",owner_kind="ReplicaSet",owner_name="infer-6f9",'
            'owner_is_controller="true"',
            'namespace="ml",pod="infer-1",owner_kind="ReplicaSet",owner_name="infer-6f9",'
            'owner_is_controller="true"',
            'namespace="ml",pod="train-0",owner_kind="Job",owner_name="train",'
            'owner_is_controller="true"'],
        "kube_replicaset_owner": [
            'namespace="ml",replicaset="infer-6f9",owner_kind="Deployment",owner_name="infer",'
            'owner_is_controller="true"'],
    }
    lines = []
    for name, series in owners.items():
        lines.append(f"# TYPE {name} gauge")
        for lab in series:
            lines += [f"{name}{{{lab}}} 1 {base + i * STEP}" for i in range(n)]
    for name, samples in fam.items():
        lines.append(f"# TYPE {name} gauge")
        # one series after the other, each in time order
        for lab in labels.values():
            lines += [f"{name}{{{lab}}} {v} {t}" for (l2, v, t) in samples if l2 == lab]
    lines.append("# EOF")
    return "\n".join(lines) + "\n", base + (n - 1) * STEP


def run_advise(tessera, *args):
    return subprocess.run([tessera, "advise", *args], capture_output=True, text=True,
                          timeout=120)


def advise(tessera):
    promlib.require("prometheus", "promtool")
    failures = []
    base = (int(time.time()) // 86400 - 10) * 86400  # ten days ago, midnight UTC
    text, last = dcgm_openmetrics(base)
    with tempfile.TemporaryDirectory() as tmp, promlib.Processes() as procs:
        om = os.path.join(tmp, "dcgm.om")
        with open(om, "w") as f:
            f.write(text)
        data = os.path.join(tmp, "data")
        r = subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", om, data],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            return [f"promtool tsdb create-blocks-from: {r.stdout} {r.stderr}"]
        url = promlib.start_prometheus(procs, tmp, "global: {}\n", storage=data)
        got = promlib.query(url, "count(DCGM_FI_DEV_FB_USED)", at=last)
        if not got or got[0]["value"][1] != "5":
            failures.append(f"backfilled FB_USED series at the end: {got}")

        report = os.path.join(tmp, "report.json")
        rng = ["--start", str(base), "--end", str(last), "--step", str(STEP)]
        r = run_advise(tessera, "--prometheus", url, *rng, "--json", report)
        print(r.stdout, r.stderr)
        if r.returncode != 0:
            failures.append(f"advise over Prometheus: exit {r.returncode}: {r.stderr}")
            return failures
        if f"skipped {NAN_SAMPLES} non-finite samples" not in r.stderr:
            failures.append(f"the NaN samples are not reported as skipped: {r.stderr!r}")
        with open(report) as f:
            doc = json.load(f)
        items = {w["key"]: w for w in doc["workloads"]}
        want_keys = {"ml/Deployment/infer", "ml/Job/train", "dev/Pod/nb-0"}
        if set(items) != want_keys:
            failures.append(f"workloads {sorted(items)} != {sorted(want_keys)}")
            return failures
        infer = items["ml/Deployment/infer"]
        if infer["pods"] != 2:
            failures.append(f"Deployment infer: {infer['pods']} pods, want its 2 replicas")
        rec = infer["recommended"]
        if not 7000 <= infer["memory_mib"]["peak"] <= 7200:
            failures.append(f"Deployment infer memory peak {infer['memory_mib']['peak']}, "
                            "want ~7168")
        if infer["requested"].get("gpus") != 1 or infer["gpu_model"] != "A100-80GB":
            failures.append(f"Deployment infer request {infer['requested']} on "
                            f"{infer['gpu_model']}")
        if infer["keep"] or not (7168 <= rec.get("memory_mib", 0) <= 20480) \
                or rec["gpu_fraction"] >= 0.5:
            failures.append(f"Deployment infer: recommended {rec}, want a slice of 7-20 GiB")
        train = items["ml/Job/train"]
        if not train["keep"] or train["recommended"].get("gpus") != 1:
            failures.append(f"train-0 should keep its whole GPU: {train['recommended']}")
        nb = items["dev/Pod/nb-0"]
        if nb["requested"].get("mig_profile") != "3g.40gb":
            failures.append(f"nb-0 request {nb['requested']}, want the 3g.40gb instance")
        # GR_ENGINE_ACTIVE of a 3g instance (3 of 7 compute slices) at 0.3-0.5: 0.13-0.21 of a GPU
        if not 0.19 <= nb["compute"]["peak"] <= 0.23:
            failures.append(f"nb-0 compute peak {nb['compute']['peak']} (scaled by 3/7?)")
        if nb["recommended"].get("memory_mib", 1 << 30) >= 40960:
            failures.append(f"nb-0 recommended {nb['recommended']}, want below 3g.40gb")

        # Errors: one line on stderr, exit 1, no report.
        def expect_error(what, args, needle):
            out = os.path.join(tmp, "error.json")
            r = run_advise(tessera, *args, "--json", out)
            lines = r.stderr.strip().splitlines()
            if r.returncode != 1 or len(lines) != 1 or needle not in r.stderr \
                    or os.path.exists(out) or r.stdout:
                failures.append(f"{what}: exit {r.returncode}, stderr {r.stderr!r}, "
                                f"stdout {r.stdout[:200]!r}, want one line with {needle!r}")

        expect_error("no series in the window",
                     ["--prometheus", url, "--start", str(base - 30 * 86400),
                      "--end", str(base - 29 * 86400)],
                     "no DCGM_FI_DEV_FB_USED series held by a pod in the window")
        expect_error("HTTP error", ["--prometheus", url + "/no/such/prefix", *rng], "HTTP 404")
        expect_error("--start with --window", ["--prometheus", url, *rng,
                                   "--window", "1d"],
                     "exclude each other")
        closed = promlib.free_port()
        expect_error("unreachable", ["--prometheus", f"http://127.0.0.1:{closed}", *rng],
                     f"cannot reach Prometheus at http://127.0.0.1:{closed}")
        expect_error("not a URL", ["--prometheus", "ftp://x", *rng], "not an http://")
        for body, needle in (("<html>oops</html>", "JSON syntax error"),
                             ('{"status":"success","data":{"resultType":"vector","result":[]}}',
                              'is not "matrix"'),
                             ('{"status":"error","errorType":"timeout","error":"query timed out"}',
                              "Prometheus error timeout: 'query timed out'")):
            srv = StaticServer(body, "application/json")
            try:
                expect_error(f"malformed response {body[:20]!r}",
                             ["--prometheus", srv.url, *rng], needle)
            finally:
                srv.close()
    return failures


# ---- report and advise over the node agent's series

COST_DAYS = 2
# (namespace, pod, queue, model, kind, allocated GPUs)
COST_PODS = [
    ("ml", "train-0", "team-a", "A100-80GB", "exclusive", 1.0),
    ("ml", "infer-0", "team-a", "A100-80GB", "exclusive", 1.0),
    ("dev", "nb-0", "team-b", "A100-80GB", "mig", 3 / 7),
    ("web", "shared-a", "team-b", "T4", "timeslice", 0.5),
    ("web", "shared-b", "team-b", "T4", "timeslice", 0.5),
    ("web", "solo", "team-b", "L4", "exclusive", 1.0),
]
COST_PRICES = {"A100-80GB": 2.0, "T4": 0.5, "L4": 0.8}
COST_MEMORY_GIB = {"A100-80GB": 80, "T4": 15, "L4": 23034 / 1024}  # the catalog's memory
ALLOCATED_RATIO = 0.6
GIB = 1 << 30


def cost_openmetrics(base):
    """Two days of 5-minute samples; returns the text, the last timestamp and, per pod, the
    compute (GPUs, None: not attributable) and memory (MiB) the report must find."""
    n = COST_DAYS * 86400 // STEP
    dcgm = {
        "train-0": 'gpu="1",UUID="GPU-a1",modelName="NVIDIA A100-SXM4-80GB",Hostname="node-1",'
                   'namespace="ml",pod="train-0",container="main"',
        "infer-0": 'gpu="0",UUID="GPU-a0",modelName="NVIDIA A100-SXM4-80GB",Hostname="node-1",'
                   'namespace="ml",pod="infer-0",container="main"',
        "nb-0": 'gpu="0",UUID="GPU-b0",modelName="NVIDIA A100-SXM4-80GB",GPU_I_PROFILE="3g.40gb",'
                'GPU_I_ID="1",hostname="node-2",namespace="dev",pod="nb-0",container="lab"',
        # dcgm-exporter labels a time-sliced GPU with each pod but reads the whole device
        "shared-a": 'gpu="0",UUID="GPU-t0",modelName="Tesla T4",hostname="node-3",'
                    'namespace="web",pod="shared-a",container="main"',
        "shared-b": 'gpu="0",UUID="GPU-t0",modelName="Tesla T4",hostname="node-3",'
                    'namespace="web",pod="shared-b",container="main"',
        # no Kubernetes mapping on this node: only the agent names the pod
        "solo": 'gpu="0",UUID="GPU-l0",modelName="NVIDIA L4",hostname="node-4"',
    }
    fb = {"train-0": 40960, "infer-0": 8192, "nb-0": 4096, "shared-a": 6000, "shared-b": 6000,
          "solo": 9000}
    sm = {"train-0": 0.9, "infer-0": 0.25, "shared-a": 0.5, "shared-b": 0.5, "solo": 0.6}
    agent = {  # per-pod memory from the node agent, bytes
        "shared-a": ('node="node-3",gpu="0",gpu_uuid="GPU-t0",mig_instance="",'
                     'namespace="web",pod="shared-a",container="main"', 2 * GIB),
        "shared-b": ('node="node-3",gpu="0",gpu_uuid="GPU-t0",mig_instance="",'
                     'namespace="web",pod="shared-b",container="main"', 3 * GIB),
        "solo": ('node="node-4",gpu="0",gpu_uuid="GPU-l0",mig_instance="",'
                 'namespace="web",pod="solo",container="main"', 7 * GIB),
    }
    expect = {
        "train-0": (0.9, 40960), "infer-0": (0.25, 8192), "nb-0": (0.35 * 3 / 7, 4096),
        "shared-a": (None, 2048), "shared-b": (None, 3072), "solo": (0.6, 7168),
    }
    times = [base + i * STEP for i in range(n)]
    lines = ["# TYPE tessera_pod_allocated_gpus gauge"]
    for ns, pod, queue, model, kind, gpus in COST_PODS:
        lab = f'namespace="{ns}",pod="{pod}",queue="{queue}",model="{model}",kind="{kind}"'
        lines += [f"tessera_pod_allocated_gpus{{{lab}}} {gpus:.6g} {t}" for t in times]
    # a pod whose allocation a day earlier was NaN for an hour
    lab = 'namespace="ml",pod="nan-0",queue="team-a",model="A100-80GB",kind="exclusive"'
    lines += [f"tessera_pod_allocated_gpus{{{lab}}} NaN {base - 86400 + i * STEP}"
              for i in range(12)]
    lines.append("# TYPE tessera_gpu_allocated_ratio gauge")
    lines += [f"tessera_gpu_allocated_ratio {ALLOCATED_RATIO} {t}" for t in times]
    lines.append("# TYPE DCGM_FI_DEV_FB_USED gauge")
    for pod, lab in dcgm.items():
        lines += [f"DCGM_FI_DEV_FB_USED{{{lab}}} {fb[pod]} {t}" for t in times]
    lines.append("# TYPE DCGM_FI_PROF_SM_ACTIVE gauge")
    for pod, lab in dcgm.items():
        if pod in sm:
            lines += [f"DCGM_FI_PROF_SM_ACTIVE{{{lab}}} {sm[pod]} {t}" for t in times]
    lines.append("# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge")
    lines += [f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{dcgm['nb-0']}}} 0.35 {t}" for t in times]
    lines.append("# TYPE tessera_agent_pod_gpu_memory_used_bytes gauge")
    for pod, (lab, v) in agent.items():
        lines += [f"tessera_agent_pod_gpu_memory_used_bytes{{{lab}}} {v} {t}" for t in times]
    lines.append("# EOF")
    return "\n".join(lines) + "\n", times[-1], expect


@contextlib.contextmanager
def cost_prometheus(procs, tmp):
    """A Prometheus over the backfilled cost series; yields (url, base, last, expect)."""
    base = (int(time.time()) // 86400 - 10) * 86400
    text, last, expect = cost_openmetrics(base)
    om = os.path.join(tmp, "cost.om")
    with open(om, "w") as f:
        f.write(text)
    data = os.path.join(tmp, "data")
    r = subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", om, data],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"promtool tsdb create-blocks-from: {r.stdout} {r.stderr}")
    yield promlib.start_prometheus(procs, tmp, "global: {}\n", storage=data), base, last, expect


def expected_report(n, expect):
    """The report's totals per queue, namespace and model, from the backfilled values."""
    h = STEP / 3600
    groups = {}
    for ns, pod, queue, model, kind, gpus in COST_PODS:
        gpus = float(f"{gpus:.6g}")  # as backfilled (and as the scheduler writes it)
        compute, memory = expect[pod]
        alloc = gpus * n * h
        used = None if compute is None else min(compute, gpus) * n * h
        mem_alloc = gpus * COST_MEMORY_GIB[model] * n * h
        mem_used = min(memory / 1024 * n * h, mem_alloc)
        for key in (("by_queue", queue), ("by_namespace", ns), ("by_model", model),
                    ("total", "")):
            g = groups.setdefault(key, {"pods": 0, "allocated_gpu_hours": 0, "used_gpu_hours": 0,
                                        "idle_gpu_hours": 0, "unmeasured_gpu_hours": 0,
                                        "allocated_memory_gib_hours": 0,
                                        "used_memory_gib_hours": 0,
                                        "unused_memory_gib_hours": 0, "cost_usd": 0,
                                        "idle_cost_usd": 0})
            g["pods"] += 1
            g["allocated_gpu_hours"] += alloc
            if used is None:
                g["unmeasured_gpu_hours"] += alloc
            else:
                g["used_gpu_hours"] += used
                g["idle_gpu_hours"] += alloc - used
                g["idle_cost_usd"] += (alloc - used) * COST_PRICES[model]
            g["allocated_memory_gib_hours"] += mem_alloc
            g["used_memory_gib_hours"] += mem_used
            g["unused_memory_gib_hours"] += mem_alloc - mem_used
            g["cost_usd"] += alloc * COST_PRICES[model]
    return groups


def close(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))


def report(tessera):
    promlib.require("prometheus", "promtool")
    failures = []
    with tempfile.TemporaryDirectory() as tmp, promlib.Processes() as procs:
        with cost_prometheus(procs, tmp) as (url, base, last, expect):
            prices = os.path.join(tmp, "prices.csv")
            with open(prices, "w") as f:
                f.write("gpu_model,usd_per_hour\n" +
                        "".join(f"{m},{p}\n" for m, p in COST_PRICES.items()))
            out = os.path.join(tmp, "report.json")
            rng = ["--start", str(base), "--end", str(last), "--step", str(STEP)]
            r = subprocess.run([tessera, "report", "--prometheus", url, *rng, "--prices", prices,
                                "--json", out], capture_output=True, text=True, timeout=120)
            print(r.stdout, r.stderr)
            if r.returncode != 0:
                return [f"report over Prometheus: exit {r.returncode}: {r.stderr}"]
            with open(out) as f:
                doc = json.load(f)
            n = (last - base) // STEP + 1
            want = expected_report(n, expect)
            for (section, key), totals in sorted(want.items()):
                got = doc["total"] if section == "total" else \
                    next((row for row in doc[section] if row["key"] == key), None)
                if got is None:
                    failures.append(f"{section} has no row {key!r}: {doc[section]}")
                    continue
                for field, value in totals.items():
                    if not close(got[field], value):
                        failures.append(f"{section} {key or 'total'} {field} = {got[field]}, "
                                        f"want {value:.6f}")
            waste = doc["waste"]
            t = want[("total", "")]
            for field, value in (
                    ("idle_compute_pct", 100 * t["idle_gpu_hours"] /
                     (t["used_gpu_hours"] + t["idle_gpu_hours"])),
                    ("unused_memory_pct", 100 * t["unused_memory_gib_hours"] /
                     (t["used_memory_gib_hours"] + t["unused_memory_gib_hours"])),
                    ("unallocated_gpu_pct", 100 * (1 - ALLOCATED_RATIO))):
                if waste[field] is None or not close(waste[field], value):
                    failures.append(f"waste {field} = {waste[field]}, want {value:.4f}")
            if "team-a" not in r.stdout or "unallocated GPUs 40 %" not in r.stdout:
                failures.append("the table lacks the queue or the unallocated share")

            def expect_error(what, args, needle):
                err_out = os.path.join(tmp, "error.json")
                r = subprocess.run([tessera, "report", *args, "--json", err_out],
                                   capture_output=True, text=True, timeout=120)
                lines = r.stderr.strip().splitlines()
                if r.returncode != 1 or len(lines) != 1 or needle not in r.stderr \
                        or os.path.exists(err_out) or r.stdout:
                    failures.append(f"{what}: exit {r.returncode}, stderr {r.stderr!r}, "
                                    f"stdout {r.stdout[:200]!r}, want one line with {needle!r}")

            nan_start = base - 86400
            expect_error("NaN samples", ["--prometheus", url, "--start", str(nan_start),
                                         "--end", str(nan_start + 3600), "--step", str(STEP)],
                         "NaN or infinite samples in tessera_pod_allocated_gpus of pod ml/nan-0")
            expect_error("no series", ["--prometheus", url, "--start", str(base - 30 * 86400),
                                       "--end", str(base - 29 * 86400)],
                         "no tessera_pod_allocated_gpus series in the window")
            closed = promlib.free_port()
            expect_error("unreachable", ["--prometheus", f"http://127.0.0.1:{closed}", *rng],
                         f"cannot reach Prometheus at http://127.0.0.1:{closed}")
            bad_prices = os.path.join(tmp, "bad_prices.csv")
            with open(bad_prices, "w") as f:
                f.write("gpu_model,usd_per_hour\nX9,1\n")
            expect_error("unknown model in prices",
                         ["--prometheus", url, *rng, "--prices", bad_prices],
                         "unknown GPU model 'X9'")
    return failures


def advise_agent(tessera):
    promlib.require("prometheus", "promtool")
    failures = []
    with tempfile.TemporaryDirectory() as tmp, promlib.Processes() as procs:
        with cost_prometheus(procs, tmp) as (url, base, last, expect):
            out = os.path.join(tmp, "advise.json")
            r = run_advise(tessera, "--prometheus", url, "--start", str(base), "--end",
                           str(last), "--step", str(STEP), "--json", out)
            print(r.stdout, r.stderr)
            if r.returncode != 0:
                return [f"advise over Prometheus: exit {r.returncode}: {r.stderr}"]
            with open(out) as f:
                doc = json.load(f)
            items = {w["key"]: w for w in doc["workloads"]}
            solo = items.get("web/Pod/solo")
            if solo is None:
                failures.append(f"the pod only the agent names is missing: {sorted(items)}")
            else:
                if solo["gpu_model"] != "L4" or solo["memory_mib"]["peak"] != 7168:
                    failures.append(f"solo: {solo['gpu_model']}, memory {solo['memory_mib']}, "
                                    "want L4 and the agent's 7168 MiB, not DCGM's 9000")
                if not close(solo["compute"]["peak"], 0.6):
                    failures.append(f"solo compute {solo['compute']}, want DCGM's 0.6")
                if solo["state"] == "attribution-impossible":
                    failures.append("solo is alone on its GPU but unattributed")
            for pod in ("shared-a", "shared-b"):
                w = items.get(f"web/Pod/{pod}")
                if w is None:
                    failures.append(f"{pod} missing: {sorted(items)}")
                    continue
                if w["state"] != "attribution-impossible" or "node agent gives each pod's memory" \
                        not in w["reason"]:
                    failures.append(f"{pod}: state {w['state']}, reason {w['reason']!r}")
            if "several pods share a GPU" not in r.stdout:
                failures.append("the table does not say that attribution is impossible")
    return failures


# ---- scrape

def scrape(tessera):
    promlib.require("prometheus")
    failures = []
    with tempfile.TemporaryDirectory() as tmp, promlib.Processes() as procs:
        ext = promlib.extender(procs, tessera, tmp)
        with promlib.scheduler(procs, tessera, tmp) as sched:
            targets = {"tessera-scheduler": sched, "tessera-extender": ext}
            cfg = {"global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
                   "scrape_configs": [
                       {"job_name": job, "metrics_path": "/metrics",
                        "static_configs": [{"targets": [u.split("/")[2]]}]}
                       for job, u in targets.items()]}
            url = promlib.start_prometheus(procs, tmp, yaml.safe_dump(cfg))

            def value(expr):
                res = promlib.query(url, expr)
                return res[0]["value"][1] if res else None

            try:
                promlib.wait_for("both targets scraped",
                                 lambda: value('count(up == 1)') == "2", timeout=30)
            except TimeoutError as e:
                failures.append(f"{e}: {promlib.query(url, 'up')}")
                return failures
            checks = {
                'tessera_pending_pods{job="tessera-scheduler",queue="team-a"}': "1",
                'tessera_queue_nominal_gpus{queue="team-a"}': "8",
                'tessera_leader{job="tessera-scheduler"}': "1",
                'sum(tessera_pending_pods)': "2",
                'tessera_extender_nodes{job="tessera-extender"}': "0",
                # Every server exposes its own guard counters.
                'tessera_http_requests_too_large_total{job="tessera-scheduler"}': "0",
                'tessera_http_requests_too_large_total{job="tessera-extender"}': "0",
            }
            for expr, want in checks.items():
                got = value(expr)
                if got != want:
                    failures.append(f"{expr} = {got}, want {want}")
    return failures


# ---- alert

def alert(src):
    promlib.require("prometheus")
    failures = []
    with tempfile.TemporaryDirectory() as tmp, promlib.Processes() as procs:
        with open(os.path.join(src, "deploy/monitoring/prometheusrule.yaml")) as f:
            groups = yaml.safe_load(f)["spec"]["groups"]
        for g in groups:
            g["interval"] = "1s"
            for rule in g["rules"]:
                if "for" in rule:
                    rule["for"] = "2s"
        rules = os.path.join(tmp, "rules.yaml")
        with open(rules, "w") as f:
            yaml.safe_dump({"groups": groups}, f, sort_keys=False)
        exporter = StaticServer(
            "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
            'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-hot",modelName="NVIDIA H100 80GB HBM3",'
            'Hostname="node-1"} 92\n'
            'DCGM_FI_DEV_GPU_TEMP{gpu="1",UUID="GPU-cool",modelName="NVIDIA H100 80GB HBM3",'
            'Hostname="node-1"} 60\n')
        try:
            cfg = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                   "rule_files": [rules],
                   "scrape_configs": [{"job_name": "dcgm-exporter", "static_configs": [
                       {"targets": [exporter.url.split("/")[2]]}]}]}
            url = promlib.start_prometheus(procs, tmp, yaml.safe_dump(cfg))

            def firing():
                _, body = promlib.http_get(url + "/api/v1/alerts")
                alerts = json.loads(body)["data"]["alerts"]
                return [a for a in alerts if a["labels"]["alertname"] == "GpuTemperatureHigh"
                        and a["state"] == "firing"]

            try:
                got = promlib.wait_for("GpuTemperatureHigh firing", firing, timeout=30)
            except TimeoutError as e:
                return [str(e)]
            uuids = sorted(a["labels"].get("UUID") for a in got)
            if uuids != ["GPU-hot"]:
                failures.append(f"firing for {uuids}, want only GPU-hot")
            summary = got[0]["annotations"].get("summary", "")
            if "92" not in summary or "node-1" not in summary:
                failures.append(f"summary {summary!r} does not name the node and 92 °C")
            res = promlib.query(url, 'ALERTS{alertname="GpuTemperatureHigh",alertstate="firing"}')
            if len(res) != 1:
                failures.append(f"ALERTS series: {res}")
        finally:
            exporter.close()
    return failures


def main():
    mode, arg = sys.argv[1:3]
    started = time.monotonic()
    failures = {"advise": advise, "report": report, "advise-agent": advise_agent,
                "scrape": scrape, "alert": alert}[mode](arg)
    print(f"{mode}: {time.monotonic() - started:.1f} s")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
