#!/usr/bin/env python3
"""A restarted `tessera scheduler` adopts bound pods that run beyond their node's CPU, or
outside a queue that lost its flavor, without handing out their GPUs, against a real control
plane.

Run through controlplane.py (tests/k8s/CMakeLists.txt, test k8s_adopt_overcommit):

  TESSERA_BINARY=build/release/apps/tessera/tessera \
    python3 tests/k8s/controlplane.py -- python3 tests/k8s/adopt_overcommit_test.py

One kwok A100-80GB node with 3 GPUs and 8 CPUs. A first scheduler, whose queue `team` has an
A100 flavor, binds two pods of `team`, each asking one GPU and 3 CPUs. It stops; the node's
allocatable CPU shrinks to 5, and a second scheduler starts whose `team` has only an H100
flavor. A pod of another queue asking one GPU and 1 CPU arrives. Checks, read back from the
API server:
* both bound pods get a Warning Event OutsideQueue, and exactly one NodeOvercommitted (the one
  adopted second, for which 2 of its 3 CPUs were free); tessera_pods_outside_queue reads 2,
  tessera_overcommitted_pods 1 and tessera_overcommitted_nodes 1;
* the new pod is not bound while both run (the node's CPU is taken), and once one is deleted it
  is bound to the GPU neither holds: no GPU is ever held twice;
* the pods on the node now ask 4 of its 5 CPUs, as the kubelet counts: a pod asking 2 CPUs
  waits (a GPU is free), and once the node's allocatable CPU is back at 8 it is bound, without
  a restart.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import deploylib  # noqa: E402
import k8slib  # noqa: E402
import sched_checks as sc  # noqa: E402

NS = "adopt-overcommit"
NODE = "oc-0"
MODEL = "A100-80GB"
BOUND = ["run-0", "run-1"]
BASE = """\
schedulerName: tessera
podEvents: true
podConditions: true
queues:
- name: team
  flavors:
  - name: {flavor}
    models: [{model}]
    nominal: {{gpu: 8}}
- name: other
  flavors:
  - name: all
    nominal: {{gpu: 8}}
"""
FIRST = BASE.format(flavor="a100", model=MODEL)
SECOND = BASE.format(flavor="h100", model="H100-80GB")


def main() -> int:
    check = k8slib.Checks()
    api = k8slib.Client.from_env()
    k8slib.ensure_namespace(api, NS)
    k8slib.create_nodes(api, [k8slib.kwok_gpu_node(NODE, gpus=3, model=MODEL, cpu="8")])
    check("kwok node Ready", k8slib.wait_nodes_ready(api, [NODE], 90))
    return k8slib.with_processes(check, lambda scheds: run(check, api, scheds))


def pods(api: k8slib.Client) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in api.list_all(f"/api/v1/namespaces/{NS}/pods")[0]}


def no_double_use(check, api: k8slib.Client, label: str) -> None:
    nodes = {n["metadata"]["name"]: n
             for n in api.list_all("/api/v1/nodes", selector="type=kwok")[0]}
    _, problems = sc.gpu_usage(list(pods(api).values()), nodes)
    check(f"{label}: no GPU held twice", not problems, "; ".join(problems[:5]))


def told(api: k8slib.Client, name: str, reason: str) -> bool:
    return any(e.get("reason") == reason and e.get("type") == "Warning"
               for e in deploylib.events_for(api, NS, name))


def run(check, api: k8slib.Client, scheds: list[k8slib.Process]) -> int:
    first, _ = k8slib.start_scheduler("tessera-first", FIRST)
    scheds.append(first)
    k8slib.create_pods(api, [k8slib.gpu_pod(n, NS, gpus=1, queue="team", cpu="3")
                             for n in BOUND])
    bound = deploylib.wait_bound(api, NS, BOUND, 60)
    if not check("the first scheduler binds both pods",
                 all(bound[n].get("spec", {}).get("nodeName") == NODE for n in BOUND)):
        return check.exit_code()
    held = {n: k8slib.assignment(bound[n])["gpus"][0] for n in BOUND}
    first.close()

    # The node's CPU shrinks below what its pods ask, and `team` loses its A100 flavor.
    api.must("PATCH", f"/api/v1/nodes/{NODE}/status",
             {"status": {"allocatable": {"cpu": "5"}, "capacity": {"cpu": "5"}}},
             content_type="application/merge-patch+json")
    def allocatable_cpu() -> str:
        return api.must("GET", f"/api/v1/nodes/{NODE}")["status"]["allocatable"]["cpu"]

    shrunk = k8slib.wait_until(lambda: allocatable_cpu() == "5" or None, 10, 0.2)[1]
    if not check("the node's allocatable CPU reads 5", shrunk is not None):
        return check.exit_code()
    second, port = k8slib.start_scheduler("tessera-second", SECOND)
    scheds.append(second)
    k8slib.create_pods(api, [k8slib.gpu_pod("late", NS, gpus=1, queue="other", cpu="1")])

    def gauges():
        try:
            text = k8slib.metrics(port)
        except OSError:
            return None  # not serving yet
        got = (k8slib.metric_value(text, "tessera_pods_outside_queue"),
               k8slib.metric_value(text, "tessera_overcommitted_pods"),
               k8slib.metric_value(text, "tessera_overcommitted_nodes"))
        return got if got == (2.0, 1.0, 1.0) else None

    got = k8slib.wait_until(gauges, 30, 0.5)[1]
    check("tessera_pods_outside_queue reads 2, tessera_overcommitted_pods 1 and "
          "tessera_overcommitted_nodes 1", got is not None)
    outside = k8slib.wait_until(
        lambda: all(told(api, n, "OutsideQueue") for n in BOUND) or None, 20, 0.5)[1]
    check("both bound pods get a Warning Event OutsideQueue", outside is not None)
    over = [n for n in BOUND if told(api, n, "NodeOvercommitted")]
    check("exactly one gets a Warning Event NodeOvercommitted", len(over) == 1, str(over))
    check("neither is reported AdoptFailed", not any(told(api, n, "AdoptFailed") for n in BOUND))

    def decided():
        p = pods(api)["late"]
        return p["spec"].get("nodeName") or \
            (sc.condition(p, "PodScheduled") or {}).get("status") == "False" or None

    check("the new pod is decided", k8slib.wait_until(decided, 30, 0.5)[1] is not None)
    time.sleep(2)  # a late bind would still show
    check("the new pod waits while both run: the node's CPU is taken",
          not pods(api)["late"]["spec"].get("nodeName"))
    no_double_use(check, api, "with both running")

    api.must("DELETE", f"/api/v1/namespaces/{NS}/pods/{BOUND[0]}")
    late = deploylib.wait_bound(api, NS, ["late"], 30)["late"]
    if check("once one is gone the new pod is bound", bool(late.get("spec", {}).get("nodeName"))):
        gpu = k8slib.assignment(late)["gpus"][0]
        check("to the GPU the remaining pod does not hold", gpu != held[BOUND[1]],
              f"late on GPU {gpu}, {BOUND[1]} on GPU {held[BOUND[1]]}")

    # run-1 (3 CPUs) and late (1) ask 4 of the node's 5 CPUs: a pod asking 2 must wait although
    # a GPU is free, until the node's allocatable grows.
    k8slib.create_pods(api, [k8slib.gpu_pod("wide", NS, gpus=1, queue="other", cpu="2")])

    def wide_waits():
        p = pods(api)["wide"]
        return (sc.condition(p, "PodScheduled") or {}).get("status") == "False" or None

    check("a pod asking 2 CPUs is decided", k8slib.wait_until(wide_waits, 30, 0.5)[1] is not None)
    time.sleep(2)
    check("it waits: the node's pods ask 4 of its 5 CPUs",
          not pods(api)["wide"]["spec"].get("nodeName"))
    api.must("PATCH", f"/api/v1/nodes/{NODE}/status",
             {"status": {"allocatable": {"cpu": "8"}, "capacity": {"cpu": "8"}}},
             content_type="application/merge-patch+json")
    wide = deploylib.wait_bound(api, NS, ["wide"], 30)["wide"]
    check("once the node's allocatable CPU is 8 it is bound, without a restart",
          bool(wide.get("spec", {}).get("nodeName")))
    no_double_use(check, api, "at the end")
    return check.exit_code()


if __name__ == "__main__":
    sys.exit(main())
