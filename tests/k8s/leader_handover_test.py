#!/usr/bin/env python3
"""Leader handover of two `tessera scheduler` replicas on the real Lease API.

Run through controlplane.py (which exports the connection variables), with the
tessera binary in TESSERA_BINARY:

  tests/k8s/controlplane.py -- python3 tests/k8s/leader_handover_test.py

Two replicas run with --leader-elect and the identities tessera-a and
tessera-b on the Lease tessera-system/tessera-scheduler
(coordination.k8s.io/v1), with short lease timing (4 s lease, 3 s renew
deadline, 1 s retry). tessera-a leads first. 498 pods (1 and 2 GPUs, compute
and memory shares, six 8-pod gangs) stream onto 50 kwok H100 nodes over
several seconds; once the leader has bound some of them, tessera-a is killed
with SIGKILL. While nobody leads, the test leaves what a leader that died
while binding a gang leaves: 3 of its 8 members bound with assignments.

Checks, read back from the API server: the standby neither leads nor binds
before; the Lease moves to tessera-b; tessera-b binds the rest, completing the
partly bound gang; gangs are bound whole; a watch opened
before the first pod sees every pod bound exactly once and never moved; every
assignment matches its node's inventory and no GPU is over-committed (the new
leader rebuilt the GPUs in use from the bound pods' assignments); nothing is
lost: every pod is bound and Running. Prints the handover time (kill to the
new leader's first binding).
"""

from __future__ import annotations

import json
import random
import signal
import sys
import threading
import time
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import k8slib  # noqa: E402
import sched_checks as sc  # noqa: E402

NS = "handover-e2e"
LEASE_NS = "tessera-system"
LEASE = "tessera-scheduler"
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NS}/leases/{LEASE}"
NODES = 50
KILL_AFTER_BOUND = 120
LEASE_SECONDS = 4

CONFIG = f"""\
schedulerName: tessera
policy: tessera
leaderElection:
  namespace: {LEASE_NS}
  name: {LEASE}
  leaseDurationSeconds: {LEASE_SECONDS}
  renewDeadlineSeconds: 3
  retryPeriodSeconds: 1
binding:
  threads: 8
podConditions: true
podEvents: true
"""


def gang(name: str, gpus: int = 1) -> list[dict]:
    return [k8slib.gpu_pod(f"{name}-{k}", NS, gpus=gpus, gang=name, min_member=8)
            for k in range(8)]


def build_pods(rng: random.Random) -> list[dict]:
    """The stream: single pods in random order, each gang's 8 members one after another."""
    units = [[k8slib.gpu_pod(f"g1-{i}", NS, gpus=1)] for i in range(150)]
    units += [[k8slib.gpu_pod(f"g2-{i}", NS, gpus=2)] for i in range(40)]
    units += [[k8slib.gpu_pod(f"cmp-{i}", NS, gpus=None, gpu_compute=25)] for i in range(130)]
    units += [[k8slib.gpu_pod(f"mem-{i}", NS, gpus=None, gpu_memory="10Gi")] for i in range(130)]
    units += [gang(f"gang-{g}") for g in range(6)]
    rng.shuffle(units)
    return [p for u in units for p in u]


def bind_part_of_a_gang(api: k8slib.Client, count: int) -> tuple[str, list[int]]:
    """What a leader that dies while binding a gang leaves behind: creates the 8 members of gang
    "split" and binds `count` of them, with their assignments, onto idle GPUs of one node."""
    items, _ = api.list_all(f"/api/v1/namespaces/{NS}/pods")
    node_list, _ = api.list_all("/api/v1/nodes", selector="type=kwok")
    nodes = {n["metadata"]["name"]: n for n in node_list}
    usage, _ = sc.gpu_usage(items, nodes)
    node = next(n for n in sorted(nodes)
                if sum(1 for g in range(8) if (n, g) not in usage) >= count)
    gpus = [g for g in range(8) if (node, g) not in usage][:count]
    members = gang("split")
    k8slib.create_pods(api, members, threads=1)
    for pod, g in zip(members, gpus):
        name = pod["metadata"]["name"]
        assignment = {"node": node, "kind": "exclusive", "gpus": [g],
                      "uuids": [k8slib.gpu_uuid(node, g)]}
        api.must("POST", f"/api/v1/namespaces/{NS}/pods/{name}/binding", {
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": NS,
                         "annotations": {k8slib.ASSIGNMENT: json.dumps(assignment)}},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
    return node, gpus


def scrape(port: int) -> dict[str, float | None]:
    try:
        text = k8slib.metrics(port)
    except OSError:
        return {}
    return {name: k8slib.metric_value(text, name)
            for name in ("tessera_leader", "tessera_bindings_total",
                         "tessera_binding_errors_total")}


def lease(api: k8slib.Client) -> dict:
    status, body = api.get(LEASE_PATH)
    return body.get("spec", {}) if status == 200 and isinstance(body, dict) else {}


def main() -> int:
    checks = k8slib.Checks()
    api = k8slib.Client.from_env()
    rng = random.Random(4242)
    t_start = time.monotonic()
    k8slib.ensure_namespace(api, NS)
    k8slib.ensure_namespace(api, LEASE_NS)
    nodes = [k8slib.kwok_gpu_node(f"h100-{i:03d}") for i in range(NODES)]
    names = [n["metadata"]["name"] for n in nodes]
    k8slib.create_nodes(api, nodes)
    ready = k8slib.wait_nodes_ready(api, names, 120)
    checks(f"{NODES} kwok GPU nodes Ready", ready)
    if not ready:
        return checks.exit_code()

    procs: list[k8slib.Process] = []
    try:
        return run(checks, api, rng, procs, t_start)
    finally:
        for p in procs:
            code = p.close()
            print(f"{p.name} exit code {code}", flush=True)


def run(checks: k8slib.Checks, api: k8slib.Client, rng: random.Random,
        procs: list[k8slib.Process], t_start: float) -> int:
    a, port_a = k8slib.start_scheduler("tessera-a", CONFIG,
                                       extra=["--leader-elect", "--identity", "tessera-a"])
    procs.append(a)
    _, secs = k8slib.wait_until(lambda: lease(api).get("holderIdentity") == "tessera-a"
                                and scrape(port_a).get("tessera_leader") == 1.0, 60, 0.1)
    if not checks("tessera-a acquires the Lease and leads", secs is not None,
                  f"{secs:.1f}s" if secs is not None else f"lease {lease(api)}\n{a.tail()}"):
        return checks.exit_code()
    transitions_before = lease(api).get("leaseTransitions", 0)
    b, port_b = k8slib.start_scheduler("tessera-b", CONFIG,
                                       extra=["--leader-elect", "--identity", "tessera-b"])
    procs.append(b)
    up, _ = k8slib.wait_until(lambda: scrape(port_b), 30, 0.1)
    checks("tessera-b starts as standby", bool(up) and up.get("tessera_leader") == 0.0,
           str(up) if up else b.tail())

    pods = build_pods(rng)
    total = len(pods)
    watcher = sc.PodWatcher(api, NS)
    # The stream: batches of 20 pods every 0.35 s (about 8 s), 4 requests at a time.
    created = {"n": 0, "done": None}

    def stream():
        for i in range(0, len(pods), 20):
            batch = pods[i:i + 20]
            k8slib.create_pods(api, batch, threads=4)
            created["n"] += len(batch)
            time.sleep(0.35)
        created["done"] = time.monotonic()
    t_create = time.monotonic()
    creator = threading.Thread(target=stream, daemon=True)
    creator.start()

    _, secs = k8slib.wait_until(lambda: watcher.bound_count() >= KILL_AFTER_BOUND, 90, 0.02)
    standby = scrape(port_b)
    bound_at_kill = watcher.bound_count()
    t_kill = time.monotonic()
    a.kill(signal.SIGKILL)
    checks("tessera-a binds pods while tessera-b stands by", secs is not None
           and standby.get("tessera_leader") == 0.0
           and standby.get("tessera_bindings_total") == 0.0,
           f"{bound_at_kill} bound, {created['n']} created, {t_kill - t_create:.1f}s into the "
           f"stream; tessera-b {standby}")
    checks("SIGKILL comes while pods still wait", bound_at_kill < total,
           f"{bound_at_kill}/{total} bound")
    # While nobody leads: a gang the dead leader had bound 3 of 8 members of.
    time.sleep(0.3)
    split_node, split_gpus = bind_part_of_a_gang(api, 3)
    total += 8

    # Watch the handover: the Lease's holder, and tessera-b's first binding.
    t_lease = t_first = None
    deadline = t_kill + 60
    while time.monotonic() < deadline and (t_lease is None or t_first is None):
        if t_lease is None and lease(api).get("holderIdentity") == "tessera-b":
            t_lease = time.monotonic()
        if t_first is None and (scrape(port_b).get("tessera_bindings_total") or 0) > 0:
            t_first = time.monotonic()
        time.sleep(0.05)
    spec = lease(api)
    checks("the Lease moves to tessera-b", t_lease is not None
           and spec.get("leaseTransitions", 0) > transitions_before,
           f"{t_lease - t_kill:.1f}s after the kill, leaseTransitions "
           f"{transitions_before} -> {spec.get('leaseTransitions')}" if t_lease else str(spec))
    # tessera-a's bindings: those seen up to 1 s after the kill (requests it had sent land by
    # then; tessera-b cannot bind before the lease duration has passed), apart from the gang
    # the test bound 3 members of.
    split_names = {f"split-{k}" for k in range(8)}
    a_cut = t_kill + 1.0
    with watcher.lock:
        times = [(t, watcher.name.get(u, "")) for u, t in watcher.bind_time.items()]
    by_a = sum(1 for t, n in times if t < a_cut and n not in split_names)
    after = sorted(t for t, n in times if t >= a_cut and n not in split_names)
    handover = (t_first - t_kill) if t_first is not None else None
    watch_handover = (after[0] - t_kill) if after else None
    checks("tessera-b binds after taking over", handover is not None,
           f"handover (SIGKILL -> first binding by the new leader): {handover:.2f}s "
           f"(metrics), {watch_handover:.2f}s (first binding seen by the watch)"
           if handover is not None and watch_handover is not None else b.tail())
    checks("handover within lease duration + 10 s", handover is not None
           and handover <= LEASE_SECONDS + 10, f"{handover}")

    # Nothing lost: everything gets bound.
    _, secs = k8slib.wait_until(lambda: created["done"] and watcher.bound_count() >= total,
                                120, 0.2)
    t_all = time.monotonic()
    checks("every pod is bound", secs is not None,
           f"{watcher.bound_count()}/{total}, all {t_all - t_create:.1f}s after the stream began")
    items, _ = api.list_all(f"/api/v1/namespaces/{NS}/pods")
    bound = [p for p in items if p["spec"].get("nodeName")]
    with watcher.lock:
        binds = dict(watcher.binds)
        changes = list(watcher.node_changes)
        deleted = set(watcher.deleted)
        names_by_uid = dict(watcher.name)
    twice = [names_by_uid[u] for u, n in binds.items() if n > 1]
    unseen = [p["metadata"]["name"] for p in bound if binds.get(p["metadata"]["uid"], 0) != 1]
    checks("watch ran without errors", not watcher.error, watcher.error)
    checks("each pod was bound exactly once (watched from before the first pod)",
           len(items) == total and not twice and not unseen,
           f"{len(bound)} bound of {len(items)}; twice {twice[:5]}, not seen once {unseen[:5]}")
    checks("no pod ever changed node", not changes, "; ".join(changes[:5]))
    checks("no pod was deleted", not deleted, f"{len(deleted)} deleted")
    by_gang: dict[str, list[dict]] = {}
    for p in items:
        g = p["metadata"].get("annotations", {}).get("tessera.io/gang")
        if g:
            by_gang.setdefault(g, []).append(p)
    gang_bound = {g: sum(1 for p in ps if p["spec"].get("nodeName")) for g, ps in by_gang.items()}
    checks("every gang is bound whole", len(gang_bound) == 7
           and all(n == 8 for n in gang_bound.values()),
           ", ".join(f"{g} {n}/8" for g, n in sorted(gang_bound.items())))
    split_kept = all(p["spec"].get("nodeName") == split_node
                     for p in by_gang.get("split", []) if p["metadata"]["name"] in
                     {f"split-{k}" for k in range(3)})
    checks("the new leader completes the gang the old one had partly bound", split_kept
           and gang_bound.get("split") == 8,
           f"3 members bound beforehand on {split_node} GPUs {split_gpus}")

    node_list, _ = api.list_all("/api/v1/nodes", selector="type=kwok")
    nodes = {n["metadata"]["name"]: n for n in node_list}
    bad = [problem for p in bound
           for _, problem in [sc.validate_assignment(p, nodes.get(p["spec"]["nodeName"]))]
           if problem]
    checks("every assignment is valid and matches its node's inventory", not bad,
           f"{len(bound)} valid" if not bad else f"{len(bad)} bad: {bad[:3]}")
    usage, over = sc.gpu_usage(bound, nodes)
    checks("no GPU is over-committed across the handover", not over,
           f"{len(usage)} GPUs in use, {sum(usage.values()) / 1000:.2f} GPUs allocated"
           if not over else "; ".join(over[:3]))

    after_b = scrape(port_b)
    b_binds = after_b.get("tessera_bindings_total")
    checks("tessera-b bound exactly the pods neither tessera-a nor the test had bound",
           b_binds is not None and b_binds == total - by_a - 3
           and after_b.get("tessera_binding_errors_total") == 0.0,
           f"tessera-a {by_a}, the test 3, tessera-b {b_binds} of {total}, "
           f"binding errors {after_b.get('tessera_binding_errors_total')}")
    checks("tessera-b leads and runs; tessera-a is gone",
           b.alive() and after_b.get("tessera_leader") == 1.0 and not a_alive(procs),
           b.tail() if not b.alive() else "")

    def all_running():
        got, _ = api.list_all(f"/api/v1/namespaces/{NS}/pods")
        running = sum(1 for p in got if p.get("status", {}).get("phase") == "Running")
        return running if running == total else None
    got, secs = k8slib.wait_until(all_running, 90, 1.0)
    checks("every pod reaches phase Running", secs is not None, f"{got} running")
    watcher.close()
    times = watcher.bind_times()
    print(sc.summarize_times("bindings seen by the watch", times, t_create), flush=True)
    print(f"handover: SIGKILL at {t_kill - t_create:.1f}s into the stream with {bound_at_kill} "
          f"bound; Lease moved after {(t_lease - t_kill) if t_lease else float('nan'):.2f}s; "
          f"first new-leader binding after {handover if handover is not None else float('nan'):.2f}s"
          f"; test {time.monotonic() - t_start:.1f}s", flush=True)
    return checks.exit_code()


def a_alive(procs: list[k8slib.Process]) -> bool:
    return any(p.name == "tessera-a" and p.alive() for p in procs)


if __name__ == "__main__":
    sys.exit(main())
