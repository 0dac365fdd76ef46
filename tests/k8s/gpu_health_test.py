#!/usr/bin/env python3
"""`tessera scheduler` places nothing on a GPU its node reports unhealthy, against a real
control plane.

Run through controlplane.py (tests/k8s/CMakeLists.txt, test k8s_gpu_health):

  TESSERA_BINARY=build/release/apps/tessera/tessera \
    python3 tests/k8s/controlplane.py -- python3 tests/k8s/gpu_health_test.py

One kwok A100-80GB node with 3 GPUs whose tessera.io/gpu-inventory reports GPU 0 unhealthy.
Three pods asking one whole GPU arrive. Checks, read back from the API server:
* two are bound, to GPUs 1 and 2; the third waits with PodScheduled=False;
* once the inventory reports GPU 0 healthy, the third is bound to it, without a restart;
* GPU 1 is then reported unhealthy: the pod on it keeps running (nothing is evicted), and once
  it is deleted a new pod waits instead of taking GPU 1;
* no GPU is ever held twice.
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

NS = "gpu-health"
NODE = "health-0"
MODEL = "A100-80GB"
CONFIG = """\
schedulerName: tessera
podConditions: true
"""


def main() -> int:
    check = k8slib.Checks()
    api = k8slib.Client.from_env()
    k8slib.ensure_namespace(api, NS)
    node = k8slib.kwok_gpu_node(NODE, gpus=3, model=MODEL)
    node["metadata"]["annotations"][k8slib.INVENTORY] = inventory(unhealthy={0})
    k8slib.create_nodes(api, [node])
    check("kwok node Ready", k8slib.wait_nodes_ready(api, [NODE], 90))
    return k8slib.with_processes(check, lambda scheds: run(check, api, scheds))


def inventory(unhealthy: set[int]) -> str:
    entries = json.loads(k8slib.kwok_gpu_node(NODE, gpus=3, model=MODEL)["metadata"]
                         ["annotations"][k8slib.INVENTORY])
    for e in entries:
        e["health"] = "unhealthy" if e["index"] in unhealthy else "healthy"
    return json.dumps(entries)


def report(api: k8slib.Client, unhealthy: set[int]) -> None:
    api.must("PATCH", f"/api/v1/nodes/{NODE}",
             {"metadata": {"annotations": {k8slib.INVENTORY: inventory(unhealthy)}}},
             content_type="application/merge-patch+json")


def pods(api: k8slib.Client) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in api.list_all(f"/api/v1/namespaces/{NS}/pods")[0]}


def gpu_of(pod: dict) -> int | None:
    return k8slib.assignment(pod)["gpus"][0] if pod["spec"].get("nodeName") else None


def waits(api: k8slib.Client, name: str) -> bool:
    def decided():
        return (sc.condition(pods(api)[name], "PodScheduled") or {}).get("status") == "False" \
            or None

    if k8slib.wait_until(decided, 30, 0.5)[1] is None:
        return False
    time.sleep(2)  # a late bind would still show
    return not pods(api)[name]["spec"].get("nodeName")


def no_double_use(check, api: k8slib.Client, label: str) -> None:
    nodes = {n["metadata"]["name"]: n
             for n in api.list_all("/api/v1/nodes", selector="type=kwok")[0]}
    _, problems = sc.gpu_usage(list(pods(api).values()), nodes)
    check(f"{label}: no GPU held twice", not problems, "; ".join(problems[:5]))


def run(check, api: k8slib.Client, scheds: list[k8slib.Process]) -> int:
    sched, _ = k8slib.start_scheduler("tessera-health", CONFIG)
    scheds.append(sched)
    k8slib.create_pods(api, [k8slib.gpu_pod(n, NS, gpus=1) for n in ("p0", "p1")])
    bound = deploylib.wait_bound(api, NS, ["p0", "p1"], 60)
    gpus = sorted(gpu_of(bound[n]) for n in ("p0", "p1") if bound[n]["spec"].get("nodeName"))
    check("two pods are bound, to GPUs 1 and 2", gpus == [1, 2], str(gpus))
    k8slib.create_pods(api, [k8slib.gpu_pod("p2", NS, gpus=1)])
    check("a third waits: GPU 0 is unhealthy", waits(api, "p2"))

    report(api, set())
    p2 = deploylib.wait_bound(api, NS, ["p2"], 30)["p2"]
    check("once GPU 0 is reported healthy the third is bound to it", gpu_of(p2) == 0,
          str(gpu_of(p2)))

    on_gpu1 = next(n for n in ("p0", "p1") if gpu_of(pods(api)[n]) == 1)
    report(api, {1})
    time.sleep(2)
    check("the pod on a GPU reported unhealthy keeps running",
          pods(api)[on_gpu1]["spec"].get("nodeName") == NODE and
          not pods(api)[on_gpu1]["metadata"].get("deletionTimestamp"))
    api.must("DELETE", f"/api/v1/namespaces/{NS}/pods/{on_gpu1}")
    k8slib.wait_until(lambda: on_gpu1 not in pods(api) or None, 30, 0.5)
    k8slib.create_pods(api, [k8slib.gpu_pod("p3", NS, gpus=1)])
    check("once it is gone a new pod waits instead of taking GPU 1", waits(api, "p3"))
    no_double_use(check, api, "at the end")
    return check.exit_code()


if __name__ == "__main__":
    sys.exit(main())
