#!/usr/bin/env python3
"""The pod webhook on the real control plane: kube-apiserver calls `tessera
webhook` over HTTPS with deploy/webhook/mutatingwebhook.yaml.

  tests/k8s/controlplane.py -- python3 tests/k8s/webhook_test.py

The webhook runs with a certificate from deploy/webhook/make-certs.sh (plus
--san IP:127.0.0.1) and --scheduler-name tessera. The shipped
MutatingWebhookConfiguration is applied with only its clientConfig changed (a
URL on 127.0.0.1 and the CA bundle instead of the in-cluster Service). Checks:
a pod asking only tessera.io/gpu-memory (and one asking only HAMi's
nvidia.com/gpumem) is stored with one tessera.io/gpu-slice device and the
tessera scheduler; a gpu-compute pod only gets the scheduler; a
tessera.io/rightsize: auto pod asking nvidia.com/gpu: 2 is stored with one
tessera.io/gpu-slice device instead and its ask in
tessera.io/original-resources, while a recommend pod keeps its nvidia.com/gpu;
a CPU-only pod,
and a GPU pod in a namespace without the opt-in label, are stored as sent and
never reach the webhook (its review counter); with the webhook stopped,
failurePolicy Fail refuses a GPU-share pod while CPU-only pods are still
created (matchConditions keep them away from the webhook).
"""

from __future__ import annotations

import base64
import copy
import http.client
import json
import subprocess
import sys
from pathlib import Path

import yaml

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import deploylib as dl  # noqa: E402
import k8slib as kl  # noqa: E402

NS = "webhook-e2e"
NS_OFF = "webhook-off"
SLICE = "tessera.io/gpu-slice"


def pod(name: str, ns: str, limits: dict, annotations: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}},
            "spec": {"automountServiceAccountToken": False,
                     "containers": [{"name": "main", "image": "registry.invalid/e2e:0",
                                     "resources": {"limits": {"cpu": "1", **limits}}}]}}


def reviews(port: int) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    total = 0
    for line in text.splitlines():
        if line.startswith("tessera_webhook_reviews_total{"):
            total += int(float(line.split()[-1]))
    return total


def main() -> int:
    check = kl.Checks()
    api = kl.Client.from_env()
    work = kl.workdir() / "webhook"
    certs = work / "certs"
    r = subprocess.run(["bash", str(kl.REPO / "deploy/webhook/make-certs.sh"), str(certs),
                        "--san", "IP:127.0.0.1"], capture_output=True, text=True)
    if not check("make-certs.sh", r.returncode == 0, r.stderr.strip()[-300:]):
        return check.exit_code()
    port, health = kl.free_port(), kl.free_port()
    hook = kl.Process("tessera-webhook", [
        kl.tessera_binary(), "webhook", f"--listen=127.0.0.1:{port}",
        f"--tls-cert={certs / 'server.crt'}", f"--tls-key={certs / 'server.key'}",
        "--scheduler-name=tessera", f"--health-listen=127.0.0.1:{health}"])
    try:
        def up():
            try:
                return reviews(health) >= 0
            except OSError:
                return False
        _, secs = kl.wait_until(up, 30)
        if not check("tessera webhook serves /metrics", secs is not None, hook.tail()):
            return check.exit_code()

        # The shipped configuration, pointed at this process.
        (doc,) = dl.load_docs(kl.REPO / "deploy/webhook/mutatingwebhook.yaml")
        cfg = copy.deepcopy(doc)
        bundle = base64.b64encode((certs / "ca.crt").read_bytes()).decode()
        for w in cfg["webhooks"]:
            path = w["clientConfig"]["service"]["path"]
            w["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}
        api.must("POST", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
                 cfg)
        kl.ensure_namespace(api, NS_OFF)
        ns = kl.namespace(NS)
        ns["metadata"]["labels"] = {"tessera.io/webhook": "enabled"}
        api.must("POST", "/api/v1/namespaces", ns)
        kl.ensure_namespace(api, NS)

        # The API server's webhook client picks up a new configuration within a second or so.
        probe = pod("probe", NS, {"tessera.io/gpu-memory": "1Gi"})

        def mutated():
            status, out = api.post(f"/api/v1/namespaces/{NS}/pods", probe)
            if status == 201:
                api.request("DELETE", f"/api/v1/namespaces/{NS}/pods/probe")
                lim = out["spec"]["containers"][0]["resources"]["limits"]
                if SLICE in lim:
                    return True
            return False
        _, secs = kl.wait_until(mutated, 30, 0.5)
        check("the API server calls the webhook", secs is not None)

        before = reviews(health)
        cases = [
            ("memory-only", NS, {"tessera.io/gpu-memory": "10Gi"}, "1", "tessera"),
            ("hami-memory", NS, {"nvidia.com/gpumem": "3000"}, "1", "tessera"),
            ("compute", NS, {"tessera.io/gpu-compute": "30"}, None, "tessera"),
            ("whole-gpu", NS, {"nvidia.com/gpu": "1"}, None, "tessera"),
            ("cpu-only", NS, {}, None, "default-scheduler"),
            ("not-opted-in", NS_OFF, {"tessera.io/gpu-memory": "10Gi"}, None,
             "default-scheduler"),
        ]
        for name, ns_, limits, want_slice, want_sched in cases:
            status, out = api.post(f"/api/v1/namespaces/{ns_}/pods", pod(name, ns_, limits))
            if not check(f"pod {ns_}/{name} created", status == 201,
                         "" if status == 201 else str(out)[:300]):
                continue
            c = out["spec"]["containers"][0]["resources"]
            got_slice = c.get("limits", {}).get(SLICE)
            check(f"pod {ns_}/{name}: {SLICE} {want_slice}", got_slice == want_slice,
                  f"limits {c.get('limits')}, requests {c.get('requests')}")
            if want_slice:
                check(f"pod {ns_}/{name}: request defaulted to the limit",
                      c.get("requests", {}).get(SLICE) == want_slice, str(c.get("requests")))
            check(f"pod {ns_}/{name}: schedulerName {want_sched}",
                  out["spec"].get("schedulerName") == want_sched, out["spec"].get("schedulerName"))
        # Rightsizing: an auto pod trades its whole GPUs for one slice device; the ask is kept.
        status, out = api.post(f"/api/v1/namespaces/{NS}/pods",
                               pod("rightsize-auto", NS, {"nvidia.com/gpu": "2"},
                                   {"tessera.io/rightsize": "auto"}))
        if check("pod rightsize-auto created", status == 201,
                 "" if status == 201 else str(out)[:300]):
            res = out["spec"]["containers"][0]["resources"]
            lim, req = res.get("limits", {}), res.get("requests", {})
            check("rightsize-auto: one slice device in limits and requests, no nvidia.com/gpu",
                  lim.get(SLICE) == "1" and req.get(SLICE) == "1" and
                  "nvidia.com/gpu" not in lim and "nvidia.com/gpu" not in req,
                  f"limits {lim}, requests {req}")
            ann = out["metadata"].get("annotations", {})
            try:
                original = json.loads(ann.get("tessera.io/original-resources", ""))
            except ValueError:
                original = None
            check("rightsize-auto: the ask is stored in tessera.io/original-resources",
                  isinstance(original, dict) and
                  original.get("main", {}).get("limits") == {"nvidia.com/gpu": "2"},
                  str(ann))
            check("rightsize-auto: schedulerName tessera",
                  out["spec"].get("schedulerName") == "tessera", out["spec"].get("schedulerName"))
        status, out = api.post(f"/api/v1/namespaces/{NS}/pods",
                               pod("rightsize-recommend", NS, {"nvidia.com/gpu": "1"},
                                   {"tessera.io/rightsize": "recommend"}))
        if check("pod rightsize-recommend created", status == 201,
                 "" if status == 201 else str(out)[:300]):
            lim = out["spec"]["containers"][0]["resources"].get("limits", {})
            check("rightsize-recommend: nvidia.com/gpu kept, no slice device",
                  lim.get("nvidia.com/gpu") == "1" and SLICE not in lim and
                  "tessera.io/original-resources" not in out["metadata"].get("annotations", {}),
                  f"limits {lim}")

        after = reviews(health)
        check("only the six GPU pods in the opted-in namespace reached the webhook",
              after - before == 6, f"{after - before} reviews")

        # Webhook down: failurePolicy Fail refuses GPU-share pods only.
        hook.close()
        status, out = api.post(f"/api/v1/namespaces/{NS}/pods",
                               pod("while-down", NS, {"tessera.io/gpu-memory": "1Gi"}))
        msg = out.get("message", "") if isinstance(out, dict) else str(out)
        check("webhook down: a GPU-share pod is refused", status >= 400 and
              "pods.webhook.tessera.io" in msg, f"HTTP {status}: {msg[:200]}")
        status, out = api.post(f"/api/v1/namespaces/{NS}/pods", pod("cpu-while-down", NS, {}))
        check("webhook down: a CPU-only pod is still created", status == 201,
              "" if status == 201 else str(out)[:200])
    finally:
        hook.close()
        api.request("DELETE", "/apis/admissionregistration.k8s.io/v1/"
                    "mutatingwebhookconfigurations/tessera-pod-webhook")
        for ns_ in (NS, NS_OFF):
            api.request("DELETE", f"/api/v1/namespaces/{ns_}")
    return check.exit_code()


if __name__ == "__main__":
    sys.exit(main())
