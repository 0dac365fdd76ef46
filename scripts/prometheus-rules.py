#!/usr/bin/env python3
"""Writes the rule groups of a PrometheusRule manifest as a plain Prometheus rule file.

The Prometheus Operator's PrometheusRule wraps a rule file in `spec`; promtool and a Prometheus
without the Operator read the file itself. Usage:

    scripts/prometheus-rules.py deploy/monitoring/prometheusrule.yaml OUT.yaml

Exit code 1 with one line on stderr when the input is not a PrometheusRule with spec.groups.
"""
import sys

import yaml


def extract(text):
    doc = yaml.safe_load(text)
    if not isinstance(doc, dict) or doc.get("kind") != "PrometheusRule":
        raise ValueError("not a PrometheusRule manifest")
    spec = doc.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("groups"), list):
        raise ValueError("spec.groups is missing or not a list")
    return {"groups": spec["groups"]}


def main(argv):
    if len(argv) != 3:
        print("usage: prometheus-rules.py PROMETHEUSRULE.yaml OUT.yaml", file=sys.stderr)
        return 2
    try:
        with open(argv[1], encoding="utf-8") as f:
            rules = extract(f.read())
    except (OSError, yaml.YAMLError, ValueError) as e:
        print(f"prometheus-rules.py: {argv[1]}: {e}", file=sys.stderr)
        return 1
    with open(argv[2], "w", encoding="utf-8") as f:
        yaml.safe_dump(rules, f, sort_keys=False, width=1000)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
