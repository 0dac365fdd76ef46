#!/usr/bin/env python3
"""Checks that the control plane from controlplane.py schedules GPU pods.

Run it through controlplane.py, which exports the connection variables:

  tests/k8s/controlplane.py -- python3 tests/k8s/smoke_gpu_pod.py

It creates a kwok node with 8 nvidia.com/gpu, a pod asking for 1 GPU that
kube-scheduler must bind to it and kwok must report Running, and a pod asking
for 9 that must stay Pending as unschedulable; then removes them. Each step is
timed. Exits non-zero when a check fails.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
from controlplane import FAKE_NODE_ANNOTATION, FAKE_NODE_VALUE, Api  # noqa: E402

NODE = "tessera-gpu-node-0"
NS = "default"
GPU = "nvidia.com/gpu"

passed = 0
failed = 0


def check(name: str, ok: bool, detail: str = "") -> bool:
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
    return ok


def wait(what: str, probe, timeout: float):
    """Polls probe() until it returns a truthy value; returns (value, seconds)."""
    start = time.monotonic()
    value = None
    while time.monotonic() - start < timeout:
        value = probe()
        if value:
            return value, time.monotonic() - start
        time.sleep(0.1)
    return value, None


def gpu_pod(name: str, gpus: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": "tessera-smoke"}},
        "spec": {
            "automountServiceAccountToken": False,
            "containers": [{
                "name": "main",
                # Never pulled: kwok only pretends to run containers.
                "image": "registry.invalid/tessera/smoke:0",
                "resources": {"limits": {GPU: str(gpus)}},
            }],
        },
    }


def main() -> int:
    api = Api(os.environ["TESSERA_K8S_SERVER"], os.environ["TESSERA_K8S_TOKEN"],
              os.environ["TESSERA_K8S_CA"])

    status, body = api.get("/version")
    check("GET /version", status == 200, body.get("gitVersion", "") if status == 200 else str(body))
    status, body = api.get("/apis/resource.k8s.io/v1")
    names = sorted(r["name"] for r in body.get("resources", [])) if status == 200 else []
    check("resource.k8s.io/v1 served", status == 200 and "resourceslices" in names,
          ", ".join(n for n in names if "/" not in n))

    # A service-account token is accepted (authentication) but grants nothing
    # by itself (RBAC).
    status, body = api.post(f"/api/v1/namespaces/{NS}/serviceaccounts/default/token",
                            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                             "spec": {"expirationSeconds": 600}})
    sa_token = body.get("status", {}).get("token", "") if status == 201 else ""
    check("TokenRequest for default/default", bool(sa_token), "" if sa_token else f"HTTP {status}")
    sa = Api(api.server, sa_token, os.environ["TESSERA_K8S_CA"])
    status, body = sa.get(f"/api/v1/namespaces/{NS}/pods")
    msg = body.get("message", "") if isinstance(body, dict) else str(body)
    check("RBAC denies the service account", status == 403
          and "system:serviceaccount:default:default" in msg, msg)

    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE,
            "annotations": {FAKE_NODE_ANNOTATION: FAKE_NODE_VALUE},
            "labels": {"type": "kwok", "kubernetes.io/hostname": NODE},
        },
        "status": {"capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: "8"}},
    }
    t = time.monotonic()
    status, body = api.post("/api/v1/nodes", node)
    if not check("create kwok node", status == 201, f"HTTP {status}" if status != 201 else ""):
        print(body)
        return 1

    def node_ready():
        s, n = api.get(f"/api/v1/nodes/{NODE}")
        if s != 200:
            return None
        conds = {c["type"]: c["status"] for c in n.get("status", {}).get("conditions", [])}
        return n if conds.get("Ready") == "True" else None
    n, secs = wait("node Ready", node_ready, 60)
    check("kwok marks the node Ready", secs is not None, f"{secs:.2f}s" if secs else "")
    alloc = (n or {}).get("status", {}).get("allocatable", {})
    check("node offers 8 GPUs", alloc.get(GPU) == "8", f"allocatable {alloc}")

    # The first pod may race the controller-manager's own start-up tasks;
    # retry transient refusals for a few seconds.
    t = time.monotonic()
    for _ in range(50):
        status, body = api.post(f"/api/v1/namespaces/{NS}/pods", gpu_pod("gpu-1", 1))
        if status != 403 and status < 500:
            break
        time.sleep(0.2)
    check("create pod asking for 1 GPU", status == 201, "" if status == 201 else f"HTTP {status} {body}")

    def pod(name):
        s, p = api.get(f"/api/v1/namespaces/{NS}/pods/{name}")
        return p if s == 200 else {}

    p, secs = wait("bound", lambda: (pod("gpu-1").get("spec", {}).get("nodeName") and pod("gpu-1")), 60)
    bound_at = time.monotonic() - t
    check("kube-scheduler binds it to the GPU node",
          secs is not None and p["spec"]["nodeName"] == NODE,
          f"{bound_at:.2f}s after create" if secs is not None else "")
    p, secs = wait("running", lambda: (pod("gpu-1").get("status", {}).get("phase") == "Running"
                                       and pod("gpu-1")), 60)
    check("kwok reports it Running", secs is not None,
          f"{time.monotonic() - t:.2f}s after create, pod IP {p.get('status', {}).get('podIP')}"
          if secs is not None else str(pod("gpu-1").get("status")))

    status, body = api.post(f"/api/v1/namespaces/{NS}/pods", gpu_pod("gpu-9", 9))
    check("create pod asking for 9 GPUs", status == 201, "" if status == 201 else f"HTTP {status}")

    def unschedulable():
        for c in pod("gpu-9").get("status", {}).get("conditions", []):
            if c["type"] == "PodScheduled" and c["status"] == "False":
                return c
        return None
    cond, secs = wait("unschedulable", unschedulable, 30)
    check("it stays Pending as Unschedulable", secs is not None and "nvidia.com/gpu" in cond.get("message", ""),
          (cond or {}).get("message", ""))

    for name in ("gpu-1", "gpu-9"):
        api.request("DELETE", f"/api/v1/namespaces/{NS}/pods/{name}")
    _, secs = wait("pods gone", lambda: not pod("gpu-1") and not pod("gpu-9"), 60)
    check("deleted pods go away", secs is not None, f"{secs:.2f}s" if secs is not None else "")
    status, _ = api.request("DELETE", f"/api/v1/nodes/{NODE}")
    check("delete node", status == 200)

    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
