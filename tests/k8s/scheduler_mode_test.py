#!/usr/bin/env python3
"""`tessera scheduler` against a real control plane: 100 kwok GPU nodes, 1,000 pods.

Run through controlplane.py (which exports the connection variables), with the
tessera binary in TESSERA_BINARY:

  tests/k8s/controlplane.py -- python3 tests/k8s/scheduler_mode_test.py

70 H100-80GB and 30 A100-80GB nodes with 8 GPUs each and a tessera.io/gpu-inventory
annotation; 1,000 pods with schedulerName tessera in three queues of the
scheduler's configuration: team-a and team-b share the cohort "research"
(team-a lends at most 80 H100 GPU-equivalents, team-b borrows at most 80), and
team-c, without a cohort, has a quota of 32 H100 GPUs for far more demand. The
pods are whole-GPU pods (1, 2, 4 GPUs), memory and compute shares, 8-pod gangs
(tessera.io/gang, tessera.io/min-member: 8), one 12-GPU pod no node can hold,
a gang with 7 of its 8 members, and one team-c gang of 8 x 8 GPUs its quota can
never admit. They are created
in a shuffled stream while a watch, opened before the first one, records every
binding.

Checks, all read back from the API server: every team-a and team-b pod that
fits is bound exactly once and never moves, no pod is deleted, each
tessera.io/assignment is valid (docs/OPERATIONS.md) and matches the node's
inventory, no GPU is over-committed, gangs are all-or-nothing, the queues'
usage (GPU-equivalents by flavor) respects nominal quota, borrowing and lending
limits, team-c's quota binds (its pending pods would not fit the quota, yet the
cluster has room for them), every pending pod carries PodScheduled=False with a
reason, and bound pods reach Running. Prints throughput and durations.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import k8slib  # noqa: E402
import sched_checks as sc  # noqa: E402

NS = "sched-e2e"
H100_NODES = 70
A100_NODES = 30
EQUIVALENTS = {"H100-80GB": 1.0, "A100-80GB": 0.5}
# Quotas in GPU-equivalents: queue -> flavor -> (model, nominal, borrowingLimit, lendingLimit).
QUOTAS = {
    "team-a": {"h100": ("H100-80GB", 280, None, 80), "a100": ("A100-80GB", 60, None, None)},
    "team-b": {"h100": ("H100-80GB", 120, 80, None), "a100": ("A100-80GB", 60, None, None)},
    "team-c": {"h100": ("H100-80GB", 32, None, None)},
}
COHORT = {"team-a": "research", "team-b": "research", "team-c": ""}

CONFIG = f"""\
schedulerName: tessera
policy: tessera
binding:
  threads: 8
podConditions: true
podEvents: true
gangSettleSeconds: 2
admission:
  backfill: true
  reservations: true
  preemption: false
  fairSharing: true
  gpuEquivalents: {{H100-80GB: 1.0, A100-80GB: 0.5}}
queues:
  - name: team-a
    cohort: research
    weight: 1
    flavors:
      - {{name: h100, models: [H100-80GB], nominal: {{gpu: 280}}, lendingLimit: {{gpu: 80}}}}
      - {{name: a100, models: [A100-80GB], nominal: {{gpu: 60}}}}
  - name: team-b
    cohort: research
    weight: 2
    flavors:
      - {{name: h100, models: [H100-80GB], nominal: {{gpu: 120}}, borrowingLimit: {{gpu: 80}}}}
      - {{name: a100, models: [A100-80GB], nominal: {{gpu: 60}}}}
  - name: team-c
    weight: 1
    flavors:
      - {{name: h100, models: [H100-80GB], nominal: {{gpu: 32}}}}
"""


def build_pods(rng: random.Random) -> tuple[list[list[dict]], dict[str, dict]]:
    """Returns the creation units (a single pod, or the 8 pods of a gang, created together)
    and, per pod name, what the test expects of it."""
    units: list[list[dict]] = []
    meta: dict[str, dict] = {}

    def single(queue: str, name: str, fits: bool = True, **kw) -> None:
        units.append([k8slib.gpu_pod(name, NS, queue=queue, **kw)])
        meta[name] = {"queue": queue, "gang": "", "fits": fits}

    def gang(queue: str, name: str, gpus: int, fits: bool = True, members_: int = 8) -> None:
        members = []
        for k in range(members_):
            pod_name = f"{name}-{k}"
            members.append(k8slib.gpu_pod(pod_name, NS, gpus=gpus, queue=queue, gang=name,
                                          min_member=8))
            meta[pod_name] = {"queue": queue, "gang": name, "fits": fits}
        units.append(members)

    def shares(queue: str, prefix: str, n: int) -> None:
        for i in range(n):
            if i % 2:
                single(queue, f"{prefix}-mem-{i}", gpus=None, gpu_memory="16Gi")
            else:
                single(queue, f"{prefix}-cmp-{i}", gpus=None, gpu_compute=25)

    # team-a: 360 pods, about 184 GPU-equivalents on H100.
    for g in range(3):
        gang("team-a", f"a-gang-{g}", 1)
    for i in range(50):
        single("team-a", f"a-g1-{i}", gpus=1)
    for i in range(15):
        single("team-a", f"a-g2-{i}", gpus=2)
    for i in range(5):
        single("team-a", f"a-g4-{i}", gpus=4)
    shares("team-a", "a", 266)
    # team-b: 480 pods, about 292 GPU-equivalents: more than its guaranteed H100 quota.
    for g in range(4):
        gang("team-b", f"b-gang-{g}", 2)
    for i in range(80):
        single("team-b", f"b-g1-{i}", gpus=1)
    for i in range(20):
        single("team-b", f"b-g2-{i}", gpus=2)
    for i in range(8):
        single("team-b", f"b-g4-{i}", gpus=4)
    single("team-b", "b-g12-0", fits=False, gpus=12)  # no node has 12 GPUs
    gang("team-b", "b-short", 1, fits=False, members_=7)  # min-member 8, only 7 pods exist
    shares("team-b", "b", 332)
    # team-c: 160 pods, about 148 GPU-equivalents for a quota of 32; its big gang never fits.
    gang("team-c", "c-gang-0", 8, fits=False)
    for i in range(100):
        single("team-c", f"c-g1-{i}", fits=None, gpus=1)
    for i in range(20):
        single("team-c", f"c-g2-{i}", fits=None, gpus=2)
    for i in range(32):
        single("team-c", f"c-cmp-{i}", fits=None, gpus=None, gpu_compute=25)
    rng.shuffle(units)
    return units, meta


def pod_charge_milli(pod: dict, assignment: dict, model: str) -> int:
    """GPU-equivalent thousandths the pod's assignment costs its queue: the slice it holds
    (docs/OPERATIONS.md, queues): whole GPUs, a share's milli, an MPS client the larger of its
    threads and its memory limit, a time-slice replica its declared memory, a MIG instance its
    compute slices (of 7 on A100/H100)."""
    kind = assignment.get("kind")
    card = k8slib.MODELS[model][1]

    def share(mib: int, whole: int) -> int:
        return min(1000, -(-1000 * mib // whole))
    if kind == "share":
        milli = int(assignment.get("gpu_milli", 0))
    elif kind == "exclusive":
        milli = 1000 * len(assignment.get("gpus", []))
    elif kind == "mps":
        milli = max(10 * int(assignment.get("mps_thread_pct", 0)),
                    share(int(assignment.get("memory_limit_mib", 0)), card))
    elif kind == "timeslice":
        milli = share(int(assignment.get("memory_limit_mib", 0)), card)
    elif kind in ("mig", "mig-mps"):
        inst = assignment.get("mig_instance", "")
        slices = int(inst.split("g.", 1)[0]) if "g." in inst else 7
        milli = 1000 * slices // 7
        if kind == "mig-mps":
            mem = int(inst.split("g.", 1)[1].split("gb", 1)[0]) * 1024 if "g." in inst else card
            used = max(10 * int(assignment.get("mps_thread_pct", 0)),
                       share(int(assignment.get("memory_limit_mib", 0)), mem))
            milli = -(-milli * used // 1000)
    else:
        return request_milli(pod, model)
    return round(milli * EQUIVALENTS[model])


def request_milli(pod: dict, model: str) -> int:
    """What the pod would cost on a GPU of `model` (lower bound for shares)."""
    limits = sc.pod_limits(pod)
    if sc.GPU_COMPUTE in limits or sc.GPU_MEMORY in limits:
        need = int(limits.get(sc.GPU_COMPUTE, "0")) * 10
        if sc.GPU_MEMORY in limits:
            need = max(need, -(-sc.memory_mib(limits[sc.GPU_MEMORY]) * 1000 // 81920))
        return round(need * EQUIVALENTS[model])
    return round(1000 * int(limits.get(k8slib.GPU, "0")) * EQUIVALENTS[model])


def main() -> int:
    checks = k8slib.Checks()
    api = k8slib.Client.from_env()
    rng = random.Random(20260514)
    t_start = time.monotonic()
    k8slib.ensure_namespace(api, NS)

    node_objs = ([k8slib.kwok_gpu_node(f"h100-{i:03d}", model="H100-80GB")
                  for i in range(H100_NODES)]
                 + [k8slib.kwok_gpu_node(f"a100-{i:03d}", model="A100-80GB")
                    for i in range(A100_NODES)])
    names = [n["metadata"]["name"] for n in node_objs]
    t = time.monotonic()
    k8slib.create_nodes(api, node_objs)
    ready = k8slib.wait_nodes_ready(api, names, 180)
    checks(f"{len(names)} kwok GPU nodes Ready", ready, f"{time.monotonic() - t:.1f}s")
    if not ready:
        return checks.exit_code()

    sched, port = k8slib.start_scheduler("tessera-scheduler", CONFIG)
    try:
        return run(checks, api, rng, sched, port, names, t_start)
    finally:
        code = sched.close()
        print(f"scheduler exit code {code}", flush=True)


def leader_metric(port: int) -> float | None:
    try:
        return k8slib.metric_value(k8slib.metrics(port), "tessera_leader")
    except OSError:
        return None


def run(checks: k8slib.Checks, api: k8slib.Client, rng: random.Random, sched: k8slib.Process,
        port: int, node_names: list[str], t_start: float) -> int:
    _, secs = k8slib.wait_until(lambda: leader_metric(port) == 1.0, 60, 0.2)
    if not checks("tessera scheduler starts and schedules", secs is not None,
                  f"{secs:.1f}s" if secs is not None else sched.tail()):
        return checks.exit_code()

    units, meta = build_pods(rng)
    watcher = sc.PodWatcher(api, NS)
    all_pods = [p for u in units for p in u]
    t_create = time.monotonic()
    # Gangs are created member after member by one thread; singles by the pool.
    k8slib.parallel(lambda u: [api.must("POST", f"/api/v1/namespaces/{NS}/pods", p) for p in u],
                    units, threads=8)
    created_s = time.monotonic() - t_create
    print(f"created {len(all_pods)} pods in {created_s:.1f}s "
          f"({len(all_pods) / created_s:.0f} pods/s)", flush=True)

    must_fit = {n for n, m in meta.items() if m["fits"]}

    def uid_bound_names() -> set[str]:
        with watcher.lock:
            return {watcher.name[u] for u, n in watcher.node.items() if n}

    # The pods are created while the node lifecycle controller is still removing the API
    # server's not-ready taints from the fresh nodes, so that pods wait first and their reasons
    # change quickly. Binding them all takes about 10 s here; 90 s is the limit.
    _, secs = k8slib.wait_until(lambda: must_fit <= uid_bound_names(), 90, 0.5)
    bound_names = uid_bound_names()
    checks("every team-a/team-b pod that fits is bound within 90 s", secs is not None,
           f"{len(must_fit & bound_names)}/{len(must_fit)} after "
           f"{time.monotonic() - t_create:.1f}s; missing e.g. "
           f"{sorted(must_fit - bound_names)[:5]}" if secs is None
           else f"{len(must_fit)} pods, {time.monotonic() - t_create:.1f}s after the first create")

    # Settle: team-c's bindings stop changing and every pending pod carries its condition.
    def settled():
        items, _ = api.list_all(f"/api/v1/namespaces/{NS}/pods")
        pending = [p for p in items if not p["spec"].get("nodeName")]
        marked = [p for p in pending if (sc.condition(p, "PodScheduled") or {}).get("status")
                  == "False"]
        return items if len(marked) == len(pending) else None

    stable_since = time.monotonic()
    last = watcher.bound_count()
    items = None
    while time.monotonic() - stable_since < 4 and time.monotonic() - t_create < 300:
        time.sleep(1)
        now_bound = watcher.bound_count()
        if now_bound != last:
            last, stable_since = now_bound, time.monotonic()
    items, secs = k8slib.wait_until(settled, 60, 1.0)
    checks("every pending pod carries PodScheduled=False", secs is not None)
    if items is None:
        items, _ = api.list_all(f"/api/v1/namespaces/{NS}/pods")
    bind_times = watcher.bind_times()
    print(sc.summarize_times("bindings seen by the watch", bind_times, t_create), flush=True)

    nodes_list, _ = api.list_all("/api/v1/nodes", selector="type=kwok")
    nodes = {n["metadata"]["name"]: n for n in nodes_list}
    model_of = {name: sc.inventory(n)[0]["model"] for name, n in nodes.items()}
    by_name = {p["metadata"]["name"]: p for p in items}
    checks(f"all {len(all_pods)} pods still exist", len(by_name) == len(all_pods) and
           set(by_name) == {p["metadata"]["name"] for p in all_pods}, f"{len(by_name)} listed")

    # Bound exactly once, never moved, never deleted.
    with watcher.lock:
        binds = dict(watcher.binds)
        changes = list(watcher.node_changes)
        deleted = set(watcher.deleted)
        names_by_uid = dict(watcher.name)
        events = watcher.events
    bound = [p for p in items if p["spec"].get("nodeName")]
    twice = [names_by_uid[u] for u, n in binds.items() if n > 1]
    unseen = [p["metadata"]["name"] for p in bound if binds.get(p["metadata"]["uid"], 0) != 1]
    checks("watch ran without errors", not watcher.error, watcher.error or f"{events} events")
    checks("each bound pod was bound exactly once (watched from before the first pod)",
           not twice and not unseen, f"{len(bound)} bound; twice {twice[:5]}, "
           f"not seen once {unseen[:5]}")
    checks("no pod ever changed node", not changes, "; ".join(changes[:5]))
    checks("no pod was deleted", not deleted, f"{len(deleted)} deleted")

    # Assignments.
    bad = []
    assignments = {}
    for p in bound:
        a, problem = sc.validate_assignment(p, nodes.get(p["spec"]["nodeName"]))
        if problem:
            bad.append(problem)
        else:
            assignments[p["metadata"]["name"]] = a
    checks("every assignment is valid and matches its node's inventory", not bad,
           f"{len(assignments)} valid" if not bad else f"{len(bad)} bad: {bad[:3]}")
    usage, over = sc.gpu_usage(bound, nodes)
    checks("no GPU is over-committed", not over,
           f"{len(usage)} GPUs in use" if not over else "; ".join(over[:3]))

    # Gangs: all or nothing.
    gangs = defaultdict(list)
    for name, m in meta.items():
        if m["gang"]:
            gangs[m["gang"]].append(name)
    partial = {g: sum(1 for n in ms if n in bound_names) for g, ms in gangs.items()}
    partial_bad = {g: n for g, n in partial.items() if n not in (0, 8)}
    checks("gangs are all-or-nothing", not partial_bad,
           ", ".join(f"{g}: {n}/8" for g, n in sorted(partial.items())))
    checks("team-a and team-b gangs run; team-c's 64-GPU gang and the 7-pod gang do not",
           all(n == 8 for g, n in partial.items() if g not in ("c-gang-0", "b-short"))
           and partial.get("c-gang-0") == 0 and partial.get("b-short") == 0)

    # Queue usage per flavor (GPU-equivalent thousandths) and the quota rules.
    use = defaultdict(int)  # (queue, flavor) -> milli
    wrong_flavor = []
    for name, a in assignments.items():
        q = meta[name]["queue"]
        model = model_of[a["node"]]
        flavor = next((f for f, spec in QUOTAS[q].items() if spec[0] == model), None)
        if flavor is None:
            wrong_flavor.append(f"{name} ({q}) on {model}")
            continue
        use[(q, flavor)] += pod_charge_milli(by_name[name], a, model)
    checks("every pod runs on a GPU model of its queue's flavors", not wrong_flavor,
           ", ".join(wrong_flavor[:5]))
    table = ", ".join(f"{q}/{f} {use[(q, f)] / 1000:.2f} of {spec[1]}"
                      for q in QUOTAS for f, spec in QUOTAS[q].items())
    print(f"queue usage (GPU-eq): {table}", flush=True)
    violations = []
    for q, flavors in QUOTAS.items():
        for f, (model, nominal, borrow, _) in flavors.items():
            u = use[(q, f)]
            if not COHORT[q] and u > nominal * 1000:
                violations.append(f"{q}/{f}: {u / 1000:.2f} > nominal {nominal} without cohort")
            if borrow is not None and u > (nominal + borrow) * 1000:
                violations.append(f"{q}/{f}: {u / 1000:.2f} > nominal {nominal} + borrow {borrow}")
    for f in ("h100", "a100"):
        members = [q for q in QUOTAS if COHORT[q] == "research" and f in QUOTAS[q]]
        borrowed = sum(max(0, use[(q, f)] - QUOTAS[q][f][1] * 1000) for q in members)
        lendable = 0
        for q in members:
            _, nominal, _, lend = QUOTAS[q][f]
            unused = max(0, nominal * 1000 - use[(q, f)])
            lendable += min(unused, lend * 1000) if lend is not None else unused
        if borrowed > lendable:
            violations.append(f"research/{f}: {borrowed / 1000:.2f} borrowed, only "
                              f"{lendable / 1000:.2f} lendable")
    checks("queue usage respects nominal quota, borrowing and lending limits", not violations,
           "; ".join(violations))

    # team-c's quota binds: what waits would not fit the quota, but would fit the cluster.
    c_pending = [p for p in items if meta[p["metadata"]["name"]]["queue"] == "team-c"
                 and not p["spec"].get("nodeName")]
    c_use = use[("team-c", "h100")]
    # A waiting pod would cost what its bound siblings of the same shape cost (the slice the
    # selector gives it, rounding included), else at least its request.
    shape_cost: dict[str, int] = {}
    for name, a in assignments.items():
        if meta[name]["queue"] == "team-c":
            key = json.dumps(sc.pod_limits(by_name[name]), sort_keys=True)
            cost = pod_charge_milli(by_name[name], a, model_of[a["node"]])
            shape_cost[key] = max(shape_cost.get(key, 0), cost)

    def would_cost(p: dict) -> int:
        key = json.dumps(sc.pod_limits(p), sort_keys=True)
        return shape_cost.get(key, request_milli(p, "H100-80GB"))
    fits_quota = [p["metadata"]["name"] for p in c_pending if c_use + would_cost(p) <= 32000]
    checks("team-c's quota binds: pods wait that its quota cannot admit",
           len(c_pending) > 8 and not fits_quota,
           f"{len(c_pending)} pending, {c_use / 1000:.2f} of 32 GPU-eq used"
           + (f"; would fit the quota: {fits_quota[:5]}" if fits_quota else ""))
    free_h100 = {n: sum(1 for g in range(8) if usage.get((n, g), 0) == 0)
                 for n in nodes if model_of[n] == "H100-80GB"}
    free_total = sum(free_h100.values())
    checks("the cluster still has room for team-c's waiting pods",
           max(free_h100.values()) >= 2 and free_total >= 16,
           f"{free_total} idle H100 GPUs, at most {max(free_h100.values())} on one node")

    # Why the others wait.
    reasons = {}
    missing = []
    for p in items:
        if p["spec"].get("nodeName"):
            continue
        c = sc.condition(p, "PodScheduled")
        name = p["metadata"]["name"]
        if not c or c.get("status") != "False" or not c.get("reason") or not c.get("message"):
            missing.append(name)
        else:
            reasons[name] = c["message"]
    checks("pending pods have PodScheduled=False with a reason and message", not missing,
           f"{len(reasons)} pending" if not missing else f"missing on {missing[:5]}")
    histogram = defaultdict(list)
    for n, msg in reasons.items():
        histogram[(meta[n]["queue"], msg.split(" (found this cycle")[0][:160])].append(n)
    for (q, msg), ns in sorted(histogram.items(), key=lambda kv: -len(kv[1]))[:12]:
        print(f"  waiting: {len(ns):4d} {q}: {msg}  e.g. {ns[0]}", flush=True)
    c_single = [n for n in reasons if n.startswith("c-") and not n.startswith("c-gang")]
    no_quota = [f"{n}: {reasons[n]}" for n in c_single if "quota" not in reasons[n]]
    checks("team-c's waiting pods name the quota", bool(c_single) and not no_quota,
           reasons[c_single[0]] if c_single and not no_quota else "; ".join(no_quota[:3]))
    checks("the 12-GPU pod waits with a reason", "b-g12-0" in reasons,
           reasons.get("b-g12-0", "bound or no condition"))
    short = [reasons.get(f"b-short-{k}", "") for k in range(7)]
    checks("the gang short of a member says so", all("1 more pod" in r for r in short),
           short[0] or "no condition")
    print(f"team-c gang waits: {reasons.get('c-gang-0-0', '(no reason)')}", flush=True)

    # kwok runs what is bound.
    def all_running():
        got, _ = api.list_all(f"/api/v1/namespaces/{NS}/pods")
        bound_now = [p for p in got if p["spec"].get("nodeName")]
        running = [p for p in bound_now if p.get("status", {}).get("phase") == "Running"]
        return (len(running), len(bound_now)) if len(running) == len(bound_now) else None
    got, secs = k8slib.wait_until(all_running, 120, 2.0)
    checks("every bound pod reaches phase Running", secs is not None,
           f"{got[0]} running" if got else "")

    text = k8slib.metrics(port) if sched.alive() else ""
    errors = k8slib.metric_value(text, "tessera_binding_errors_total")
    total = k8slib.metric_value(text, "tessera_bindings_total")
    checks("the scheduler is still running", sched.alive(), sched.tail() if not sched.alive()
           else "")
    checks("no binding errors, one successful binding per bound pod",
           errors == 0 and total == len(bound), f"errors {errors}, bindings {total}, "
           f"bound {len(bound)}")
    watcher.close()
    end = time.monotonic()
    span = (bind_times[-1] - t_create) if bind_times else 0
    print(f"throughput: {len(bound)} pods bound in {span:.1f}s from the first create "
          f"({len(bound) / span if span else 0:.0f} pods/s end to end); "
          f"test {end - t_start:.1f}s", flush=True)
    return checks.exit_code()


if __name__ == "__main__":
    sys.exit(main())
