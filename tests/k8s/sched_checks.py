"""Checks shared by the scheduler-mode end-to-end tests (scheduler_mode_test.py,
leader_handover_test.py): a pod watch that records every binding as the API
server reports it, and the validation of tessera.io/assignment annotations and
GPU usage against the nodes' inventories.

Everything here judges objects read back from the API server; nothing trusts
what the scheduler says about itself.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import defaultdict

import k8slib

GPU_MEMORY = "tessera.io/gpu-memory"
GPU_COMPUTE = "tessera.io/gpu-compute"
MIG_RESOURCE = "nvidia.com/mig-"
ASSIGNMENT_KINDS = {"exclusive", "mig", "mps", "mig-mps", "timeslice", "share"}
# The largest memory of the models the tests use (catalog, MiB): a memory share needs at least
# memory * 1000 / this many thousandths of a GPU.
MAX_MODEL_MEMORY_MIB = 81920


class PodWatcher:
    """Watches the pods of one namespace from a resourceVersion taken before the first pod
    exists, and records per pod UID every transition of spec.nodeName from empty to set, any
    change of a set nodeName, and deletions. Re-opens the watch from the last resourceVersion
    (bookmarks keep it fresh) when the server ends it."""

    def __init__(self, api: k8slib.Client, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        _, self.rv = api.list_all(f"/api/v1/namespaces/{namespace}/pods")
        self.lock = threading.Lock()
        self.node: dict[str, str] = {}          # uid -> current nodeName ("" while pending)
        self.name: dict[str, str] = {}          # uid -> pod name
        self.binds: dict[str, int] = defaultdict(int)    # uid -> empty -> set transitions
        self.bind_time: dict[str, float] = {}   # uid -> monotonic time the first bind was seen
        self.node_changes: list[str] = []       # "pod: a -> b"
        self.deleted: set[str] = set()
        self.events = 0
        self.error = ""
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        while not self.stop.is_set():
            try:
                for ev in self.api.watch(path, self.rv, timeout_s=60):
                    self._event(ev)
                    if self.stop.is_set():
                        return
            except Exception as e:  # noqa: BLE001 - reported as a check failure
                if self.stop.is_set():
                    return
                self.error = f"watch failed: {e}"
                return

    def _event(self, ev: dict) -> None:
        obj = ev.get("object", {})
        kind = ev.get("type")
        md = obj.get("metadata", {})
        if md.get("resourceVersion"):
            self.rv = md["resourceVersion"]
        if kind == "BOOKMARK":
            return
        if kind == "ERROR":
            self.error = f"watch error: {obj.get('message', obj)}"
            self.stop.set()
            return
        uid = md.get("uid", "")
        node = obj.get("spec", {}).get("nodeName", "") or ""
        now = time.monotonic()
        with self.lock:
            self.events += 1
            self.name[uid] = md.get("name", "")
            before = self.node.get(uid, "")
            if kind == "DELETED":
                self.deleted.add(uid)
            if node and not before:
                self.binds[uid] += 1
                self.bind_time.setdefault(uid, now)
            elif before and node != before:
                self.node_changes.append(f"{md.get('name')}: {before} -> {node or '(none)'}")
            self.node[uid] = node

    def bound_count(self) -> int:
        with self.lock:
            return sum(1 for n in self.node.values() if n)

    def bind_times(self) -> list[float]:
        with self.lock:
            return sorted(self.bind_time.values())

    def close(self) -> None:
        self.stop.set()


def wait_for(probe, timeout: float, interval: float = 0.5):
    return k8slib.wait_until(probe, timeout, interval)


def pod_limits(pod: dict) -> dict:
    out: dict[str, str] = {}
    for c in pod.get("spec", {}).get("containers", []):
        out.update(c.get("resources", {}).get("limits", {}))
    return out


def memory_mib(quantity: str) -> int:
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024 * 1024}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return int(float(quantity[:-len(suffix)]) * factor)
    return int(int(quantity) / (1024 * 1024))


def inventory(node: dict) -> list[dict]:
    raw = node.get("metadata", {}).get("annotations", {}).get(k8slib.INVENTORY, "[]")
    return json.loads(raw)


def validate_assignment(pod: dict, node: dict | None) -> tuple[dict | None, str]:
    """Checks a bound pod's tessera.io/assignment per docs/OPERATIONS.md against the pod's
    request and its node's inventory. Returns (assignment, "") or (None or it, problem)."""
    name = pod["metadata"]["name"]
    node_name = pod.get("spec", {}).get("nodeName", "")
    raw = pod["metadata"].get("annotations", {}).get(k8slib.ASSIGNMENT)
    if not raw:
        return None, f"{name}: no {k8slib.ASSIGNMENT} annotation"
    try:
        a = json.loads(raw)
    except ValueError as e:
        return None, f"{name}: assignment is not JSON ({e}): {raw[:120]}"
    if not isinstance(a, dict):
        return None, f"{name}: assignment is not an object: {raw[:120]}"
    if a.get("node") != node_name:
        return a, f"{name}: assignment names node {a.get('node')!r}, pod is on {node_name!r}"
    if node is None:
        return a, f"{name}: node {node_name} does not exist"
    kind = a.get("kind")
    if kind not in ASSIGNMENT_KINDS:
        return a, f"{name}: unknown kind {kind!r}"
    gpus = a.get("gpus")
    inv = {g["index"]: g for g in inventory(node)}
    if not isinstance(gpus, list) or not all(isinstance(g, int) for g in gpus):
        return a, f"{name}: gpus is not a list of integers: {gpus!r}"
    if len(set(gpus)) != len(gpus) or any(g not in inv for g in gpus):
        return a, f"{name}: gpus {gpus} are not distinct indices of {node_name}'s inventory"
    uuids = a.get("uuids")
    if uuids != [inv[g]["uuid"] for g in gpus]:
        return a, f"{name}: uuids {uuids} do not match {node_name}'s inventory for gpus {gpus}"
    limits = pod_limits(pod)
    whole = int(limits.get(k8slib.GPU, "0"))
    share = GPU_MEMORY in limits or GPU_COMPUTE in limits
    allowed = {"node", "kind", "gpus", "uuids"}
    if share:
        # docs/OPERATIONS.md: the selector names the mechanism (mps, timeslice, mig, mig-mps);
        # with selectShareMechanism off, standard shares are milli-GPU `share`s.
        if len(gpus) != 1:
            return a, f"{name}: a share pod got kind {kind} on gpus {gpus}"
        need_pct = int(limits[GPU_COMPUTE]) if GPU_COMPUTE in limits else 0
        need_mib = memory_mib(limits[GPU_MEMORY]) if GPU_MEMORY in limits else 0
        if kind == "share":
            milli = a.get("gpu_milli")
            need = max(1, need_pct * 10,
                       math.ceil(need_mib * 1000 / MAX_MODEL_MEMORY_MIB) if need_mib else 0)
            if not isinstance(milli, int) or not need <= milli <= 1000:
                return a, f"{name}: gpu_milli {milli!r}, the request needs at least {need}"
            allowed.add("gpu_milli")
        elif kind in ("mps", "mig-mps"):
            pct, lim = a.get("mps_thread_pct"), a.get("memory_limit_mib")
            if not isinstance(pct, int) or not max(1, need_pct) <= pct <= 100:
                return a, f"{name}: mps_thread_pct {pct!r}, the request needs {need_pct}%"
            if not isinstance(lim, int) or lim < need_mib or lim <= 0:
                return a, f"{name}: memory_limit_mib {lim!r}, the request needs {need_mib} MiB"
            allowed |= {"mps_thread_pct", "memory_limit_mib"}
            if kind == "mig-mps":
                allowed.add("mig_instance")
        elif kind == "timeslice":
            lim = a.get("memory_limit_mib")
            if not isinstance(lim, int) or lim < need_mib:
                return a, f"{name}: memory_limit_mib {lim!r}, the request needs {need_mib} MiB"
            allowed.add("memory_limit_mib")
        elif kind == "mig":
            allowed.add("mig_instance")
        else:
            return a, f"{name}: a share pod got kind {kind} on gpus {gpus}"
        if kind in ("mig", "mig-mps"):
            inst = a.get("mig_instance", "")
            layout = str(inv[gpus[0]].get("mig_layout", "")).split()
            if inst not in layout:
                return a, f"{name}: MIG instance {inst!r} is not in the GPU's layout {layout}"
    elif any(k.startswith(MIG_RESOURCE) for k in limits):
        # An explicit MIG request: one instance of that profile, in its GPU's layout.
        profile = next(k for k in limits if k.startswith(MIG_RESOURCE))[len(MIG_RESOURCE):]
        inst = a.get("mig_instance", "")
        if kind != "mig" or len(gpus) != 1 or not inst.startswith(profile + "@"):
            return a, f"{name}: asked for a {profile} instance, got kind {kind} {inst!r} on {gpus}"
        layout = str(inv[gpus[0]].get("mig_layout", "")).split()
        if inst not in layout:
            return a, f"{name}: MIG instance {inst!r} is not in the GPU's layout {layout}"
        allowed.add("mig_instance")
    else:
        if kind != "exclusive" or len(gpus) != whole:
            return a, f"{name}: asked for {whole} GPUs, got kind {kind} on gpus {gpus}"
    extra = set(a) - allowed
    if extra:
        return a, f"{name}: fields that do not apply to kind {kind}: {sorted(extra)}"
    return a, ""


def gpu_usage(pods: list[dict], nodes: dict[str, dict]) -> tuple[dict, list[str]]:
    """Per (node, gpu index): thousandths in use, from the pods' assignments (an MPS client
    counts its thread %, a time-slice replica or MIG instance a share of the GPU). Returns
    (usage, problems) where problems lists over-committed GPUs: a whole GPU also given to another
    pod, more than 1000 milli-GPU of shares, MPS threads above 100% or pinned memory above the
    GPU's, or one MIG instance given twice."""
    exclusive: dict[tuple[str, int], list[str]] = defaultdict(list)
    shares: dict[tuple[str, int], list[tuple[str, int]]] = defaultdict(list)
    mps_mib: dict[tuple[str, int], int] = defaultdict(int)
    instances: dict[tuple[str, int, str], list[str]] = defaultdict(list)
    for p in pods:
        if not p.get("spec", {}).get("nodeName"):
            continue
        a = k8slib.assignment(p) if p["metadata"].get("annotations") else None
        if not isinstance(a, dict):
            continue
        name = p["metadata"]["name"]
        kind = a.get("kind")
        for g in a.get("gpus", []):
            key = (p["spec"]["nodeName"], g)
            if kind == "share":
                shares[key].append((name, int(a.get("gpu_milli", 0))))
            elif kind == "mps":
                shares[key].append((name, 10 * int(a.get("mps_thread_pct", 0))))
                mps_mib[key] += int(a.get("memory_limit_mib", 0))
            elif kind in ("mig", "mig-mps"):
                instances[(key[0], g, a.get("mig_instance", ""))].append(name)
                shares[key].append((name, 0))
            elif kind == "timeslice":
                shares[key].append((name, 0))
            else:
                exclusive[key].append(name)
    usage: dict[tuple[str, int], int] = {}
    problems = []
    for key in set(exclusive) | set(shares):
        ex = exclusive.get(key, [])
        sh = shares.get(key, [])
        total = 1000 * len(ex) + sum(m for _, m in sh)
        usage[key] = total
        if len(ex) > 1 or (ex and sh) or total > 1000:
            problems.append(f"{key[0]} gpu {key[1]}: exclusive {ex}, shares {sh}")
    for key, mib in mps_mib.items():
        inv = {g["index"]: g for g in inventory(nodes[key[0]])} if key[0] in nodes else {}
        cap = int(inv.get(key[1], {}).get("memory_mib", 0))
        if cap and mib > cap:
            problems.append(f"{key[0]} gpu {key[1]}: MPS memory limits {mib} MiB > {cap} MiB")
    for (node, g, inst), holders in instances.items():
        if len(holders) > 1:
            problems.append(f"{node} gpu {g}: MIG instance {inst} given to {holders}")
    return usage, problems


def condition(pod: dict, ctype: str) -> dict | None:
    for c in pod.get("status", {}).get("conditions", []) or []:
        if c.get("type") == ctype:
            return c
    return None


def summarize_times(label: str, times: list[float], start: float) -> str:
    if not times:
        return f"{label}: none"
    span = times[-1] - times[0]
    rate = (len(times) - 1) / span if span > 0 else float("inf")
    return (f"{label}: {len(times)} in {span:.1f}s ({rate:.0f}/s), first {times[0] - start:.1f}s"
            f", last {times[-1] - start:.1f}s after the first pod was created")
