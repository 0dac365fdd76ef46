#!/usr/bin/env python3
"""A real Prometheus server (/usr/bin/prometheus) against Tessera.

  prometheus_test.py advise TESSERA   DCGM-shaped series over three days, backfilled with
      `promtool tsdb create-blocks-from openmetrics`; `tessera advise --prometheus` over the HTTP
      API recommends slices from them; its errors (unreachable server, HTTP error, no series in
      the window, malformed response) are one line, exit 1 and no output file.
  prometheus_test.py scrape TESSERA   Prometheus scrapes `tessera scheduler` and `tessera
      extender`; their values come back through /api/v1/query.
  prometheus_test.py alert SOURCE_DIR  the rules of deploy/monitoring/prometheusrule.yaml (`for:`
      shortened in a test copy) are loaded; a static exporter served here shows a GPU at 92 °C
      and one at 60 °C; GpuTemperatureHigh fires for the first only, with its annotation.

Exit 77 (skipped) without prometheus or promtool.
"""
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
    failures = {"advise": advise, "scrape": scrape, "alert": alert}[mode](arg)
    print(f"{mode}: {time.monotonic() - started:.1f} s")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
