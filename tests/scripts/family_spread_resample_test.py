#!/usr/bin/env python3
"""scripts/family-spread-resample.py on made-up family JSON (CTest label "unit").

Usage: family_spread_resample_test.py SOURCE_DIR
"""
import json
import os
import random
import subprocess
import sys
import tempfile


def family(mixes):
    """mixes: name -> (candidate runs, reference runs), each a list of (at_100, at_130)."""
    out = []
    for name, (cand, ref) in mixes.items():
        pol = {}
        for p, runs in (("tessera", cand), ("fgd", ref)):
            pol[p] = {"runs": [{"seed": 42 + i, "unalloc_pct_at_100": a,
                                "unalloc_pct_at_130": b} for i, (a, b) in enumerate(runs)]}
        out.append({"name": name, "policies": pol})
    return {"mixes": out}


def run(script, doc, *args):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(doc, f)
        path = f.name
    try:
        return subprocess.run([sys.executable, script, path, *args], capture_output=True,
                              text=True, timeout=120)
    finally:
        os.unlink(path)


def main():
    script = os.path.join(sys.argv[1], "scripts", "family-spread-resample.py")
    rng = random.Random(3)
    noise = [(rng.gauss(5, 0.3), rng.gauss(4, 0.3)) for _ in range(40)]
    wide = [(5 + 3 * (a - 5), 4 + 3 * (b - 4)) for a, b in noise]
    errors = []

    # The candidate is the reference: on the same seeds its ratio is 1, always within the bound.
    r = run(script, family({"a": (noise, noise), "b": (noise, noise)}), "--draws", "200")
    if r.returncode != 0 or "within the bound on every mix: 100.00% of draws" not in r.stdout:
        errors.append("identical policies: " + r.stdout + r.stderr)
    # Three times the reference's spread on every seed: never within 1.5x.
    r = run(script, family({"a": (wide, noise)}), "--draws", "200")
    if r.returncode != 0 or "within the bound on every mix: 0.00% of draws" not in r.stdout:
        errors.append("3x spread: " + r.stdout + r.stderr)
    if "a                        tessera 0%" not in r.stdout:
        errors.append("3x spread names no mix: " + r.stdout)
    # Bad input: too few seeds, no runs.
    r = run(script, family({"a": (noise[:15], noise[:15])}))
    if r.returncode != 1 or "needs a run of at least 20 seeds" not in r.stderr:
        errors.append("too few seeds: %d %s" % (r.returncode, r.stderr))
    r = run(script, {"mixes": [{"name": "a", "policies": {"tessera": {}, "fgd": {}}}]})
    if r.returncode != 1 or "no per-seed runs" not in r.stderr:
        errors.append("no runs: %d %s" % (r.returncode, r.stderr))

    for e in errors:
        print("FAIL:", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
