"""A pod watch that checks, after every event the API server sends, that no GPU
is held by two pods at once.

A pod holds the GPUs its tessera.io/assignment annotation names from the
moment it is bound until it is gone from the API server: a pod that is being
deleted (deletionTimestamp set) still runs on its GPUs, so a preemptor bound
onto them before the victim has left over-commits the GPU. Used by the
end-to-end tests that run against the real control plane.
"""

from __future__ import annotations

import threading
import time

import k8slib


class GpuLedgerWatch:
    """Lists and then watches `path` on a thread of its own (relisting on 410);
    records every moment two existing pods claim the same GPU (node, index),
    a bound pod without an assignment, or an assignment naming another node."""

    def __init__(self, api: k8slib.Client, path: str = "/api/v1/pods",
                 selector: str = "") -> None:
        self.api = api
        self.path = path
        self.selector = selector
        self.lock = threading.Lock()
        self.pods: dict[str, dict] = {}
        self.violations: list[str] = []
        self.bound_at: dict[str, float] = {}    # pod key -> first time seen bound
        self.gone_at: dict[str, float] = {}     # pod key -> time its DELETED event came
        self.events = 0
        self.relists = 0
        self.errors: list[str] = []
        self.stop = False
        self.synced = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @staticmethod
    def key(pod: dict) -> str:
        md = pod.get("metadata", {})
        return f"{md.get('namespace', '')}/{md.get('name', '')}"

    def _check(self) -> None:
        holders: dict[tuple[str, int], list[str]] = {}
        for key, pod in self.pods.items():
            node = pod.get("spec", {}).get("nodeName")
            if not node:
                continue
            limits = (pod.get("spec", {}).get("containers") or [{}])[0].get(
                "resources", {}).get("limits", {})
            if not limits.get(k8slib.GPU):
                continue
            a = k8slib.assignment(pod)
            if a is None:
                self._violation(f"{key} is bound to {node} without {k8slib.ASSIGNMENT}")
                continue
            if a.get("node") != node:
                self._violation(f"{key} is bound to {node} but its assignment names "
                                f"{a.get('node')}")
            for g in a.get("gpus", []):
                holders.setdefault((node, g), []).append(key)
        for (node, g), keys in holders.items():
            if len(keys) > 1:
                self._violation(f"GPU {g} of {node} held by {', '.join(sorted(keys))}")

    def _violation(self, what: str) -> None:
        if what not in self.violations:
            self.violations.append(what)

    def _relist(self) -> str:
        items, rv = self.api.list_all(self.path, selector=self.selector)
        with self.lock:
            self.pods = {self.key(p): p for p in items}
            now = time.monotonic()
            for k, p in self.pods.items():
                if p.get("spec", {}).get("nodeName"):
                    self.bound_at.setdefault(k, now)
            self.relists += 1
            self._check()
        self.synced.set()
        return rv

    def _run(self) -> None:
        rv = ""
        while not self.stop:
            try:
                if not rv:
                    rv = self._relist()
                for ev in self.api.watch(self.path, rv, timeout_s=120, selector=self.selector):
                    if self.stop:
                        return
                    obj = ev.get("object", {})
                    if ev.get("type") == "ERROR":
                        # 410 Gone (or anything else): start again from a fresh list.
                        rv = ""
                        break
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if ev.get("type") == "BOOKMARK":
                        continue
                    key = self.key(obj)
                    with self.lock:
                        self.events += 1
                        now = time.monotonic()
                        if ev.get("type") == "DELETED":
                            self.pods.pop(key, None)
                            self.gone_at[key] = now
                        else:
                            self.pods[key] = obj
                            if obj.get("spec", {}).get("nodeName"):
                                self.bound_at.setdefault(key, now)
                        self._check()
            except Exception as e:  # noqa: BLE001 - a broken stream is retried
                self.errors.append(str(e))
                rv = ""
                time.sleep(0.5)

    def snapshot(self) -> dict[str, dict]:
        with self.lock:
            return dict(self.pods)

    def close(self) -> None:
        self.stop = True
