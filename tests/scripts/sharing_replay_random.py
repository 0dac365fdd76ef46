#!/usr/bin/env python3
"""Random sharing scenarios replayed through the scheduler core beside `sim sharing`.

Draws scenarios (docs/SHARING.md, "Scenario files") from fixed seeds: node groups of
MIG-capable and plain GPU models, some with static MIG layouts; workload classes of fractions
and whole GPUs (one count or several) with mixed isolation weights, model lists, priorities
(so preemption happens) and short or long patience; node protection on or off. Every class fits
a node group by construction. Each scenario goes through
`tessera-bench-sharing-replay --require-same-placements --require-identical-placements`, which
exits non-zero unless the scheduler places every workload at the same time, on the same node and
GPUs, as the same kind of slice, as the simulation does. With --restart-every S the scheduler
core is replaced every S simulated seconds instead, as after a restart: the two paths may then
differ, and only the bench's own checks apply (every bind's assignment is valid, nothing is
given twice at once, every bound pod is adopted, the counts add up). With --stale-reports as
well, each new core is told that MIG is off on every GPU, whatever instances bound pods hold.
With --shrink-host F as well, every other new core is told that the nodes have only F of their
CPU and memory, so bound pods run beyond what their node has (and must keep their GPUs).
A failing scenario is kept in the output directory, with the bench's report beside it.

Usage: sharing_replay_random.py --bench PATH [--count N] [--seed S | --seeds S,S,...]
                                [--restart-every S [--stale-reports] [--shrink-host F]]
                                [--keep DIR]
Exit status: 0 when every scenario agrees, 1 otherwise, 2 on bad usage.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

# GPU memory in GiB, rounded down, and a legal static layout for the MIG-capable models.
MODELS = {
    "T4": (15, None),
    "L4": (22, None),
    "A10": (22, None),
    "V100M32": (32, None),
    "A30": (24, "1g.6gb 1g.6gb 2g.12gb"),
    "A100-40GB": (40, "1g.5gb 1g.5gb 2g.10gb 3g.20gb"),
    "A100-80GB": (80, "2g.20gb 2g.20gb 2g.20gb 1g.10gb"),
    "H100-80GB": (80, "1g.10gb 1g.10gb 2g.20gb 3g.40gb"),
}


def scenario(seed):
    r = random.Random(seed)
    groups = []
    for i, model in enumerate(r.sample(sorted(MODELS), r.randint(1, 4))):
        gpus = r.choice([1, 2, 4, 8])
        g = {
            "name_prefix": "g%d" % i,
            "count": r.randint(1, 4),
            "gpu_model": model,
            "gpus_per_node": gpus,
            "cpu_cores": r.choice([16, 32, 64, 128]),
            "memory_gib": r.choice([128, 256, 512, 1024]),
        }
        layout = MODELS[model][1]
        if layout and r.random() < 0.5:
            g["static_mig_layout"] = layout
            g["static_mig_gpus"] = r.randint(1, gpus)
        groups.append(g)
    classes = []
    for c in range(r.randint(1, 5)):
        home = r.choice(groups)  # the group the class's largest workload fits
        mem = MODELS[home["gpu_model"]][0]
        lo = r.randint(1, max(1, mem // 2))
        k = {
            "name": "c%d" % c,
            "arrivals_per_hour": round(r.uniform(0.5, 40), 2),
            "memory_gib": [lo, r.randint(lo, mem)],
            "duration_s": [r.randint(60, 3600), r.randint(3600, 14400)],
            "patience_s": r.choice([60, 600, 1800, 7200]),
        }
        if r.random() < 0.35:
            counts = sorted({r.choice([1, 2, 4, 8]) for _ in range(r.randint(1, 3))})
            counts = [n for n in counts if n <= home["gpus_per_node"]] or [1]
            k["whole_gpus"] = counts if len(counts) > 1 else counts[0]
        else:
            a = r.randint(1, 60)
            k["compute_pct"] = [a, r.randint(a, 100)]
        isolation = {
            name: round(r.uniform(0.1, 1), 2)
            for name in ("strict", "standard", "best-effort")
            if r.random() < 0.6
        }
        if isolation:
            k["isolation"] = isolation
        cores = home["cpu_cores"]
        c1 = r.randint(1, max(1, cores // 4))
        k["cpu_cores"] = [c1, r.randint(c1, max(c1, cores // 2))]
        hm = home["memory_gib"]
        h1 = r.randint(1, max(1, hm // 8))
        k["host_memory_gib"] = [h1, r.randint(h1, max(h1, hm // 4))]
        if r.random() < 0.5:
            k["priority"] = r.randint(0, 3)
        if r.random() < 0.3:
            allowed = [g["gpu_model"] for g in groups if MODELS[g["gpu_model"]][0] >= mem]
            k["gpu_models"] = sorted(
                {home["gpu_model"]} | set(r.sample(allowed, r.randint(0, len(allowed)))))
        classes.append(k)
    s = {
        "name": "random-%d" % seed,
        "seed": seed,
        "horizon_s": r.choice([3600, 7200, 14400]),
        "nodes": groups,
        "workloads": {"classes": classes},
    }
    strategies = {}
    if r.random() < 0.5:
        strategies = {"timeslice_replicas": r.randint(1, 8), "mps_clients": r.randint(1, 8)}
    if r.random() < 0.4:
        strategies["tessera_protection"] = "on"
    if strategies:
        s["strategies"] = strategies
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", required=True, help="tessera-bench-sharing-replay")
    ap.add_argument("--count", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1, help="first scenario seed")
    ap.add_argument("--seeds", help="comma-separated scenario seeds, instead of --seed/--count")
    ap.add_argument("--restart-every", type=int, default=0,
                    help="replace the scheduler core every S simulated seconds (checks only)")
    ap.add_argument("--stale-reports", action="store_true",
                    help="with --restart-every: new cores are told that MIG is off everywhere")
    ap.add_argument("--shrink-host", type=float, default=1.0,
                    help="with --restart-every: every other new core sees this fraction of the "
                         "nodes' CPU and memory")
    ap.add_argument("--keep", help="directory for failing scenarios (default: a temporary one)")
    args = ap.parse_args()
    try:
        seeds = ([int(x) for x in args.seeds.split(",")] if args.seeds else
                 list(range(args.seed, args.seed + args.count)))
    except ValueError:
        seeds = []
    if (not seeds or args.count < 1 or args.restart_every < 0 or
            ((args.stale_reports or args.shrink_host != 1.0) and args.restart_every == 0) or
            not 0.01 <= args.shrink_host <= 1.0 or not os.access(args.bench, os.X_OK)):
        print("need --count >= 1 or --seeds with integers, --restart-every with --stale-reports "
              "or --shrink-host, --shrink-host in 0.01..1, and an executable --bench",
              file=sys.stderr)
        return 2
    out = args.keep or tempfile.mkdtemp(prefix="sharing-replay-random-")
    os.makedirs(out, exist_ok=True)
    failed = []
    for seed in seeds:
        path = os.path.join(out, "random-%d.json" % seed)
        with open(path, "w") as f:
            json.dump(scenario(seed), f, indent=1)
        mode = (["--restart-every", str(args.restart_every)] if args.restart_every > 0 else
                ["--require-same-placements", "--require-identical-placements"])
        if args.stale_reports:
            mode.append("--stale-reports")
        if args.shrink_host != 1.0:
            mode += ["--shrink-host", str(args.shrink_host)]
        run = subprocess.run([args.bench, "--scenario", path] + mode,
                             capture_output=True, text=True, timeout=600)
        last = (run.stdout.strip().splitlines() or [""])[-1]
        print("scenario %d: exit %d; %s" % (seed, run.returncode, last), flush=True)
        if run.returncode != 0:
            failed.append(seed)
            with open(path + ".report.txt", "w") as f:
                f.write(run.stdout + run.stderr)
        else:
            os.remove(path)
    if not failed and not args.keep:
        os.rmdir(out)
    if failed:
        print("%d of %d scenarios failed: %s (scenarios and reports in %s)" %
              (len(failed), len(seeds), ", ".join(map(str, failed)), out))
        return 1
    print("%d of %d scenarios %s" % (len(seeds), len(seeds),
                                     "passed every check" if args.restart_every > 0 else
                                     "placed identically by both paths"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
