#!/usr/bin/env python3
"""Preemption by `tessera scheduler` through the real Eviction API, against a
PodDisruptionBudget whose status the disruption controller computes.

Run through controlplane.py (tests/k8s/CMakeLists.txt, test k8s_preemption):

  TESSERA_BINARY=build/release/apps/tessera/tessera \
    python3 tests/k8s/controlplane.py -- python3 tests/k8s/preemption_test.py

Three kwok nodes with 4 GPUs each are filled with low-priority pods of queue
`team` (withinQueue: LowerPriority): a ReplicaSet `guarded` of 8 pods covered
by a PDB with minAvailable 6 (2 disruptions allowed) and 4 bare pods `free-*`.
Then 8 high-priority pods of the same queue arrive. Only 6 GPUs can be freed
without breaking the budget, so Tessera must evict the 4 free pods and exactly
2 guarded pods, bind 6 preemptors and leave 2 pending with a reason, the 6
other guarded pods running; every eviction the budget forbids is answered 429
by the API server and reported by Tessera as EvictionBlocked, not retried in
a loop. Then a node that only the guarded pods tolerate joins, their
replacements run there and the budget allows 2 disruptions again: after the
refused victims' wait (30 s) Tessera evicts 2 more and all 8 preemptors run.
A pod watch checks after every event that no GPU is ever held by two existing
pods (a terminating victim still holds its GPUs) and that each preemptor was
bound only after the victim on its GPU was gone.
"""

from __future__ import annotations

import datetime
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import k8slib  # noqa: E402
from gpu_watch import GpuLedgerWatch  # noqa: E402

NS = "preempt"
QUEUE = "team"
NODES = [f"pre-gpu-{i}" for i in range(3)]
GPUS_PER_NODE = 4
GUARDED = 8
MIN_AVAILABLE = 6
FREE = 4
HIGH = 8
LOW_PC, HIGH_PC = "e2e-low", "e2e-high"
RESERVED_NODE = "pre-gpu-reserved"
RESERVED_TAINT = "e2e.tessera.io/reserved"

CONFIG = f"""\
schedulerName: tessera
podEvents: true
podConditions: true
queues:
- name: {QUEUE}
  withinQueue: LowerPriority
  flavors:
  - name: all
    nominal: {{gpu: 64}}
"""


def priority_class(name: str, value: int) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value,
            "preemptionPolicy": "PreemptLowerPriority",
            "description": "tessera e2e preemption test"}


def replica_set() -> dict:
    pod = k8slib.gpu_pod("unused", NS, gpus=1, queue=QUEUE, priority_class=LOW_PC,
                         labels={"app": "guarded"})
    pod["spec"]["tolerations"] = [{"key": RESERVED_TAINT, "operator": "Equal",
                                   "value": "guarded", "effect": "NoSchedule"}]
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "guarded", "namespace": NS},
            "spec": {"replicas": GUARDED, "selector": {"matchLabels": {"app": "guarded"}},
                     "template": {"metadata": {"labels": pod["metadata"]["labels"],
                                               "annotations": pod["metadata"]["annotations"]},
                                  "spec": pod["spec"]}}}


def pdb() -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "guarded", "namespace": NS},
            "spec": {"minAvailable": MIN_AVAILABLE,
                     "selector": {"matchLabels": {"app": "guarded"}}}}


def running(p: dict) -> bool:
    return (bool(p.get("spec", {}).get("nodeName")) and p.get("status", {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp"))


def scheduled_condition(p: dict) -> dict | None:
    for c in p.get("status", {}).get("conditions", []) or []:
        if c.get("type") == "PodScheduled":
            return c
    return None


def refusal_gaps(events: list[dict]) -> list[float]:
    """Seconds between consecutive EvictionBlocked Events of the same pod."""
    times: dict[str, list[float]] = {}
    for e in events:
        if e.get("reason") == "EvictionBlocked" and e.get("eventTime"):
            t = datetime.datetime.strptime(e["eventTime"][:26].rstrip("Z"),
                                           "%Y-%m-%dT%H:%M:%S.%f").timestamp()
            times.setdefault(e["regarding"]["name"], []).append(t)
    return [b - a for ts in times.values() for a, b in zip(sorted(ts), sorted(ts)[1:])]


def main() -> int:
    check = k8slib.Checks()
    api = k8slib.Client.from_env()
    t0 = time.monotonic()
    k8slib.ensure_namespace(api, NS)
    for name, value in ((LOW_PC, 100), (HIGH_PC, 1000)):
        api.must("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", priority_class(name, value))
    k8slib.create_nodes(api, [k8slib.kwok_gpu_node(n, gpus=GPUS_PER_NODE) for n in NODES])
    check("kwok nodes Ready", k8slib.wait_nodes_ready(api, NODES, 90))

    sched, port = k8slib.start_scheduler("tessera-preempt", CONFIG)
    watch = GpuLedgerWatch(api, f"/api/v1/namespaces/{NS}/pods")
    watch.synced.wait(30)
    try:
        return run(check, api, sched, port, watch, t0)
    finally:
        watch.close()
        rc = sched.close()
        print(f"scheduler exit code {rc}", flush=True)
        if check.failed:
            print(sched.tail(60), flush=True)


def run(check, api, sched, port, watch, t0) -> int:
    pods_path = f"/api/v1/namespaces/{NS}/pods"

    def pods(selector: str = "") -> list[dict]:
        return api.list_all(pods_path, selector=selector)[0]

    # Low-priority pods fill every GPU.
    api.must("POST", f"/apis/apps/v1/namespaces/{NS}/replicasets", replica_set())
    k8slib.create_pods(api, [k8slib.gpu_pod(f"free-{i}", NS, gpus=1, queue=QUEUE,
                                            priority_class=LOW_PC, labels={"app": "free"})
                             for i in range(FREE)])
    low = GUARDED + FREE
    items, secs = k8slib.wait_until(
        lambda: (lambda ps: ps if sum(running(p) for p in ps) == low else None)(pods()), 120, 0.5)
    check(f"{low} low-priority pods bound by tessera and Running", secs is not None,
          f"{secs:.1f}s" if secs is not None else
          f"{sum(running(p) for p in items or pods())} running")
    if secs is None:
        return check.exit_code()
    check("low-priority pods carry spec.priority 100 from their PriorityClass",
          all(p["spec"].get("priority") == 100 for p in items))
    guarded_before = {p["metadata"]["uid"]: p["metadata"]["name"]
                      for p in items if p["metadata"]["labels"].get("app") == "guarded"}
    free_before = {p["metadata"]["name"] for p in items if p["metadata"]["labels"].get("app") == "free"}
    holder_before = {(p["spec"]["nodeName"], g): f"{NS}/{p['metadata']['name']}"
                     for p in items for g in (k8slib.assignment(p) or {}).get("gpus", [])}
    check("every GPU holds exactly one low-priority pod",
          len(holder_before) == len(NODES) * GPUS_PER_NODE, f"{len(holder_before)} GPUs held")

    # The PDB, and its status as the disruption controller computes it.
    api.must("POST", f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets", pdb())
    pdb_path = f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/guarded"

    def pdb_ready():
        b = api.must("GET", pdb_path)
        st = b.get("status", {})
        ok = (st.get("observedGeneration", 0) >= b["metadata"].get("generation", 1)
              and st.get("currentHealthy") == GUARDED and st.get("expectedPods") == GUARDED
              and st.get("desiredHealthy") == MIN_AVAILABLE
              and st.get("disruptionsAllowed") == GUARDED - MIN_AVAILABLE)
        return st if ok else None
    st, secs = k8slib.wait_until(pdb_ready, 60, 0.5)
    check("disruption controller computes the PDB status",
          secs is not None, f"{secs:.1f}s, {st}" if secs is not None else str(st))
    if secs is None:
        return check.exit_code()
    allowed = st["disruptionsAllowed"]

    # High-priority pods that need more room than the budget lets go.
    k8slib.create_pods(api, [k8slib.gpu_pod(f"high-{i}", NS, gpus=1, queue=QUEUE,
                                            priority_class=HIGH_PC, labels={"app": "high"})
                             for i in range(HIGH)])
    expect_bound = FREE + allowed

    def high_bound():
        hs = pods("app=high")
        n = sum(running(p) for p in hs)
        return hs if n >= expect_bound else None
    hs, secs = k8slib.wait_until(high_bound, 150, 0.5)
    check(f"{expect_bound} preemptors bound and Running after evicting "
          f"{FREE} free + {allowed} guarded pods", secs is not None,
          f"{secs:.1f}s after they were created" if secs is not None else
          f"{sum(running(p) for p in pods('app=high'))} running")

    # Let it settle: nothing more may happen once every victim the budget allows is gone
    # (a refused victim is not tried again for 30 s).
    def event_list():
        out = api.must("GET", f"/apis/events.k8s.io/v1/namespaces/{NS}/events?limit=1000")
        return [e for e in out.get("items", [])
                if e.get("reportingController") == "tessera.io/scheduler"]
    time.sleep(3)
    seen = {e["metadata"]["name"] for e in event_list()}
    time.sleep(8)
    events = event_list()
    # Only a refused victim's retry after its wait may show up (on a slow machine the wait
    # can end in this window).
    retry_gaps = refusal_gaps(events)
    churn = [f"{e.get('reason')} {e['regarding']['name']}" for e in events
             if e["metadata"]["name"] not in seen
             and not (e.get("reason") == "EvictionBlocked" and all(g >= 29 for g in retry_gaps))]
    check("no further Events in an 8 s window once settled (no eviction loop)",
          not churn, f"{len(seen)} -> {len(events)} events; new: {churn[:6]}")

    def split(ps: list[dict]) -> dict[str, list[dict]]:
        by_app: dict[str, list[dict]] = {}
        for p in ps:
            by_app.setdefault(p["metadata"]["labels"].get("app", ""), []).append(p)
        return by_app
    by_app = split(pods())
    high = by_app.get("high", [])
    high_running = [p for p in high if running(p)]
    high_pending = [p for p in high if not p["spec"].get("nodeName")]
    check(f"exactly {expect_bound} preemptors run, {HIGH - expect_bound} stay pending",
          len(high_running) == expect_bound and len(high_pending) == HIGH - expect_bound,
          f"{len(high_running)} running, {len(high_pending)} pending")
    check("preemptors carry spec.priority 1000",
          all(p["spec"].get("priority") == 1000 for p in high))
    conds = [scheduled_condition(p) for p in high_pending]
    check("pending preemptors have PodScheduled=False with a reason",
          bool(high_pending) and all(c and c.get("status") == "False" and c.get("message")
                                     for c in conds),
          "; ".join(f"{c.get('reason')}: {c.get('message')}" for c in conds if c)[:400])

    free_left = [p["metadata"]["name"] for p in by_app.get("free", [])]
    check("every unprotected low-priority pod was evicted", not free_left,
          f"still present: {free_left}" if free_left else "")
    guarded_now = by_app.get("guarded", [])
    originals = [p for p in guarded_now if p["metadata"]["uid"] in guarded_before]
    evicted_guarded = sorted(n for u, n in guarded_before.items()
                             if u not in {p["metadata"]["uid"] for p in guarded_now})
    check(f"the PDB let exactly {allowed} guarded pods go",
          len(evicted_guarded) == allowed, f"evicted {evicted_guarded}")
    check(f"{MIN_AVAILABLE} original guarded pods keep running, none terminating",
          len(originals) == MIN_AVAILABLE and all(running(p) for p in originals),
          f"{sum(running(p) for p in originals)} of {len(originals)} running")
    recreated = [p for p in guarded_now if p["metadata"]["uid"] not in guarded_before]
    check("the ReplicaSet's replacements stay pending (they may not preempt higher priority)",
          len(recreated) == len(evicted_guarded)
          and all(not p["spec"].get("nodeName") for p in recreated),
          f"{len(recreated)} replacements, bound: "
          f"{[p['metadata']['name'] for p in recreated if p['spec'].get('nodeName')]}")
    bst = api.must("GET", pdb_path).get("status", {})
    check("PDB afterwards: no disruptions allowed, currentHealthy >= minAvailable",
          bst.get("disruptionsAllowed") == 0 and bst.get("currentHealthy", 0) >= MIN_AVAILABLE,
          f"currentHealthy {bst.get('currentHealthy')}, disruptionsAllowed "
          f"{bst.get('disruptionsAllowed')}")
    blocked = [e for e in events if e.get("reason") == "EvictionBlocked"]
    blocked_names = sorted({e["regarding"]["name"] for e in blocked})
    check("the API server's 429 refusals are reported as EvictionBlocked on guarded pods",
          bool(blocked) and all(n in guarded_before.values() for n in blocked_names)
          and all("disruption budget" in e.get("note", "") for e in blocked),
          f"{len(blocked)} events on {blocked_names}: "
          f"{(blocked[0].get('note', '') if blocked else '')[:240]}")

    # Phase 2: the replacements find room on a node reserved for them (a taint only they
    # tolerate), so the budget allows disruptions again; the refused victims are tried again
    # after their wait and the last preemptors run.
    res = k8slib.kwok_gpu_node(RESERVED_NODE, gpus=allowed)
    res["spec"] = {"taints": [{"key": RESERVED_TAINT, "value": "guarded", "effect": "NoSchedule"}]}
    api.must("POST", "/api/v1/nodes", res)

    def all_high():
        hs = pods("app=high")
        return hs if sum(running(p) for p in hs) == HIGH else None
    _, secs = k8slib.wait_until(all_high, 150, 1.0)
    check(f"once the budget allows it again, all {HIGH} preemptors run",
          secs is not None, f"{secs:.1f}s after the reserved node was added" if secs is not None
          else f"{sum(running(p) for p in pods('app=high'))} running")
    time.sleep(2)
    by_app = split(pods())
    high_running = [p for p in by_app.get("high", []) if running(p)]
    guarded_now = by_app.get("guarded", [])
    originals = [p for p in guarded_now if p["metadata"]["uid"] in guarded_before]
    on_res = [p for p in guarded_now if p["spec"].get("nodeName") == RESERVED_NODE]
    check(f"{allowed} replacements run on the reserved node, untouched by the preemptors",
          len(on_res) == allowed and all(running(p) for p in on_res)
          and all(p["metadata"]["uid"] not in guarded_before for p in on_res),
          f"{[p['metadata']['name'] for p in on_res]}")
    check(f"{MIN_AVAILABLE - allowed} original guarded pods left, all running",
          len(originals) == MIN_AVAILABLE - allowed and all(running(p) for p in originals),
          f"{len(originals)} left")
    bst = api.must("GET", pdb_path).get("status", {})
    check("PDB at the end: currentHealthy == minAvailable, no disruptions allowed",
          bst.get("currentHealthy") == MIN_AVAILABLE and bst.get("disruptionsAllowed") == 0,
          f"currentHealthy {bst.get('currentHealthy')}, disruptionsAllowed "
          f"{bst.get('disruptionsAllowed')}")

    # Events explain what happened.
    events = event_list()

    def reasons_for(name: str) -> list[str]:
        return [e.get("reason") for e in events if e.get("regarding", {}).get("name") == name]
    gone = sorted(n for u, n in guarded_before.items()
                  if u not in {p["metadata"]["uid"] for p in guarded_now})
    victims = sorted(free_before) + gone
    missing = [v for v in victims if "Preempted" not in reasons_for(v)]
    check("every evicted pod has a Preempted Event", not missing,
          f"missing for {missing}" if missing else
          next((e.get("note", "") for e in events if e.get("reason") == "Preempted"), "")[:200])
    keep = [p["metadata"]["name"] for p in guarded_now if "Preempted" in
            reasons_for(p["metadata"]["name"])]
    check("no pod that keeps running got a Preempted Event", not keep, ", ".join(keep))
    gaps = refusal_gaps(events)
    refusals = sum(1 for e in events if e.get("reason") == "EvictionBlocked")
    check("a refused victim is tried again only after its wait (>= 30 s), never in a loop",
          all(g >= 29 for g in gaps),
          f"{refusals} refusals, gaps between refusals of one pod "
          f"{sorted(round(g, 1) for g in gaps)}")

    # Ordering and over-commit, from the pod watch.
    check("no GPU held by two existing pods at any event (terminating victims included)",
          not watch.violations, "; ".join(watch.violations[:5]) or
          f"{watch.events} pod events checked")
    # Each preemptor's GPUs were held by a low-priority pod before: that pod's DELETED event
    # must come before the preemptor's bind in the API server's event order.
    early = []
    for p in high_running:
        key = f"{NS}/{p['metadata']['name']}"
        a = k8slib.assignment(p) or {}
        for g in a.get("gpus", []):
            victim = holder_before.get((p["spec"]["nodeName"], g))
            gone = watch.gone_at.get(victim) if victim else None
            if victim and (gone is None or gone > watch.bound_at.get(key, 0)):
                early.append(f"{key} bound onto GPU {g} of {p['spec']['nodeName']} before "
                             f"{victim} was gone")
    check("every preemptor was bound only after the victim on its GPU was gone",
          not early and bool(high_running), "; ".join(early[:3]))
    text = k8slib.metrics(port)
    check("scheduler alive and serving metrics", sched.alive()
          and k8slib.metric_value(text, "tessera_bindings_total") is not None,
          f"tessera_bindings_total {k8slib.metric_value(text, 'tessera_bindings_total')}")
    print(f"preemption test took {time.monotonic() - t0:.1f}s", flush=True)
    return check.exit_code()


if __name__ == "__main__":
    sys.exit(main())
