#!/usr/bin/env python3
"""tessera-bench-k8s: kube-scheduler and `tessera scheduler` side by side on a real control plane.

  tessera-bench-k8s [--nodes 5000] [--pods 10000] [--fill-nodes 250] [--json FILE] ...

Builds or finds the control plane (scripts/k8s-setup.sh), starts it with
tests/k8s/controlplane.py --no-kube-scheduler, creates the kwok GPU nodes once and then,
for each scheduler in turn (kube-scheduler first), on the same nodes and on a clean slate:

  plain  --pods single-GPU pods on the --nodes node pool (8 GPUs per node);
  fill   a mixed set (whole GPUs and shares, --mix) asking --fill-demand times the GPU
         capacity of the --fill-nodes pool, to measure what is left unallocated.

Only one scheduler runs at a time: each phase starts it fresh and stops it at the end, and
the phase's pods are deleted (grace period 0) and gone before the next phase. --mode stream
(default) starts the scheduler, waits until it has bound a warm-up pod (its start-up: the
initial lists of every node and pod), deletes that pod, then creates the phase's pods from
--threads threads on keep-alive connections while a watch records when each pod's
spec.nodeName first appears: pods/s = pods bound / (last bind seen - first creation request),
latency = bind seen - creation acknowledged. --mode backlog creates every pod first and then
starts the scheduler: pods/s = pods bound / (last bind seen - scheduler start).

kube-scheduler schedules pods with schedulerName default-scheduler and sees GPU shares as
NVIDIA time-slicing replicas: a fill node advertises nvidia.com/gpu = GPUs x --replicas with
the label nvidia.com/gpu.replicas, a share of fraction f asks ceil(f x replicas) replicas and
k whole GPUs ask k x replicas. Tessera schedules the same pods, in the same order, with
schedulerName tessera in its native form (nvidia.com/gpu for whole GPUs, tessera.io/gpu-memory
for shares) and reads the 8 physical GPUs from the tessera.io/gpu-inventory annotation.

Pods only need to be bound: kwok is told to leave the benchmark's pods alone (no Running
status writes, which kubelets on other machines would do) unless --pods-running is given.
Figures: docs/BENCHMARK.md ("Real control plane: kube-scheduler vs tessera scheduler").
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

sys.dont_write_bytecode = True


def _repo() -> Path:
    configured = "@CMAKE_SOURCE_DIR@"  # filled in when CMake copies this file to build/*/bench
    if not configured.startswith("@"):
        return Path(configured)
    return Path(__file__).resolve().parent.parent


REPO = _repo()
# Copied into a build's bench directory: use that build's tessera binary.
_BUILD = "@CMAKE_BINARY_DIR@"
if not _BUILD.startswith("@") and "TESSERA_BINARY" not in os.environ:
    if (Path(_BUILD) / "apps" / "tessera" / "tessera").exists():
        os.environ["TESSERA_BINARY"] = str(Path(_BUILD) / "apps" / "tessera" / "tessera")
sys.path.insert(0, str(REPO / "tests" / "k8s"))
import k8slib  # noqa: E402
from k8slib import ApiError, Client, Process, log  # noqa: E402

BENCH_LABEL = "tessera-bench"           # value: the phase, e.g. plain-tessera
POOL_LABEL = "tessera-bench/pool"       # plain | fill
STATUS_LABEL = "tessera-bench-status"   # kwok ignores pods with the value "ignore"
MODEL = "H100-80GB"
SCHEDULERS = ("kube-scheduler", "tessera")


# -- control plane ------------------------------------------------------------------------------

def outer(args, argv: list[str]) -> int:
    """Finds or builds the binaries, starts the control plane and re-runs this script in it."""
    bin_dir = args.bin or os.environ.get("TESSERA_K8S_BIN")
    if not bin_dir:
        out = subprocess.run([str(REPO / "scripts" / "k8s-setup.sh")], check=True,
                             stdout=subprocess.PIPE, text=True).stdout.strip()
        bin_dir = out.splitlines()[-1]
    tmp = Path(tempfile.mkdtemp(prefix="tessera-bench-k8s-"))
    kwok_cfg = tmp / "kwok-bench.yaml"
    # A configuration file leaves unset options at zero, not at their flag defaults.
    opts = {"nodeLeaseDurationSeconds": args.lease_seconds, "nodeLeaseParallelism": 4,
            "nodePlayStageParallelism": 8, "podPlayStageParallelism": 4,
            "podsOnNodeSyncParallelism": 1}
    if not args.pods_running:
        opts["disregardStatusWithLabelSelector"] = f"{STATUS_LABEL}=ignore"
    kwok_cfg.write_text(json.dumps({"apiVersion": "config.kwok.x-k8s.io/v1alpha1",
                                    "kind": "KwokConfiguration", "options": opts}) + "\n")
    grace = max(120, args.lease_seconds // 2)
    cmd = [sys.executable, str(REPO / "tests" / "k8s" / "controlplane.py"), "--bin", bin_dir,
           "--no-kube-scheduler", f"--kwok-arg=--config={kwok_cfg}",
           # After controlplane.py's own lease flag, so this one wins.
           f"--kwok-arg=--node-lease-duration-seconds={args.lease_seconds}",
           f"--kube-controller-manager-arg=--node-monitor-grace-period={grace}s",
           # Its default client limit (20 QPS) takes minutes to untaint thousands of new nodes.
           "--kube-controller-manager-arg=--kube-api-qps=200",
           "--kube-controller-manager-arg=--kube-api-burst=400"]
    if args.keep:
        cmd.append("--keep")
    cmd += ["--", sys.executable, str(Path(__file__).resolve()), "--inner", *argv]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        return subprocess.run(cmd, env=env).returncode
    finally:
        kwok_cfg.unlink(missing_ok=True)
        tmp.rmdir()


# -- workload -------------------------------------------------------------------------------------

def parse_mix(text: str) -> list[tuple[float, float]]:
    """"1:35,0.5:20" -> [(gpus, weight)]; gpus < 1 is a share of one GPU."""
    out = []
    for part in text.split(","):
        size, weight = part.split(":")
        out.append((float(size), float(weight)))
    return out


def fill_sizes(args, capacity_gpus: int) -> list[float]:
    """The fill's pods (GPU sizes) in creation order: random by the mix, until the demand
    reaches fill_demand x capacity."""
    rng = random.Random(args.seed)
    mix = parse_mix(args.mix)
    sizes, weights = [m[0] for m in mix], [m[1] for m in mix]
    out, demand = [], 0.0
    while demand < args.fill_demand * capacity_gpus:
        s = rng.choices(sizes, weights)[0]
        out.append(s)
        demand += s
    return out


def pod_for(name: str, phase: str, sched: str, size: float, pool: str, args,
            mem_mib: int) -> dict:
    """One pod of `size` GPUs for `sched`, in that scheduler's form."""
    gpus = memory = None
    if sched == "kube-scheduler":
        name_field = "default-scheduler"
        if pool == "fill":
            gpus = max(1, math.ceil(size * args.replicas - 1e-9))  # time-slicing replicas
        else:
            gpus = int(size)
    else:
        name_field = "tessera"
        if size >= 1:
            gpus = int(size)
        else:
            memory = f"{int(mem_mib * size)}Mi"
    pod = k8slib.gpu_pod(name, namespace=args.namespace, gpus=gpus, gpu_memory=memory,
                         scheduler=name_field, cpu="1", memory="1Gi",
                         labels={BENCH_LABEL: phase, STATUS_LABEL: "ignore" if not
                                 args.pods_running else "run"},
                         annotations={"tessera-bench/gpus": str(size)})
    pod["spec"]["nodeSelector"] = {POOL_LABEL: pool}
    return pod


def make_nodes(args) -> list[dict]:
    nodes = []
    for i in range(args.nodes):
        n = k8slib.kwok_gpu_node(f"bench-{i:05d}", gpus=args.gpus_per_node, model=MODEL,
                                 labels={POOL_LABEL: "plain"}, pods="256")
        nodes.append(n)
    for i in range(args.fill_nodes):
        n = k8slib.kwok_gpu_node(f"bench-fill-{i:04d}", gpus=args.gpus_per_node, model=MODEL,
                                 labels={POOL_LABEL: "fill",
                                         "nvidia.com/gpu.replicas": str(args.replicas)},
                                 pods="256")
        # Time-slicing: the device plugin advertises every GPU `replicas` times.
        cap = n["status"]["capacity"]
        cap[k8slib.GPU] = str(args.gpus_per_node * args.replicas)
        n["status"]["allocatable"] = dict(cap)
        nodes.append(n)
    return nodes


def wait_nodes_schedulable(api: Client, count: int, timeout: float) -> float:
    """Waits until `count` bench nodes are Ready and untainted; returns the seconds taken."""
    t0 = time.monotonic()
    while True:
        items, _ = api.list_all("/api/v1/nodes", selector=POOL_LABEL)
        ok = sum(1 for n in items
                 if not n.get("spec", {}).get("taints")
                 and any(c.get("type") == "Ready" and c.get("status") == "True"
                         for c in n.get("status", {}).get("conditions", [])))
        if ok >= count:
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"only {ok} of {count} nodes became Ready and untainted")
        time.sleep(1)


# -- measuring ------------------------------------------------------------------------------------

class BindWatch:
    """Records, on the client side, when each pod of a phase is first seen bound."""

    def __init__(self, api: Client, ns: str, phase: str) -> None:
        self.api = api
        self.path = f"/api/v1/namespaces/{ns}/pods"
        self.selector = f"{BENCH_LABEL}={phase}"
        self.bound: dict[str, float] = {}
        self.lock = threading.Lock()
        self.stop = False
        items, self.rv = api.list_all(self.path, selector=self.selector)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def count(self) -> int:
        with self.lock:
            return len(self.bound)

    def _see(self, pod: dict, now: float) -> None:
        if pod.get("spec", {}).get("nodeName"):
            name = pod["metadata"]["name"]
            with self.lock:
                self.bound.setdefault(name, now)

    def run(self) -> None:
        while not self.stop:
            try:
                for ev in self.api.watch(self.path, self.rv, timeout_s=60,
                                         selector=self.selector):
                    now = time.monotonic()
                    obj = ev.get("object", {})
                    if ev.get("type") == "ERROR":
                        raise ApiError("WATCH", self.path, obj.get("code", 0), obj)
                    self.rv = obj.get("metadata", {}).get("resourceVersion", self.rv)
                    if ev.get("type") in ("ADDED", "MODIFIED"):
                        self._see(obj, now)
                    if self.stop:
                        return
            except Exception as exc:  # noqa: BLE001 - relist and go on
                if self.stop:
                    return
                log(f"bench: watch restarts after {exc}")
                items, self.rv = self.api.list_all(self.path, selector=self.selector)
                now = time.monotonic()
                for p in items:
                    self._see(p, now)

    def close(self) -> None:
        self.stop = True


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


def start_kube_scheduler(args, name: str) -> tuple[Process, str]:
    wd = k8slib.workdir()
    cfg = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": os.environ["TESSERA_K8S_SCHEDULER_KUBECONFIG"],
                             "qps": args.qps, "burst": args.burst},
        "leaderElection": {"leaderElect": False},
    }
    if args.kube_scoring != "LeastAllocated":
        cfg["profiles"] = [{"schedulerName": "default-scheduler", "pluginConfig": [{
            "name": "NodeResourcesFit",
            "args": {"scoringStrategy": {"type": args.kube_scoring, "resources": [
                {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
                {"name": k8slib.GPU, "weight": 5}]}}}]}]
    path = wd / f"{name}.yaml"
    path.write_text(json.dumps(cfg, indent=2) + "\n")
    kc = os.environ["TESSERA_K8S_SCHEDULER_KUBECONFIG"]
    port = k8slib.free_port()
    proc = Process(name, [str(Path(os.environ["TESSERA_K8S_BIN"]) / "kube-scheduler"),
                          f"--config={path}", f"--authentication-kubeconfig={kc}",
                          f"--authorization-kubeconfig={kc}", "--bind-address=127.0.0.1",
                          f"--secure-port={port}", "-v=1"])
    return proc, "default-scheduler"


def start_tessera(args, name: str) -> tuple[Process, str]:
    cfg = (f"schedulerName: tessera\nbinding:\n  threads: {args.bind_threads}\n"
           "podConditions: true\npodEvents: true\n")
    proc, _port = k8slib.start_scheduler(
        name, cfg, kubeconfig=Path(os.environ["TESSERA_K8S_SCHEDULER_KUBECONFIG"]),
        extra=[f"--kube-api-qps={args.qps:g}", f"--kube-api-burst={args.burst}"])
    return proc, "tessera"


def delete_phase(api: Client, ns: str, selector: str, timeout: float = 600) -> float:
    t0 = time.monotonic()
    q = urllib.parse.urlencode({"labelSelector": selector, "gracePeriodSeconds": "0"})
    api.must("DELETE", f"/api/v1/namespaces/{ns}/pods?{q}",
             {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
    while True:
        items, _ = api.list_all(f"/api/v1/namespaces/{ns}/pods", selector=selector)
        if not items:
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"{len(items)} pods of {selector} still there after {timeout}s")
        # Pods a kubelet (kwok) would have to confirm: force them.
        for p in items[:200]:
            api.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{p['metadata']['name']}",
                        {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
        time.sleep(0.5)


def create_all(api: Client, args, pods: list[dict]) -> tuple[list[float], float]:
    """Creates the pods from --threads threads; returns each one's acknowledgement time and
    the time the first request went out."""
    acked = [0.0] * len(pods)
    errors = []
    next_i = [0]
    lock = threading.Lock()
    path = f"/api/v1/namespaces/{args.namespace}/pods"

    def creator():
        while True:
            with lock:
                i = next_i[0]
                next_i[0] += 1
            if i >= len(pods):
                return
            status, body = api.request("POST", path, pods[i])
            acked[i] = time.monotonic()
            if status != 201:
                errors.append(f"HTTP {status}: {str(body)[:200]}")

    t0 = time.monotonic()
    threads = [threading.Thread(target=creator) for _ in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"{len(errors)} pod creations failed, e.g. {errors[0]}")
    return acked, t0


def warm_up(api: Client, args, sched: str, phase: str, proc: Process, t_start: float,
            node_mem_mib: int) -> float:
    """Creates a pod in the plain pool and waits for its bind (the end of the scheduler's
    start-up); deletes it again; returns the seconds from t_start to the bind."""
    warm = pod_for(f"warmup-{phase}", f"warmup-{phase}", sched, 1, "plain", args, node_mem_mib)
    api.must("POST", f"/api/v1/namespaces/{args.namespace}/pods", warm)
    wpath = f"/api/v1/namespaces/{args.namespace}/pods/{warm['metadata']['name']}"
    while not api.must("GET", wpath).get("spec", {}).get("nodeName"):
        if not proc.alive():
            raise RuntimeError(f"{sched} exited\n{proc.tail()}")
        if time.monotonic() - t_start > args.timeout:
            raise RuntimeError(f"{sched} bound no warm-up pod in {args.timeout}s\n{proc.tail()}")
        time.sleep(0.05)
    secs = time.monotonic() - t_start
    delete_phase(api, args.namespace, f"{BENCH_LABEL}=warmup-{phase}")
    return secs


def run_phase(api: Client, args, sched: str, workload: str, sizes: list[float],
              node_mem_mib: int) -> dict:
    """One scheduler on one workload, on a clean slate; returns the phase's figures.

    stream:  start the scheduler, warm it up, then create the pods while it runs; the window
             runs from the first creation request to the last bind seen, and a pod's latency
             from its creation's acknowledgement to its bind seen on the watch.
    backlog: create every pod first, then start the scheduler; the window runs from the
             scheduler's start (so it includes its initial lists) to the last bind seen, and
             "latency" is each pod's bind seen minus that start."""
    phase = f"{workload}-{sched}"
    pool = "plain" if workload == "plain" else "fill"
    log(f"bench: {phase}: {len(sizes)} pods on the {pool} pool ({args.mode})")
    starter = start_kube_scheduler if sched == "kube-scheduler" else start_tessera
    res: dict = {"scheduler": sched, "workload": workload, "mode": args.mode, "pods": len(sizes)}
    pods = [pod_for(f"{workload}-{i:06d}", phase, sched, s, pool, args, node_mem_mib)
            for i, s in enumerate(sizes)]
    watch = BindWatch(api, args.namespace, phase)
    proc = None
    try:
        if args.mode == "stream":
            t_start = time.monotonic()
            proc, _ = starter(args, phase)
            res["startup_s"] = round(warm_up(api, args, sched, phase, proc, t_start,
                                             node_mem_mib), 3)
            acked, t0 = create_all(api, args, pods)
            t_created = time.monotonic()
        else:
            acked, tc = create_all(api, args, pods)
            t_created = time.monotonic()
            res["create_s"] = round(t_created - tc, 3)
            t0 = time.monotonic()
            proc, _ = starter(args, phase)
            acked = [t0] * len(pods)
        # Done: every pod bound (plain), or no new bind for --settle seconds (fill).
        last_count, last_change = -1, time.monotonic()
        while True:
            n = watch.count()
            now = time.monotonic()
            if n != last_count:
                last_count, last_change = n, now
            if n >= len(pods):
                break
            if workload == "fill" and n and now - last_change >= args.settle:
                break
            if now - t0 > args.timeout:
                log(f"bench: {phase}: timed out with {n} of {len(pods)} bound")
                break
            if not proc.alive():
                raise RuntimeError(f"{sched} exited\n{proc.tail()}")
            time.sleep(0.1)
        watch.close()
        res["rss_peak_mib"] = round(proc.rss_peak_kib() / 1024, 1)
        bound = dict(watch.bound)
        names = [p["metadata"]["name"] for p in pods]
        lat = [max(0.0, bound[n] - acked[i]) for i, n in enumerate(names) if n in bound]
        last_bind = max(bound.values()) if bound else t0
        first_bind = min(bound.values()) if bound else t0
        if args.mode == "backlog":
            res["startup_s"] = round(first_bind - t0, 3)  # start to first bind seen
        else:
            res["create_s"] = round(t_created - t0, 3)
        res.update({
            "bound": len(bound),
            "pending": len(pods) - len(bound),
            "create_pods_per_s": round(len(pods) / max(1e-9, res["create_s"]), 1),
            "time_to_schedule_all_s": round(last_bind - t0, 3),
            "pods_per_s": round(len(bound) / max(1e-9, last_bind - t0), 1),
            "bind_window_pods_per_s": round(len(bound) / max(1e-9, last_bind - first_bind), 1),
            "latency_p50_ms": round(percentile(lat, 50) * 1000, 1),
            "latency_p90_ms": round(percentile(lat, 90) * 1000, 1),
            "latency_p99_ms": round(percentile(lat, 99) * 1000, 1),
            "latency_max_ms": round(max(lat) * 1000, 1) if lat else None,
        })
        items, _ = api.list_all(f"/api/v1/namespaces/{args.namespace}/pods",
                                selector=f"{BENCH_LABEL}={phase}")
        res.update(account(items, args, sched, pool, node_mem_mib))
    finally:
        watch.close()
        if proc is not None:
            proc.close()
    res["cleanup_s"] = round(delete_phase(api, args.namespace, f"{BENCH_LABEL}={phase}"), 3)
    log(f"bench: {phase}: " + json.dumps({k: v for k, v in res.items() if k != "scheduler"}))
    return res


def account(items: list[dict], args, sched: str, pool: str, node_mem_mib: int) -> dict:
    """Allocation left by the bound pods on the pool: free GPU capacity and partly used GPUs."""
    nodes = args.nodes if pool == "plain" else args.fill_nodes
    total = nodes * args.gpus_per_node
    used: dict[tuple[str, int], float] = {}   # tessera: (node, gpu) -> fraction
    replicas: dict[str, int] = {}             # kube-scheduler on the fill pool: node -> replicas
    whole: dict[str, int] = {}                # kube-scheduler on the plain pool: node -> GPUs
    by_size: dict[str, list[int]] = {}
    for p in items:
        size = float(p["metadata"].get("annotations", {}).get("tessera-bench/gpus", "1"))
        node = p.get("spec", {}).get("nodeName")
        key = f"{size:g}"
        by_size.setdefault(key, [0, 0])[0] += 1
        if not node:
            continue
        by_size[key][1] += 1
        if sched == "tessera":
            a = k8slib.assignment(p) or {}
            gpus = a.get("gpus", [])
            if size >= 1:
                for g in gpus:
                    used[(node, g)] = used.get((node, g), 0.0) + 1.0
            elif gpus:
                frac = int(node_mem_mib * size) / node_mem_mib
                used[(node, gpus[0])] = used.get((node, gpus[0]), 0.0) + frac
        else:
            lim = p["spec"]["containers"][0]["resources"]["limits"]
            n = int(lim.get(k8slib.GPU, "0"))
            if pool == "fill":
                replicas[node] = replicas.get(node, 0) + n
            else:
                whole[node] = whole.get(node, 0) + n
    eps = 1e-6
    hist: dict[str, int] = {}  # partly used GPUs by the fraction in use
    if sched == "tessera":
        allocated = sum(min(1.0, v) for v in used.values())
        # A GPU holding four quarter shares of floor(memory / 4) MiB each is full: full means
        # less than 0.1 % left.
        partly = sum(1 for v in used.values() if eps < v < 1 - 1e-3)
        over = sum(1 for v in used.values() if v > 1 + eps)
        for v in used.values():
            if eps < v < 1 - 1e-3:
                k = f"{v:.2f}"
                hist[k] = hist.get(k, 0) + 1
    elif pool == "fill":
        r = args.replicas
        allocated = sum(u / r for u in replicas.values())
        # The device plugin is assumed to hand out replicas GPU by GPU, in order: at most one
        # partly used GPU per node (the best case for kube-scheduler).
        partly = sum(1 for u in replicas.values() if u % r)
        for u in replicas.values():
            if u % r:
                k = f"{(u % r) / r:.2f}"
                hist[k] = hist.get(k, 0) + 1
        over = sum(1 for u in replicas.values() if u > r * args.gpus_per_node)
    else:
        allocated = float(sum(whole.values()))
        partly = 0
        over = sum(1 for u in whole.values() if u > args.gpus_per_node)
    return {
        "gpus_total": total,
        "gpus_allocated": round(allocated, 3),
        "unallocated_pct": round(100 * (total - allocated) / total, 3) if total else None,
        "gpus_partly_used": partly,
        "gpus_overcommitted": over,
        "partly_used_by_fraction": dict(sorted(hist.items())),
        "placed_by_size": {k: {"pods": v[0], "bound": v[1]} for k, v in sorted(by_size.items())},
    }


# -- main -----------------------------------------------------------------------------------------

def versions(api: Client) -> dict:
    v = {"kubernetes": api.must("GET", "/version").get("gitVersion")}
    b = Path(os.environ["TESSERA_K8S_BIN"])
    v["tessera_binary"] = k8slib.tessera_binary()
    for name, cmd in (("kwok", [str(b / "kwok"), "--version"]),
                      ("kube-scheduler", [str(b / "kube-scheduler"), "--version"])):
        try:
            out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, timeout=20).stdout.strip()
            v[name] = out.splitlines()[0] if out else ""
        except (OSError, subprocess.TimeoutExpired):
            v[name] = ""
    try:
        v["tessera_commit"] = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short",
                                              "HEAD"], stdout=subprocess.PIPE, text=True,
                                             timeout=10).stdout.strip()
    except OSError:
        v["tessera_commit"] = ""
    return v


def table(results: list[dict]) -> str:
    rows = [("", "pods", "bound", "pods/s", "all bound s", "p50 ms", "p99 ms", "startup s",
             "RSS MiB", "unalloc %", "partly used", "create pods/s")]
    for r in results:
        rows.append((f"{r['workload']} / {r['scheduler']}", r["pods"], r["bound"],
                     r["pods_per_s"], r["time_to_schedule_all_s"], r["latency_p50_ms"],
                     r["latency_p99_ms"], r["startup_s"], r["rss_peak_mib"],
                     r["unallocated_pct"], r["gpus_partly_used"], r["create_pods_per_s"]))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).rjust(w) if j else str(c).ljust(w)
                               for j, (c, w) in enumerate(zip(row, widths))) for row in rows)


def inner(args) -> int:
    api = Client.from_env()
    info = {"versions": versions(api), "machine": {
        "cpus": os.cpu_count(), "platform": platform.platform(),
        "loadavg_start": list(os.getloadavg())}}
    k8slib.ensure_namespace(api, args.namespace)
    nodes = make_nodes(args)
    t = time.monotonic()
    k8slib.create_nodes(api, nodes, threads=args.threads)
    create_nodes_s = time.monotonic() - t
    ready_s = wait_nodes_schedulable(api, len(nodes), args.timeout)
    log(f"bench: {len(nodes)} nodes created in {create_nodes_s:.1f}s, schedulable "
        f"{ready_s:.1f}s later")
    info["nodes_create_s"] = round(create_nodes_s, 2)
    info["nodes_ready_s"] = round(ready_s, 2)
    mem_mib = k8slib.MODELS[MODEL][1]
    sizes_fill = fill_sizes(args, args.fill_nodes * args.gpus_per_node) if args.fill_nodes else []
    workloads = []
    if args.pods:
        workloads.append(("plain", [1.0] * args.pods))
    if sizes_fill:
        workloads.append(("fill", sizes_fill))
    results = []
    for sched in SCHEDULERS:
        if sched not in args.schedulers.split(","):
            continue
        for workload, sizes in workloads:
            results.append(run_phase(api, args, sched, workload, sizes, mem_mib))
    info["loadavg_end"] = list(os.getloadavg())

    def get(sched, workload, key):
        for r in results:
            if r["scheduler"] == sched and r["workload"] == workload:
                return r.get(key)
        return None
    ks, ts = get("kube-scheduler", "plain", "pods_per_s"), get("tessera", "plain", "pods_per_s")
    out = {
        "kube_scheduler_pods_per_s": ks,
        "tessera_pods_per_s": ts,
        "ratio": round(ts / ks, 3) if ks and ts else None,
        "kube_scheduler_unallocated_pct": get("kube-scheduler", "fill", "unallocated_pct"),
        "tessera_unallocated_pct": get("tessera", "fill", "unallocated_pct"),
        "kube_scheduler_gpus_partly_used": get("kube-scheduler", "fill", "gpus_partly_used"),
        "tessera_gpus_partly_used": get("tessera", "fill", "gpus_partly_used"),
        "kube_scheduler_time_to_schedule_all_s": get("kube-scheduler", "plain",
                                                     "time_to_schedule_all_s"),
        "tessera_time_to_schedule_all_s": get("tessera", "plain", "time_to_schedule_all_s"),
        "kube_scheduler_latency_p99_ms": get("kube-scheduler", "plain", "latency_p99_ms"),
        "tessera_latency_p99_ms": get("tessera", "plain", "latency_p99_ms"),
        "kube_scheduler_rss_peak_mib": max([r["rss_peak_mib"] for r in results
                                            if r["scheduler"] == "kube-scheduler"], default=None),
        "tessera_rss_peak_mib": max([r["rss_peak_mib"] for r in results
                                     if r["scheduler"] == "tessera"], default=None),
        "sizes": {"nodes": args.nodes, "gpus_per_node": args.gpus_per_node,
                  "pods": args.pods, "fill_nodes": args.fill_nodes,
                  "fill_pods": len(sizes_fill), "fill_demand_gpus": round(sum(sizes_fill), 2),
                  "fill_demand": args.fill_demand, "mix": args.mix,
                  "replicas": args.replicas, "model": MODEL},
        "settings": {"threads": args.threads, "client_qps": args.qps,
                     "client_burst": args.burst, "kube_scoring": args.kube_scoring,
                     "tessera_binding_threads": args.bind_threads,
                     "pods_running": args.pods_running, "seed": args.seed,
                     "kwok_node_lease_seconds": args.lease_seconds,
                     "mode": args.mode,
                     "throughput_window": ("first pod creation request to last bind seen"
                                           if args.mode == "stream" else
                                           "scheduler process start to last bind seen"),
                     "latency": ("bind seen on the watch minus creation acknowledged"
                                 if args.mode == "stream" else
                                 "bind seen on the watch minus scheduler process start")},
        **info,
        "phases": results,
    }
    print(table(results), flush=True)
    print(f"ratio (tessera / kube-scheduler pods/s, plain): {out['ratio']}", flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    bad = sum(r["gpus_overcommitted"] for r in results)
    if bad:
        log(f"bench: {bad} GPUs or nodes over-committed")
        return 2
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--nodes", type=int, default=5000, help="plain pool: kwok nodes (default 5000)")
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--pods", type=int, default=10000,
                   help="plain phase: single-GPU pods (default 10000; 0 skips it)")
    p.add_argument("--fill-nodes", type=int, default=250,
                   help="fill pool: kwok nodes (default 250; 0 skips the fill)")
    p.add_argument("--fill-demand", type=float, default=1.25,
                   help="fill: GPUs asked for / GPU capacity of the fill pool (default 1.25)")
    p.add_argument("--mix", default="1:35,2:10,4:5,8:5,0.5:20,0.25:25",
                   help="fill: GPUs per pod:weight, shares below 1 (default %(default)s)")
    p.add_argument("--replicas", type=int, default=4,
                   help="kube-scheduler's time-slicing replicas per GPU on the fill pool")
    p.add_argument("--threads", type=int, default=8, help="pod-creating client threads")
    p.add_argument("--qps", type=float, default=1000,
                   help="client-side API rate limit of both schedulers (default 1000)")
    p.add_argument("--burst", type=int, default=2000, help="its burst (default 2000)")
    p.add_argument("--bind-threads", type=int, default=16, help="tessera binding.threads")
    p.add_argument("--kube-scoring", default="LeastAllocated",
                   choices=["LeastAllocated", "MostAllocated"],
                   help="kube-scheduler NodeResourcesFit scoring (default: its default)")
    p.add_argument("--mode", default="stream", choices=["stream", "backlog"],
                   help="stream: create the pods while the scheduler runs (default); backlog: "
                   "create them all, then start the scheduler")
    p.add_argument("--schedulers", default="kube-scheduler,tessera")
    p.add_argument("--settle", type=float, default=15,
                   help="fill: done after this many seconds without a new bind")
    p.add_argument("--timeout", type=float, default=1800, help="per phase, seconds")
    p.add_argument("--lease-seconds", type=int, default=1200,
                   help="kwok node lease duration (renewed every quarter of it)")
    p.add_argument("--pods-running", action="store_true",
                   help="let kwok report the pods Running (default: binding only)")
    p.add_argument("--namespace", default="bench")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--bin", help="control-plane binaries (default: scripts/k8s-setup.sh)")
    p.add_argument("--keep", action="store_true", help="keep the control plane's directory")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    args = p.parse_args(argv)
    if args.inner:
        return inner(args)
    return outer(args, [a for a in argv if a != "--inner"])


if __name__ == "__main__":
    sys.exit(main())
