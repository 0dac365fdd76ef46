#!/usr/bin/env python3
"""promtool over the alerts and over Tessera's /metrics.

  promtool_test.py rules SOURCE_DIR
      extracts deploy/monitoring/prometheusrule.yaml (scripts/prometheus-rules.py), runs
      `promtool check rules` on it, and `promtool test rules` on tests/prometheus/alerts_test.yaml
      against a copy without annotations; checks that the unit tests name every alert.
  promtool_test.py metrics TESSERA
      `promtool check metrics` (the exposition format and its lint) on the real /metrics of
      `tessera scheduler` (against a minimal API server) and of `tessera extender`.

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


def check_metrics(name, url):
    status, body = promlib.http_get(url)
    if status != 200:
        return [f"{name}: GET {url}: HTTP {status}"]
    r = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True,
                       text=True, timeout=60)
    print(f"--- {name} /metrics ({len(body.splitlines())} lines)")
    print(body)
    if r.returncode != 0 or r.stdout.strip() or r.stderr.strip():
        return [f"{name}: promtool check metrics: {(r.stdout + r.stderr).strip()}"]
    return []


def metrics(tessera):
    failures = []
    with tempfile.TemporaryDirectory() as tmp, promlib.Processes() as procs:
        with promlib.scheduler(procs, tessera, tmp) as url:
            failures += check_metrics("tessera scheduler", url)
            _, body = promlib.http_get(url)
            for want in ('tessera_pending_pods{queue="team-a"} 1',
                         'tessera_queue_nominal_gpus{queue="team-a"} 8',
                         'tessera_queue_used_gpus{queue="team-a"} 0',
                         'tessera_rightsize_applied_total{mode="auto"} 0'):
                if want not in body:
                    failures.append(f"tessera scheduler /metrics lacks {want!r}")
        failures += check_metrics("tessera extender", promlib.extender(procs, tessera, tmp))
    return failures


def main():
    promlib.require("promtool")
    mode, arg = sys.argv[1:3]
    failures = rules(arg) if mode == "rules" else metrics(arg)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
