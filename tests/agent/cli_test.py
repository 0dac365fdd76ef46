#!/usr/bin/env python3
"""`tessera agent --once --print-inventory` through the real dlopen path.

With the fake libnvidia-ml.so.1 on LD_LIBRARY_PATH it must print the node's inventory (the
tessera.io/gpu-inventory value and annotation) and the GFD labels for tests/agent/node_a100.json;
with no NVML on the search path it must exit 1 with the one-line message and print nothing.
Usage: cli_test.py TESSERA FAKE_NVML_DIR EMPTY_DIR CONFIG
"""
import json
import os
import subprocess
import sys


def run(tessera, lib_dir, config):
    env = dict(os.environ, LD_LIBRARY_PATH=lib_dir, TESSERA_FAKE_NVML_CONFIG=config)
    return subprocess.run([tessera, "agent", "--once", "--print-inventory"], env=env,
                          capture_output=True, text=True, timeout=60)


def main():
    tessera, fake_dir, empty_dir, config = sys.argv[1:5]
    failures = []

    r = run(tessera, fake_dir, config)
    if r.returncode != 0:
        failures.append(f"with the fake NVML: exit {r.returncode}: {r.stderr.strip()}")
    else:
        out = json.loads(r.stdout)
        inv = out["inventory"]
        want = [(0, "GPU-cli-0", "A100-80GB", True, "3g.40gb@0 2g.20gb@4 1g.10gb@6"),
                (1, "GPU-cli-1", "A100-80GB", False, "")]
        got = [(g["index"], g["uuid"], g["model"], g.get("mig_enabled", False),
                g.get("mig_layout", "")) for g in inv]
        if got != want:
            failures.append(f"inventory {got} != {want}")
        if json.loads(out["annotation"]) != inv:
            failures.append("the annotation string is not the inventory")
        labels = out["labels"]
        for key, value in [("nvidia.com/gpu.count", "2"), ("nvidia.com/mig.capable", "true")]:
            if labels.get(key) != value:
                failures.append(f"label {key}={labels.get(key)!r}, want {value!r}")
        if "A100" not in labels.get("nvidia.com/gpu.product", ""):
            failures.append(f"gpu.product label {labels.get('nvidia.com/gpu.product')!r}")

    r = run(tessera, empty_dir, config)
    if r.returncode != 1 or r.stdout.strip():
        failures.append(f"without NVML: exit {r.returncode}, stdout {r.stdout!r}")
    if "libnvidia-ml.so.1 not found" not in r.stderr or len(r.stderr.strip().splitlines()) != 1:
        failures.append(f"without NVML: stderr {r.stderr!r}")

    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
