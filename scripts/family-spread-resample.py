#!/usr/bin/env python3
"""How often a family run of K seeds meets the per-mix spread bound, from a run of many seeds.

`tessera sim family --json F` records every run seed by seed. This draws K seeds out of the
run's seeds many times (without replacement, the same seeds for both policies, as the protocol
runs them) and counts the draws in which the candidate's seed sd is at most LIMIT x the
reference's on every mix, at 100% arrival and at the end. As a yardstick it also holds the
reference against itself: its sd on K seeds against its sd on K other seeds of the same run,
the chance that a policy with exactly the reference's spread meets the bound. Usage:

    scripts/family-spread-resample.py FAMILY.json [--seeds K] [--draws N] [--limit 1.5]
        [--candidate tessera] [--reference fgd] [--rng-seed 1]

Prints the two chances, the mean number of mixes that pass, and the mixes the candidate passes
in fewer than 95% of draws. Exit code 1 with one line on stderr on bad input (a run with fewer
than 2K seeds, or a mix without both policies' runs).
"""
import argparse
import json
import random
import statistics
import sys


def spreads_ok(cand, ref, limit):
    for point in (0, 1):
        a = statistics.stdev(x[point] for x in cand)
        b = statistics.stdev(x[point] for x in ref)
        if b == 0:
            if a > 0:
                return False
        elif a / b > limit:
            return False
    return True


def load(path, candidate, reference):
    with open(path) as f:
        doc = json.load(f)
    mixes = []
    for m in doc.get("mixes", []):
        pol = m.get("policies", {})
        if candidate not in pol or reference not in pol:
            raise ValueError("mix %s lacks %s or %s" % (m.get("name"), candidate, reference))
        runs = [pol[p].get("runs") for p in (candidate, reference)]
        if not runs[0] or not runs[1]:
            raise ValueError("mix %s has no per-seed runs (an older JSON?)" % m.get("name"))
        if [r["seed"] for r in runs[0]] != [r["seed"] for r in runs[1]]:
            raise ValueError("mix %s: the two policies ran different seeds" % m.get("name"))
        pairs = [[(r["unalloc_pct_at_100"], r["unalloc_pct_at_130"]) for r in rs] for rs in runs]
        mixes.append((m["name"], pairs[0], pairs[1]))
    if not mixes:
        raise ValueError("no mix in " + path)
    return mixes


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("family_json")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--limit", type=float, default=1.5)
    ap.add_argument("--candidate", default="tessera")
    ap.add_argument("--reference", default="fgd")
    ap.add_argument("--rng-seed", type=int, default=1)
    a = ap.parse_args(argv)
    try:
        mixes = load(a.family_json, a.candidate, a.reference)
        n = len(mixes[0][1])
        if a.seeds < 2 or 2 * a.seeds > n:
            raise ValueError("--seeds %d needs a run of at least %d seeds (this one has %d)"
                             % (a.seeds, 2 * a.seeds, n))
        if a.draws < 1:
            raise ValueError("--draws must be at least 1")
    except (OSError, ValueError, KeyError, TypeError) as e:
        print("family-spread-resample: %s" % e, file=sys.stderr)
        return 1
    rng = random.Random(a.rng_seed)
    all_cand = all_ref = 0
    cand_mix = {name: 0 for name, _, _ in mixes}
    ref_mix = {name: 0 for name, _, _ in mixes}
    for _ in range(a.draws):
        drawn = rng.sample(range(n), 2 * a.seeds)
        first, other = drawn[:a.seeds], drawn[a.seeds:]
        every_cand = every_ref = True
        for name, cand, ref in mixes:
            c = spreads_ok([cand[i] for i in first], [ref[i] for i in first], a.limit)
            r = spreads_ok([ref[i] for i in first], [ref[i] for i in other], a.limit)
            cand_mix[name] += c
            ref_mix[name] += r
            every_cand &= c
            every_ref &= r
        all_cand += every_cand
        all_ref += every_ref
    d = float(a.draws)
    print("%d draws of %d of the run's %d seeds, sd bound %gx, %d mixes"
          % (a.draws, a.seeds, n, a.limit, len(mixes)))
    print("%s within the bound on every mix: %.2f%% of draws (%.1f mixes on average)"
          % (a.candidate, 100 * all_cand / d, sum(cand_mix.values()) / d))
    print("%s against itself on other seeds: %.2f%% of draws (%.1f mixes on average)"
          % (a.reference, 100 * all_ref / d, sum(ref_mix.values()) / d))
    for name, _, _ in mixes:
        if cand_mix[name] / d < 0.95:
            print("  %-24s %s %.0f%%, %s against itself %.0f%%"
                  % (name, a.candidate, 100 * cand_mix[name] / d, a.reference,
                     100 * ref_mix[name] / d))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
