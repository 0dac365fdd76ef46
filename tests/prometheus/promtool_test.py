#!/usr/bin/env python3
"""promtool over the alerts and over Tessera's /metrics.

  promtool_test.py rules SOURCE_DIR
      extracts deploy/monitoring/prometheusrule.yaml (scripts/prometheus-rules.py), runs
      `promtool check rules` on it, and `promtool test rules` on tests/prometheus/alerts_test.yaml
      against a copy without annotations; checks that the unit tests name every alert and
      evaluate every recording rule (a promql_expr_test whose expr is the rule's name).
  promtool_test.py metrics TESSERA
      `promtool check metrics` (the exposition format and its lint) on the real /metrics of
      `tessera scheduler` (against a minimal API server), of `tessera extender` and of
      `tessera webhook` (after one pod review, whose patch it counts).
  promtool_test.py agent TESSERA FAKE_NVML_DIR NODE_CONFIG
      the same on the /metrics of `tessera agent` running over the fake libnvidia-ml.so.1 of
      tests/agent (node NODE_CONFIG, against a minimal API server; no kubelet, so the device
      plugin step fails and is counted, which the exposition shows).
  promtool_test.py demo TESSERA
      the same on the /metrics of a small `tessera demo --metrics-listen`, whose values must
      agree with the demo's --json output; SIGTERM must end --metrics-hold.

Exit 77 (skipped) without promtool.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import promlib  # noqa: E402


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, **kw)


def rules(src):
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        full = os.path.join(tmp, "full.yaml")
        r = run([sys.executable, os.path.join(src, "scripts/prometheus-rules.py"),
                 os.path.join(src, "deploy/monitoring/prometheusrule.yaml"), full])
        if r.returncode != 0:
            return [f"prometheus-rules.py: {r.stderr.strip()}"]
        r = run(["promtool", "check", "rules", full])
        print(r.stdout, r.stderr)
        if r.returncode != 0:
            failures.append("promtool check rules failed")
        with open(full) as f:
            doc = yaml.safe_load(f)
        alerts, records = set(), set()
        for g in doc["groups"]:
            for rule in g["rules"]:
                if "record" in rule:
                    records.add(rule["record"])
                else:
                    alerts.add(rule["alert"])
                rule.pop("annotations", None)
        with open(os.path.join(tmp, "rules.yaml"), "w") as f:
            yaml.safe_dump(doc, f, sort_keys=False)
        test_src = os.path.join(src, "tests/prometheus/alerts_test.yaml")
        with open(test_src) as f:
            text = f.read()
        tests = yaml.safe_load(text)
        firing, quiet, evaluated = set(), set(), set()
        for t in tests["tests"]:
            for case in t.get("alert_rule_test", []):
                (firing if case.get("exp_alerts") else quiet).add(case["alertname"])
            for case in t.get("promql_expr_test", []):
                if case.get("exp_samples"):
                    evaluated.add(case["expr"].strip())
        for r in sorted(records - evaluated):
            failures.append(f"alerts_test.yaml has no promql_expr_test of {r} with samples")
        for a in sorted(alerts):
            if a not in firing:
                failures.append(f"alerts_test.yaml has no case where {a} fires")
            if a not in quiet:
                failures.append(f"alerts_test.yaml has no case where {a} stays quiet")
        for a in sorted((firing | quiet) - alerts):
            failures.append(f"alerts_test.yaml tests {a}, which the rules do not define")
        with open(os.path.join(tmp, "alerts_test.yaml"), "w") as f:
            f.write(text)
        r = run(["promtool", "test", "rules", "alerts_test.yaml"], cwd=tmp)
        print(r.stdout, r.stderr)
        if r.returncode != 0:
            failures.append("promtool test rules failed")
    return failures


def check_metrics(name, url, allowed=()):
    """promtool check metrics on the body of `url`: no finding other than those in `allowed`
    (exact lines of promtool's output)."""
    status, body = promlib.http_get(url)
    if status != 200:
        return [f"{name}: GET {url}: HTTP {status}"]
    r = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True,
                       text=True, timeout=60)
    print(f"--- {name} /metrics ({len(body.splitlines())} lines)")
    print(body)
    findings = [line for line in (r.stdout + r.stderr).splitlines()
                if line.strip() and line.strip() not in allowed]
    if findings or (r.returncode != 0 and not allowed):
        return [f"{name}: promtool check metrics: {chr(10).join(findings)}"]
    return []


def metrics(tessera):
    failures = []
    with tempfile.TemporaryDirectory() as tmp, promlib.Processes() as procs:
        with promlib.scheduler(procs, tessera, tmp) as url:
            wants = ('tessera_pending_pods{queue="team-a"} 1',
                     'tessera_queue_nominal_gpus{queue="team-a"} 8',
                     'tessera_queue_used_gpus{queue="team-a"} 1',
                     'tessera_rightsize_applied_total{mode="auto"} 0',
                     'tessera_pod_allocated_gpus{namespace="ml",pod="bound-0",'
                     'queue="team-a",model="H100-80GB",kind="exclusive"} 1')
            # The first exposition may precede the first cycle's accounting: wait until the
            # cycle has run (or the time is up), then judge the body.
            def body():
                return promlib.http_get(url)[1]
            try:
                promlib.wait_for("tessera scheduler /metrics of the first cycle",
                                 lambda: all(w in body() for w in wants), timeout=60)
            except TimeoutError:
                pass
            failures += check_metrics("tessera scheduler", url)
            text = body()
            for want in wants:
                if want not in text:
                    failures.append(f"tessera scheduler /metrics lacks {want!r}")
        failures += check_metrics("tessera extender", promlib.extender(procs, tessera, tmp))
        url = promlib.webhook(procs, tessera, tmp)
        failures += check_metrics("tessera webhook", url)
        _, body = promlib.http_get(url)
        for want in ("tessera_webhook_containers_patched_total 1",):
            if want not in body:
                failures.append(f"tessera webhook /metrics lacks {want!r}")
    return failures


def agent(tessera, fake_nvml_dir, node_config):
    failures = []
    with tempfile.TemporaryDirectory() as tmp, promlib.Processes() as procs:
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "gpu-1", "uid": "node-gpu-1", "resourceVersion": "1",
                             "labels": {}, "annotations": {}},
                "status": {}}
        objects = {"/api/v1/nodes": [node], "/api/v1/nodes/gpu-1": node, "/api/v1/pods": [],
                   "/apis/tessera.io/v1alpha1/miglayouts": []}
        with promlib.FakeApiServer(objects) as api:
            kubeconfig = api.kubeconfig(os.path.join(tmp, "kubeconfig"))
            port = promlib.free_port()
            env = dict(os.environ, LD_LIBRARY_PATH=fake_nvml_dir,
                       TESSERA_FAKE_NVML_CONFIG=node_config)
            dirs = {d: os.path.join(tmp, d) for d in ("plugins", "cdi", "mps", "state")}
            for d in dirs.values():
                os.makedirs(d)
            log = open(os.path.join(tmp, "agent.log"), "w")
            p = procs.start([tessera, "agent", "--node", "gpu-1", "--kubeconfig", kubeconfig,
                             "--metrics-address", f"127.0.0.1:{port}", "--interval", "1",
                             "--plugin-dir", dirs["plugins"], "--cdi-dir", dirs["cdi"],
                             "--mps-root", dirs["mps"], "--state-dir", dirs["state"]],
                            stderr=log, env=env)
            url = f"http://127.0.0.1:{port}/metrics"

            def served():
                if p.poll() is not None:
                    raise RuntimeError("tessera agent exited: " + open(log.name).read()[-2000:])
                status, body = promlib.http_get(url, timeout=2)
                return status == 200 and "DCGM_FI_DEV_FB_USED{" in body

            promlib.wait_for("tessera agent /metrics with GPU series", served, timeout=60)
            # DCGM_FI_DEV_FB_USED keeps dcgm-exporter's label names (UUID, modelName,
            # Hostname, GPU_I_PROFILE, GPU_I_ID) so that dashboards and `tessera advise` read
            # it as they read the exporter's; that is the only finding promtool may report.
            failures += check_metrics(
                "tessera agent", url,
                allowed=("DCGM_FI_DEV_FB_USED label names should be written in 'snake_case' "
                         "not 'camelCase'",))
            _, body = promlib.http_get(url)
            for want in ("# TYPE tessera_agent_pod_gpu_memory_used_bytes gauge",
                         'tessera_agent_gpu_unattributed_memory_used_bytes{node="gpu-1",gpu="0",'
                         'gpu_uuid="GPU-cli-0"} 2147483648'):
                if want not in body:
                    failures.append(f"tessera agent /metrics lacks {want!r}")
    return failures


def parse_samples(body):
    """[(name, {label: value}, float)] of the exposition's sample lines."""
    samples = []
    for line in body.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$', line)
        if not m:
            raise ValueError(f"unparsable sample line {line!r}")
        labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"',
                                 m.group(2) or ""))
        samples.append((m.group(1), labels, float(m.group(3))))
    return samples


def demo(tessera):
    failures = []
    policies, seed = ["bestfit", "tessera"], 42
    with tempfile.TemporaryDirectory() as tmp, promlib.Processes() as procs:
        report = os.path.join(tmp, "demo.json")
        port = promlib.free_port()
        log = open(os.path.join(tmp, "demo.log"), "w")
        p = procs.start([tessera, "demo", "--nodes", "12", "--seeds", str(seed), "--policies",
                         ",".join(policies), "--threads", "1", "--json", report,
                         "--metrics-listen", f"127.0.0.1:{port}", "--metrics-hold", "120"],
                        stderr=log)
        url = f"http://127.0.0.1:{port}/metrics"

        def written():
            if p.poll() is not None:
                raise RuntimeError(f"tessera demo exited with {p.returncode}: " +
                                   open(log.name).read()[-2000:])
            return os.path.exists(report)

        promlib.wait_for("tessera demo --json", written, timeout=120)
        failures += check_metrics("tessera demo", url)
        _, body = promlib.http_get(url)
        samples = parse_samples(body)

        def values(name, **want):
            return [v for n, labels, v in samples if n == name and
                    all(labels.get(k) == str(x) for k, x in want.items())]

        def expect(what, got, want, tol=1e-6):
            if abs(got - want) > tol:
                failures.append(f"{what}: /metrics says {got}, --json says {want}")

        with open(report) as f:
            j = json.load(f)
        gpus = j["generator"]["gpus"]
        expect("tessera_demo_gpus summed", sum(values("tessera_demo_gpus")), gpus)
        expect("tessera_demo_running", sum(values("tessera_demo_running")), 0)
        expect("tessera_demo_experiments_completed_total",
               sum(values("tessera_demo_experiments_completed_total")), len(policies))
        for pol in policies:
            run = j["policies"][pol]["runs"][0]
            at = {"policy": pol, "seed": seed}
            expect(f"{pol} placed", sum(values("tessera_demo_pods_placed_total", **at)),
                   run["placed"])
            expect(f"{pol} not placed", sum(values("tessera_demo_pods_not_placed_total", **at)),
                   run["pods"] - run["placed"])
            expect(f"{pol} decisions",
                   sum(values("tessera_demo_scheduling_decisions_total", **at)), run["pods"])
            expect(f"{pol} decision histogram count",
                   sum(values("tessera_demo_decision_duration_seconds_count", **at)), run["pods"])
            expect(f"{pol} unallocated at the end",
                   sum(values("tessera_demo_gpu_unallocated_ratio", stage="end", **at)),
                   run["unalloc_pct_at_130"] / 100)
            expect(f"{pol} unallocated at 100% arrival",
                   sum(values("tessera_demo_gpu_unallocated_ratio", stage="arrival_100pct", **at)),
                   run["unalloc_pct_at_100"] / 100)
            expect(f"{pol} fragmentation at 90% arrival",
                   sum(values("tessera_demo_gpu_fragmentation_ratio", stage="arrival_90pct",
                              **at)), run["frag_ratio_at_90"] / 100)
            allocated = gpus * (1 - run["unalloc_pct_at_130"] / 100)
            expect(f"{pol} allocated GPUs per model",
                   sum(values("tessera_demo_gpu_allocated_gpus", **at)), allocated, 1e-3)
            expect(f"{pol} allocated GPUs per node",
                   sum(values("tessera_demo_node_gpu_allocated_gpus", **at)), allocated, 1e-3)
        p.send_signal(signal.SIGTERM)
        start = time.monotonic()
        try:
            rc = p.wait(timeout=10)
            if rc != 0:
                failures.append(f"tessera demo exited with {rc} on SIGTERM")
        except subprocess.TimeoutExpired:
            failures.append("SIGTERM did not end --metrics-hold within 10 s")
        print(f"demo stopped {time.monotonic() - start:.2f} s after SIGTERM")
    return failures


def main():
    promlib.require("promtool")
    mode, arg = sys.argv[1:3]
    if mode == "agent":
        failures = agent(arg, *sys.argv[3:5])
    elif mode == "demo":
        failures = demo(arg)
    else:
        failures = rules(arg) if mode == "rules" else metrics(arg)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
