#!/usr/bin/env python3
"""A restarted `tessera scheduler` that reads node reports without the MIG instances its
bound pods hold, against a real control plane.

Run through controlplane.py (tests/k8s/CMakeLists.txt, test k8s_mig_restart):

  TESSERA_BINARY=build/release/apps/tessera/tessera \
    python3 tests/k8s/controlplane.py -- python3 tests/k8s/mig_restart_test.py

Two kwok A100-80GB nodes with 2 GPUs each report GPU 0 as seven 1g.10gb instances and GPU 1
with MIG off. A first scheduler binds 8 pods asking nvidia.com/mig-1g.10gb, so both GPU 0s hold
instances. It stops, and both nodes' tessera.io/gpu-inventory now say MIG is off everywhere (a
report that lags the node, or is wrong). A second scheduler starts and 4 pods asking one whole
GPU arrive. Checks, read back from the API server:
* the second scheduler binds exactly 2 of them, both on GPU 1: no GPU whose instances the MIG
  pods hold is given whole;
* every MIG pod gets a Warning Event SliceMissing naming its instance, and
  tessera_mig_layout_conflicts counts the 2 GPUs; a third scheduler started while the reports
  still lag counts them too, and tells no pod again (still one SliceMissing Event each);
* once the reports show the instances again, the conflicts clear, and a new MIG pod gets a free
  instance: no instance is ever held by two pods, and every assignment matches its node's
  inventory.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import deploylib  # noqa: E402
import k8slib  # noqa: E402
import sched_checks as sc  # noqa: E402

NS = "mig-restart"
NODES = ["mig-0", "mig-1"]
MODEL = "A100-80GB"
LAYOUT = " ".join(f"1g.10gb@{s}" for s in range(7))
MIG_PODS = 8  # one more than a GPU's instances: both GPU 0s hold some
WHOLE_PODS = 4
CONFIG = """\
schedulerName: tessera
podEvents: true
podConditions: true
migRelayout: false
"""


def inventory(node: str, mig_on_gpu0: bool) -> str:
    _, mem = k8slib.MODELS[MODEL]
    return json.dumps([
        {"index": i, "uuid": k8slib.gpu_uuid(node, i), "model": MODEL, "memory_mib": mem,
         "mig_enabled": i == 0 and mig_on_gpu0, "mig_layout": LAYOUT if i == 0 and mig_on_gpu0
         else "", "health": "healthy"} for i in range(2)])


def report(api: k8slib.Client, node: str, mig_on_gpu0: bool) -> None:
    api.must("PATCH", f"/api/v1/nodes/{node}",
             {"metadata": {"annotations": {k8slib.INVENTORY: inventory(node, mig_on_gpu0)}}},
             content_type="application/merge-patch+json")


def mig_pod(name: str) -> dict:
    p = k8slib.gpu_pod(name, NS, gpus=None)
    p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/mig-1g.10gb"] = "1"
    p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/mig-1g.10gb"] = "1"
    return p


def main() -> int:
    check = k8slib.Checks()
    api = k8slib.Client.from_env()
    k8slib.ensure_namespace(api, NS)
    nodes = []
    for n in NODES:
        node = k8slib.kwok_gpu_node(n, gpus=2, model=MODEL)
        node["metadata"]["annotations"][k8slib.INVENTORY] = inventory(n, True)
        nodes.append(node)
    k8slib.create_nodes(api, nodes)
    check("kwok nodes Ready", k8slib.wait_nodes_ready(api, NODES, 90))
    return k8slib.with_processes(check, lambda scheds: run(check, api, scheds))


def pods(api: k8slib.Client) -> list[dict]:
    return api.list_all(f"/api/v1/namespaces/{NS}/pods")[0]


def bound_only(by_name: dict[str, dict]) -> dict[str, dict]:
    return {n: p for n, p in by_name.items() if p.get("spec", {}).get("nodeName")}


def no_double_use(check, api: k8slib.Client, label: str) -> None:
    items = pods(api)
    nodes = {n["metadata"]["name"]: n for n in api.list_all("/api/v1/nodes", selector="type=kwok")[0]}
    _, problems = sc.gpu_usage(items, nodes)
    check(f"{label}: no GPU or MIG instance held twice", not problems, "; ".join(problems[:5]))


def run(check, api: k8slib.Client, scheds: list[k8slib.Process]) -> int:
    first, _ = k8slib.start_scheduler("tessera-first", CONFIG)
    scheds.append(first)
    mig_names = [f"mig-{i}" for i in range(MIG_PODS)]
    k8slib.create_pods(api, [mig_pod(n) for n in mig_names])
    bound = bound_only(deploylib.wait_bound(api, NS, mig_names, 60))
    if not check(f"the first scheduler binds all {MIG_PODS} MIG pods", len(bound) == MIG_PODS,
                 f"{len(bound)} bound"):
        return check.exit_code()
    nodes = {n["metadata"]["name"]: n for n in api.list_all("/api/v1/nodes", selector="type=kwok")[0]}
    held = {}
    bad = []
    for name, p in bound.items():
        a, problem = sc.validate_assignment(p, nodes.get(p["spec"]["nodeName"]))
        if problem:
            bad.append(problem)
        else:
            held[name] = (p["spec"]["nodeName"], a["gpus"][0], a["mig_instance"])
    check("their assignments name concrete instances of the nodes' layouts", not bad,
          "; ".join(bad[:3]))
    held_gpus = {(n, g) for n, g, _ in held.values()}
    if not check("both GPU 0s hold instances", held_gpus == {(n, 0) for n in NODES},
                 str(held_gpus)):
        return check.exit_code()
    first.close()

    # The reports now lag: MIG off everywhere. A new scheduler reads them.
    for n in NODES:
        report(api, n, False)
    second, port = k8slib.start_scheduler("tessera-second", CONFIG)
    scheds.append(second)
    whole_names = [f"whole-{i}" for i in range(WHOLE_PODS)]
    k8slib.create_pods(api, [k8slib.gpu_pod(n, NS, gpus=1) for n in whole_names])

    def decided() -> bool:
        # Every whole-GPU pod is bound or told it does not fit (PodScheduled=False).
        by_name = {p["metadata"]["name"]: p for p in pods(api)}
        return all(by_name[n]["spec"].get("nodeName") or
                   (sc.condition(by_name[n], "PodScheduled") or {}).get("status") == "False"
                   for n in whole_names if n in by_name)
    check("the second scheduler decides every whole-GPU pod",
          k8slib.wait_until(decided, 30, 0.5)[1] is not None)
    time.sleep(2)  # a late bind would still show
    items = {p["metadata"]["name"]: p for p in pods(api)}
    whole_bound = {n: k8slib.assignment(items[n]) for n in whole_names
                   if items[n]["spec"].get("nodeName")}
    on = sorted((items[n]["spec"]["nodeName"], a["gpus"]) for n, a in whole_bound.items())
    check("the second scheduler binds exactly the 2 whole GPUs no MIG pod holds",
          on == [(n, [1]) for n in NODES], str(on))
    no_double_use(check, api, "after the restart")

    def told() -> set[str] | None:
        got = {n for n in mig_names
               if any(e.get("reason") == "SliceMissing" and e.get("type") == "Warning"
                      and held[n][2] in e.get("note", "")
                      for e in deploylib.events_for(api, NS, n))}
        return got if got == set(mig_names) else None

    got, _ = k8slib.wait_until(told, 30, 0.5)
    check("every MIG pod gets a Warning Event SliceMissing naming its instance", got is not None)

    def conflicts(want: float):
        def probe():
            try:
                text = k8slib.metrics(port)
            except OSError:
                return None  # not serving yet
            return k8slib.metric_value(text, "tessera_mig_layout_conflicts") == want or None
        return probe

    check("tessera_mig_layout_conflicts counts the 2 GPUs",
          k8slib.wait_until(conflicts(2.0), 20, 0.5)[1] is not None,
          str(k8slib.metric_value(k8slib.metrics(port), "tessera_mig_layout_conflicts")))

    # A third scheduler, while the reports still lag, finds the same: it tells nobody again.
    second.close()
    third, port = k8slib.start_scheduler("tessera-third", CONFIG)
    scheds.append(third)
    check("a third scheduler counts the same 2 conflicting GPUs",
          k8slib.wait_until(conflicts(2.0), 20, 0.5)[1] is not None)
    time.sleep(2)  # its Events would be written by now
    counts = {n: sum(e.get("reason") == "SliceMissing" for e in deploylib.events_for(api, NS, n))
              for n in mig_names}
    check("each MIG pod still has exactly one SliceMissing Event",
          all(c == 1 for c in counts.values()), str(counts))

    # The reports catch up; the pending whole-GPU pods go, and a new MIG pod arrives.
    for n in NODES:
        report(api, n, True)
    check("the conflicts clear once the reports show the instances",
          k8slib.wait_until(conflicts(0.0), 20, 0.5)[1] is not None)
    for n in whole_names:
        if n not in whole_bound:
            api.must("DELETE", f"/api/v1/namespaces/{NS}/pods/{n}")
    k8slib.create_pods(api, [mig_pod("mig-late")])
    late = bound_only(deploylib.wait_bound(api, NS, ["mig-late"], 30))
    if check("a new MIG pod is bound", "mig-late" in late):
        nodes = {n["metadata"]["name"]: n
                 for n in api.list_all("/api/v1/nodes", selector="type=kwok")[0]}
        a, problem = sc.validate_assignment(late["mig-late"], nodes[late["mig-late"]["spec"]["nodeName"]])
        check("on a free instance of its node's layout",
              not problem and (late["mig-late"]["spec"]["nodeName"], a["gpus"][0],
                               a["mig_instance"]) not in set(held.values()),
              problem or json.dumps(a))
    no_double_use(check, api, "at the end")
    return check.exit_code()


if __name__ == "__main__":
    sys.exit(main())
