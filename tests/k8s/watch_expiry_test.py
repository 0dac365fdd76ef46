#!/usr/bin/env python3
"""`tessera scheduler` after its watches expired: a real etcd compaction turns
its resume into 410 Gone, it relists and must converge on the true state.

Run through controlplane.py with the API server's watch cache off for pods and
nodes (tests/k8s/CMakeLists.txt, test k8s_watch_expiry), so that a watch from
an old resourceVersion goes to etcd and meets the compaction:

  TESSERA_BINARY=build/release/apps/tessera/tessera python3 tests/k8s/controlplane.py \\
    --kube-apiserver-arg=--watch-cache-sizes=pods#0,nodes#0 \\
    -- python3 tests/k8s/watch_expiry_test.py

The scheduler talks to the API server through a TCP relay in this script, so
the test can cut its connections as a network failure or an API server restart
would. Steps: 8 pods fill nodes old-0/old-1 (4 GPUs each); the scheduler is
stopped (SIGSTOP) and its connections cut; meanwhile two pods per old node are
deleted, one of them is created again under the same name (a new uid, as a
StatefulSet does), three more pods for the old nodes arrive, node new-0 joins
with a pod that needs all 4 of its GPUs, node spare-0 is deleted while a pod
that may only run there arrives, and a pod is created and deleted again;
then etcd is compacted at its current revision and the scheduler continued
(SIGCONT). It must log the 410 and the relist for pods and nodes, bind the
pods onto the freed GPUs and the new node (the deleted pods are not counted
twice), leave the spare pod pending (its node is gone) and never hold one GPU
for two pods (a pod watch checks every event).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import k8slib  # noqa: E402
from gpu_watch import GpuLedgerWatch  # noqa: E402

NS = "expiry"
GPUS = 4
CONFIG = """\
schedulerName: tessera
podEvents: true
podConditions: true
"""
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Relay:
    """A TCP relay on a free loopback port to `target` (host, port). cut() ends
    every relayed connection at once, dropping whatever was not yet forwarded;
    new connections are relayed as before."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.lock = threading.Lock()
        self.conns: list[tuple[socket.socket, socket.socket]] = []
        self.accepted = 0
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.conns.append((client, upstream))
                self.accepted += 1
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        with self.lock:  # ended by itself: no longer open
            self.conns = [c for c in self.conns if src not in c]

    def cut(self) -> int:
        with self.lock:
            conns, self.conns = self.conns, []
        for client, upstream in conns:
            # shutdown() ends the connection at once even while a pump thread is blocked in
            # recv() on it (close() alone would wait for that call to return).
            for s in (upstream, client):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                try:
                    s.close()
                except OSError:
                    pass
        return len(conns)


def etcd(path: str, body: dict) -> dict:
    req = urllib.request.Request(os.environ["TESSERA_K8S_ETCD"] + path,
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with _OPENER.open(req, timeout=30) as resp:
        return json.load(resp)


def etcd_revision() -> int:
    out = etcd("/v3/kv/range", {"key": base64.b64encode(b"/registry/").decode(),
                                "limit": "1", "keys_only": True})
    return int(out["header"]["revision"])


def all_threads_stopped(pid: int) -> bool:
    """Every thread of the process is stopped (state T), so none can notice a cut connection
    and reconnect before the changes are made."""
    states = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        states.append(stat[stat.rindex(")") + 2])
    return bool(states) and all(s == "T" for s in states)


def pool_pod(name: str, pool: str, gpus: int = 1) -> dict:
    p = k8slib.gpu_pod(name, NS, gpus=gpus, labels={"app": "expiry"})
    p["spec"]["nodeSelector"] = {"pool": pool}
    return p


def main() -> int:
    check = k8slib.Checks()
    api = k8slib.Client.from_env()
    t0 = time.monotonic()
    k8slib.ensure_namespace(api, NS)
    nodes = [k8slib.kwok_gpu_node(n, gpus=GPUS, labels={"pool": pool})
             for n, pool in (("old-0", "old"), ("old-1", "old"), ("spare-0", "spare"))]
    k8slib.create_nodes(api, nodes)
    check("kwok nodes Ready", k8slib.wait_nodes_ready(api, ["old-0", "old-1", "spare-0"], 90))

    server = urllib.parse.urlparse(os.environ["TESSERA_K8S_SERVER"])
    relay = Relay((server.hostname, server.port))
    kubeconfig = k8slib.workdir() / "tessera-expiry.kubeconfig"
    cfg = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {
            "server": f"https://127.0.0.1:{relay.port}",
            "certificate-authority": os.environ["TESSERA_K8S_CA"]}}],
        "users": [{"name": "admin", "user": {"token": os.environ["TESSERA_K8S_TOKEN"]}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "admin"}}],
        "current-context": "e2e",
    }
    kubeconfig.write_text(json.dumps(cfg))
    kubeconfig.chmod(0o600)
    sched, port = k8slib.start_scheduler("tessera-expiry", CONFIG, kubeconfig)
    watch = GpuLedgerWatch(api, f"/api/v1/namespaces/{NS}/pods")
    watch.synced.wait(30)
    try:
        return run(check, api, sched, port, relay, watch, t0)
    finally:
        if sched.alive():
            try:
                os.kill(sched.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        watch.close()
        rc = sched.close()
        print(f"scheduler exit code {rc}", flush=True)
        if check.failed:
            print(sched.tail(40), flush=True)


def run(check, api, sched, port, relay, watch, t0) -> int:
    pods_path = f"/api/v1/namespaces/{NS}/pods"

    def pods() -> dict[str, dict]:
        return {p["metadata"]["name"]: p for p in api.list_all(pods_path)[0]}

    def bound(p: dict) -> bool:
        return bool(p.get("spec", {}).get("nodeName"))

    # Phase 1: the old nodes are filled.
    k8slib.create_pods(api, [pool_pod(f"a-{i}", "old") for i in range(2 * GPUS)])
    ps, secs = k8slib.wait_until(
        lambda: (lambda d: d if sum(p.get("status", {}).get("phase") == "Running"
                                    for p in d.values()) == 2 * GPUS else None)(pods()), 90, 0.5)
    check("8 pods bound and Running on old-0/old-1", secs is not None,
          f"{secs:.1f}s" if secs is not None else "")
    if secs is None:
        return check.exit_code()
    log_before = sched.log_text()
    check("the scheduler logs its initial lists",
          "informer /api/v1/pods: listed" in log_before
          and "informer /api/v1/nodes: listed" in log_before)

    # Phase 2: the scheduler stops and loses its connections.
    os.kill(sched.pid, signal.SIGSTOP)
    _, secs = k8slib.wait_until(lambda: all_threads_stopped(sched.pid), 10, 0.05)
    check("the scheduler is stopped (every thread in state T)", secs is not None)
    cut = relay.cut()
    check("the scheduler's open connections are cut while it is stopped", cut >= 2,
          f"{cut} connections (the watches of pods and nodes among them)")
    rev_stop = etcd_revision()
    by_node: dict[str, list[str]] = {}
    for name, p in sorted(ps.items()):
        by_node.setdefault(p["spec"]["nodeName"], []).append(name)
    victims = by_node["old-0"][:2] + by_node["old-1"][:2]
    uid_before = {n: ps[n]["metadata"]["uid"] for n in victims}
    for n in victims:
        api.must("DELETE", f"{pods_path}/{n}", {"gracePeriodSeconds": 0})
    _, secs = k8slib.wait_until(lambda: not (set(victims) & set(pods())), 60, 0.3)
    check("4 pods deleted (2 per old node) while the scheduler is stopped", secs is not None,
          ", ".join(victims))
    reborn = victims[0]
    new_pods = [pool_pod(reborn, "old"), pool_pod("b-0", "old"), pool_pod("b-1", "old"),
                pool_pod("b-2", "old"), pool_pod("s-0", "spare"), pool_pod("c-0", "new", GPUS)]
    k8slib.create_pods(api, new_pods)
    api.must("POST", "/api/v1/nodes", k8slib.kwok_gpu_node("new-0", gpus=GPUS,
                                                           labels={"pool": "new"}))
    api.must("DELETE", "/api/v1/nodes/spare-0")
    api.must("POST", pods_path, pool_pod("x-0", "old"))
    api.must("DELETE", f"{pods_path}/x-0", {"gracePeriodSeconds": 0})
    check("node new-0 Ready while the scheduler is stopped",
          k8slib.wait_nodes_ready(api, ["new-0"], 60))
    api.must("POST", f"/api/v1/namespaces/{NS}/configmaps",
             {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bump"},
              "data": {"at": str(time.time())}})
    rev = etcd_revision()
    out = etcd("/v3/kv/compaction", {"revision": str(rev), "physical": True})
    check("etcd compacted at its current revision", "header" in out,
          f"revision {rev_stop} at the stop, compacted at {rev}")
    # Anything from before the compaction is gone for good: the API server says so too.
    status, body = api.get(f"{pods_path}?watch=1&resourceVersion={rev_stop}&timeoutSeconds=5")
    text = body if isinstance(body, str) else json.dumps(body)
    check("a watch from the stop's resourceVersion is answered 410 Gone",
          status == 410 or '"code":410' in text.replace(" ", ""), f"HTTP {status} {text[:160]}")

    # Phase 3: the scheduler continues.
    os.kill(sched.pid, signal.SIGCONT)
    want_old = [reborn, "b-0", "b-1", "b-2"]

    def converged():
        d = pods()
        ok = all(n in d and bound(d[n]) for n in want_old + ["c-0"])
        return d if ok else None
    d, secs = k8slib.wait_until(converged, 90, 0.5)
    check("after SIGCONT the pods created while stopped are bound", secs is not None,
          f"{secs:.1f}s after SIGCONT" if secs is not None else
          "unbound: " + ", ".join(n for n in want_old + ["c-0"]
                                  if not bound(pods().get(n, {}))))
    d = d or pods()
    log = sched.log_text()[len(log_before):]
    for kind in ("pods", "nodes"):
        lines = [ln for ln in log.splitlines() if ln.startswith(f"informer /api/v1/{kind}:")]
        gone = [ln for ln in lines if "expired" in ln and "410" in ln]
        relisted = [ln for ln in lines if "relisted" in ln]
        check(f"the {kind} watch got 410 Gone and relisted", bool(gone) and bool(relisted),
              (gone[:1] + relisted[:1] and (gone[0] + " | " + relisted[0])) if gone and relisted
              else f"log: {lines[-3:]}")
    relist_pods = next((ln for ln in log.splitlines()
                        if ln.startswith("informer /api/v1/pods: relisted")), "")
    check("the pod relist found the recreated pod as replaced, the deleted ones as deleted",
          "1 replaced" in relist_pods and "3 deleted" in relist_pods, relist_pods)

    r = d.get(reborn, {})
    check(f"{reborn} created again under its name (new uid) is bound",
          bound(r) and r["metadata"]["uid"] != uid_before[reborn],
          f"uid {r.get('metadata', {}).get('uid')} on {r.get('spec', {}).get('nodeName')}")
    on_old = [n for n in want_old if d.get(n, {}).get("spec", {}).get("nodeName") in
              ("old-0", "old-1")]
    check("the freed GPUs of the deleted pods are reused (4 new pods on old-0/old-1)",
          len(on_old) == 4, f"{on_old}")
    c = d.get("c-0", {})
    ca = k8slib.assignment(c) or {}
    check("c-0 runs on new-0, which joined while the scheduler was stopped, with 4 GPUs",
          c.get("spec", {}).get("nodeName") == "new-0" and sorted(ca.get("gpus", [])) == [0, 1, 2, 3],
          f"{c.get('spec', {}).get('nodeName')} {ca.get('gpus')}")
    s0 = d.get("s-0", {})
    cond = next((x for x in s0.get("status", {}).get("conditions", []) or []
                 if x.get("type") == "PodScheduled"), {})
    check("s-0 stays pending: its only node was deleted while the scheduler was stopped",
          not bound(s0) and cond.get("status") == "False",
          f"node {s0.get('spec', {}).get('nodeName')!r}, {cond.get('message', '')[:160]}")

    # The final ledger: every GPU at most once, within capacity, full where expected.
    used: dict[str, list[int]] = {}
    for p in d.values():
        if bound(p):
            used.setdefault(p["spec"]["nodeName"], []).extend((k8slib.assignment(p) or {}).get("gpus", []))
    dup = {n: g for n, g in used.items() if len(g) != len(set(g)) or any(x >= GPUS for x in g)}
    check("final assignments: no GPU twice, none beyond capacity, old nodes full",
          not dup and all(sorted(used.get(n, [])) == list(range(GPUS)) for n in ("old-0", "old-1")),
          f"{ {n: sorted(g) for n, g in used.items()} }")
    check("no GPU held by two existing pods at any event",
          not watch.violations, "; ".join(watch.violations[:5]) or
          f"{watch.events} pod events checked")
    time.sleep(3)
    text = k8slib.metrics(port)
    ratio = k8slib.metric_value(text, "tessera_gpu_allocated_ratio")
    pending = k8slib.metric_value(text, "tessera_pending_pods")
    check("scheduler's own ledger: all 12 GPUs of live nodes allocated, 1 pod pending",
          ratio is not None and abs(ratio - 1.0) < 1e-6 and pending == 1,
          f"tessera_gpu_allocated_ratio {ratio}, tessera_pending_pods {pending}")
    check("scheduler alive", sched.alive())
    print(f"watch expiry test took {time.monotonic() - t0:.1f}s", flush=True)
    return check.exit_code()


if __name__ == "__main__":
    sys.exit(main())
