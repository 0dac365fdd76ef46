#!/usr/bin/env python3
"""promtool over the alerts and over Tessera's /metrics.

  promtool_test.py rules SOURCE_DIR
      extracts deploy/monitoring/prometheusrule.yaml (scripts/prometheus-rules.py), runs
      `promtool check rules` on it, and `promtool test rules` on tests/prometheus/alerts_test.yaml
      against a copy without annotations; checks that the unit tests name every alert.
  promtool_test.py metrics TESSERA
      `promtool check metrics` (the exposition format and its lint) on the real /metrics of
      `tessera scheduler` (against a minimal API server) and of `tessera extender`.
  promtool_test.py agent TESSERA FAKE_NVML_DIR NODE_CONFIG
      the same on the /metrics of `tessera agent` running over the fake libnvidia-ml.so.1 of
      tests/agent (node NODE_CONFIG, against a minimal API server; no kubelet, so the device
      plugin step fails and is counted, which the exposition shows).

Exit 77 (skipped) without promtool.
"""
import os
import subprocess
import sys
import tempfile

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
        alerts = set()
        for g in doc["groups"]:
            for rule in g["rules"]:
                alerts.add(rule["alert"])
                rule.pop("annotations", None)
        with open(os.path.join(tmp, "rules.yaml"), "w") as f:
            yaml.safe_dump(doc, f, sort_keys=False)
        test_src = os.path.join(src, "tests/prometheus/alerts_test.yaml")
        with open(test_src) as f:
            text = f.read()
        tests = yaml.safe_load(text)
        firing, quiet = set(), set()
        for t in tests["tests"]:
            for case in t.get("alert_rule_test", []):
                (firing if case.get("exp_alerts") else quiet).add(case["alertname"])
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
            failures += check_metrics("tessera scheduler", url)
            _, body = promlib.http_get(url)
            for want in ('tessera_pending_pods{queue="team-a"} 1',
                         'tessera_queue_nominal_gpus{queue="team-a"} 8',
                         'tessera_queue_used_gpus{queue="team-a"} 1',
                         'tessera_rightsize_applied_total{mode="auto"} 0',
                         'tessera_pod_allocated_gpus{namespace="ml",pod="bound-0",'
                         'queue="team-a",model="H100-80GB",kind="exclusive"} 1'):
                if want not in body:
                    failures.append(f"tessera scheduler /metrics lacks {want!r}")
        failures += check_metrics("tessera extender", promlib.extender(procs, tessera, tmp))
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


def main():
    promlib.require("promtool")
    mode, arg = sys.argv[1:3]
    if mode == "agent":
        failures = agent(arg, *sys.argv[3:5])
    else:
        failures = rules(arg) if mode == "rules" else metrics(arg)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
