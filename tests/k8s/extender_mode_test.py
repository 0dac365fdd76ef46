#!/usr/bin/env python3
"""Extender mode on the real control plane: the real kube-scheduler, configured
with deploy/extender/kube-scheduler-config.yaml, calls `tessera extender` over
mutual TLS.

  tests/k8s/controlplane.py --no-kube-scheduler -- python3 tests/k8s/extender_mode_test.py

The extender runs with certificates from deploy/extender/make-certs.sh (plus
--san IP:127.0.0.1), --allowed-client-names kube-scheduler, --health-listen
and a token of ServiceAccount tessera-system/tessera-extender bound only by
deploy/extender/rbac.yaml. kube-scheduler gets the shipped
KubeSchedulerConfiguration with only the kubeconfig, leader election, the
extender's address and the certificate paths changed.

Three kwok nodes with 4 H100 each; one already runs a pod holding 2 GPUs and
most of its CPUs, so kube-scheduler's own scoring prefers the empty nodes (a
CPU-only pod, which the extender never sees, shows it) while Tessera packs the
next GPU pod onto the partly used node. Checks that the extender receives
filter, prioritize, bind and preempt calls, binds with the
tessera.io/assignment annotation, that a pod only Tessera rejects stays
Pending with Tessera's reason in kube-scheduler's FailedScheduling Event, that
a high-priority pod preempts through the extender, that a restarted extender
rebuilds the GPUs in use from the assignments (it keeps a pod off a GPU that a
share holds although kube-scheduler counts it free), and that clients without
kube-scheduler's certificate are refused.
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
import subprocess
import sys
import urllib.parse
from pathlib import Path

import yaml

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import deploylib as dl  # noqa: E402
import k8slib as kl  # noqa: E402

NS = "extender-e2e"
NODES = ["ext-a", "ext-b", "ext-c"]
PARTLY_USED = "ext-a"
LOW, HIGH = "e2e-low", "e2e-high"
# The API calls the extender makes (informers, bind's pod lookup, the Binding), as the real
# authorizer sees them, and a sample of what it must not be able to do.
EXTENDER_ACCESS = [
    ("list", "", "nodes", "", "", ""), ("watch", "", "nodes", "", "", ""),
    ("list", "", "pods", "", "", ""), ("watch", "", "pods", "", "", ""),
    ("get", "", "pods", "", NS, "x"), ("create", "", "pods", "binding", NS, "x"),
]
EXTENDER_DENIED = [
    ("delete", "", "pods", "", NS, "x"), ("create", "", "pods", "eviction", NS, "x"),
    ("patch", "", "pods", "status", NS, "x"), ("get", "", "secrets", "", NS, "x"),
    ("create", "events.k8s.io", "events", "", NS, ""), ("update", "", "nodes", "", "", "x"),
]


def make_certs(out: Path) -> None:
    """make-certs.sh's CA, server and client certificates, the server's also for 127.0.0.1, and
    a certificate of the same CA with another name (CN intruder) for the refusal check."""
    subprocess.run(["bash", str(kl.REPO / "deploy/extender/make-certs.sh"), str(out),
                    "--san", "IP:127.0.0.1"], check=True, capture_output=True, timeout=120)
    (out / "intruder.ext").write_text("extendedKeyUsage=clientAuth\n")
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    subprocess.run(["openssl", "req", *key, "-keyout", "intruder.key", "-out", "intruder.csr",
                    "-subj", "/CN=intruder"], cwd=out, check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", "intruder.csr", "-CA", "ca.crt", "-CAkey",
                    "ca.key", "-CAcreateserial", "-out", "intruder.crt", "-days", "2",
                    "-extfile", "intruder.ext"], cwd=out, check=True, capture_output=True)


def scheduler_config(certs: Path, port: int) -> str:
    """The shipped KubeSchedulerConfiguration with only what must differ here changed."""
    cm = dl.load_docs(kl.REPO / "deploy/extender/kube-scheduler-config.yaml")[0]
    cfg = yaml.safe_load(cm["data"]["kube-scheduler-config.yaml"])
    cfg["clientConnection"]["kubeconfig"] = os.environ["TESSERA_K8S_SCHEDULER_KUBECONFIG"]
    cfg["leaderElection"]["leaderElect"] = False
    (ext,) = cfg["extenders"]
    shipped = urllib.parse.urlparse(ext["urlPrefix"])
    ext["urlPrefix"] = shipped._replace(netloc=f"127.0.0.1:{port}").geturl()
    ext["tlsConfig"] = {"certFile": str(certs / "client.crt"),
                        "keyFile": str(certs / "client.key"),
                        "caFile": str(certs / "ca.crt")}
    return yaml.safe_dump(cfg, sort_keys=False)


def tls_call(port: int, ca: Path, cert: Path | None, key: Path | None, path: str,
             body: dict) -> tuple[int | None, str]:
    """POSTs to the extender; (HTTP status, body) or (None, error) when refused."""
    ctx = ssl.create_default_context(cafile=str(ca))
    if cert:
        ctx.load_cert_chain(str(cert), str(key))
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
    try:
        conn.request("POST", path, body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.read().decode(errors="replace")
    except (OSError, http.client.HTTPException) as e:
        return None, f"{type(e).__name__}: {e}"
    finally:
        conn.close()


def plain_call(port: int, path: str) -> tuple[int | None, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode(errors="replace")
    except (OSError, http.client.HTTPException) as e:
        return None, f"{type(e).__name__}: {e}"
    finally:
        conn.close()


def counters(health_port: int) -> dict[str, float]:
    text = kl.metrics(health_port)
    out = {}
    for verb in ("filter", "prioritize", "bind", "preempt"):
        out[verb] = kl.metric_value(text, f'tessera_extender_requests_total{{verb="{verb}"}}') \
            or 0.0
    out["nodes"] = kl.metric_value(text, "tessera_extender_nodes") or 0.0
    out["gpu_pods"] = kl.metric_value(text, "tessera_extender_gpu_pods") or 0.0
    out["fits_reused"] = kl.metric_value(text, "tessera_extender_fits_reused_total") or 0.0
    bad = [line for line in text.splitlines()
           if line.startswith("tessera_extender_bad_requests_total{")
           and not line.endswith(" 0")]
    out["bad"] = float(len(bad))
    return out


def view_ready(health_port: int, gpu_pods: int) -> dict[str, float] | None:
    """The extender's counters once it knows the three nodes and at least `gpu_pods` pods."""
    try:
        c = counters(health_port)
    except OSError:
        return None
    return c if c["nodes"] == len(NODES) and c["gpu_pods"] >= gpu_pods else None


def after_restart(api: kl.Client, check: kl.Checks, health: int) -> None:
    late = kl.gpu_pod("late", NS, gpus=1, scheduler="default-scheduler", priority_class=LOW)
    late["spec"]["nodeSelector"] = {"kubernetes.io/hostname": PARTLY_USED}
    kl.create_pods(api, [late])

    def refused():
        evs = [e for e in dl.events_for(api, NS, "late") if e.get("reason") == "FailedScheduling"]
        return evs if any("insufficient free GPUs" in e.get("note", "") for e in evs) else None
    evs, secs = kl.wait_until(refused, 60, 0.5)
    check("late: Tessera keeps it off the GPU the share holds (kube-scheduler sees one free)",
          secs is not None and not dl.pod(api, NS, "late")["spec"].get("nodeName"),
          (evs or [{}])[-1].get("note", "")[:240] if evs else
          str([e.get("note") for e in dl.events_for(api, NS, "late")])[:240])
    share = assignment_of(dl.pod(api, NS, "share"))
    before = counters(health)["gpu_pods"]
    api.request("DELETE", f"/api/v1/namespaces/{NS}/pods/share")
    # kube-scheduler retries an unschedulable pod when a pod is deleted. If that retry reaches
    # the extender before the extender's own watch has seen the deletion, the filter still
    # refuses and kube-scheduler waits for the next cluster event (or its 5-minute flush).
    # So once the extender no longer counts the share, the pod is touched (a label), which is
    # such an event.
    p = dl.wait_bound(api, NS, ["late"], 20)["late"]
    nudged = False
    if not p.get("spec", {}).get("nodeName"):
        kl.wait_until(lambda: counters(health)["gpu_pods"] < before, 30, 0.5)
        api.request("PATCH", f"/api/v1/namespaces/{NS}/pods/late",
                    {"metadata": {"labels": {"retry": "1"}}},
                    content_type="application/merge-patch+json")
        nudged = True
        p = dl.wait_bound(api, NS, ["late"], 60)["late"]
    a = assignment_of(p)
    check("late: bound onto the GPU the share freed",
          p.get("spec", {}).get("nodeName") == share.get("node")
          and a.get("gpus") == share.get("gpus") and a.get("kind") == "exclusive",
          f"share had {json.dumps(share)}; late got {json.dumps(a)}"
          + (" (after a retry nudge: kube-scheduler's retry had beaten the extender's watch)"
             if nudged else ""))


def priority_class(name: str, value: int) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value,
            "preemptionPolicy": "PreemptLowerPriority"}


def assignment_of(p: dict) -> dict:
    try:
        return kl.assignment(p) or {}
    except ValueError:
        return {}


def main() -> int:
    check = kl.Checks()
    api = kl.Client.from_env()
    total = dl.timer()
    work = kl.workdir()

    for f in ("deploy/scheduler/namespace.yaml", "deploy/extender/rbac.yaml"):
        r = dl.apply(str(kl.REPO / f))
        check(f"apply {f}", r.returncode == 0, (r.stderr or r.stdout).strip()[-300:])
    kl.ensure_namespace(api, NS)
    for name, value in ((LOW, 100), (HIGH, 1000)):
        api.must("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                 priority_class(name, value), ok=(201, 409))
    kl.create_nodes(api, [kl.kwok_gpu_node(n, 4, "H100-80GB", cpu="64", memory="512Gi")
                          for n in NODES])
    check("kwok GPU nodes Ready", kl.wait_nodes_ready(api, NODES, 120))

    certs = work / "extender-certs"
    make_certs(certs)
    token = kl.token_for(api, "tessera-system", "tessera-extender")
    dl.check_access(kl.Client.from_env(token), check, EXTENDER_ACCESS, EXTENDER_DENIED)
    kubeconfig = kl.write_kubeconfig(work / "tessera-extender.kubeconfig", token,
                                     "tessera-extender")
    port, health = kl.free_port(), kl.free_port()
    ext_args = [
        kl.tessera_binary(), "extender", f"--listen=127.0.0.1:{port}", "--prefix=/tessera",
        f"--tls-cert={certs / 'server.crt'}", f"--tls-key={certs / 'server.key'}",
        f"--client-ca={certs / 'ca.crt'}", "--allowed-client-names=kube-scheduler",
        f"--health-listen=127.0.0.1:{health}", f"--kubeconfig={kubeconfig}"]
    ext = kl.Process("tessera-extender", ext_args)
    sched = None
    try:
        _, secs = kl.wait_until(lambda: plain_call(health, "/healthz")[0] == 200, 30, 0.2)
        check("extender /healthz on the health port", secs is not None,
              ext.tail(5) if secs is None else "")

        # A pod someone else bound: 2 of ext-a's GPUs and most of its CPUs.
        seed = kl.gpu_pod("seed", NS, gpus=2, scheduler="default-scheduler", cpu="48",
                          priority_class=LOW,
                          annotations={kl.ASSIGNMENT: json.dumps(
                              {"node": PARTLY_USED, "kind": "exclusive", "gpus": [0, 1],
                               "uuids": [kl.gpu_uuid(PARTLY_USED, g) for g in (0, 1)]})})
        seed["spec"]["nodeName"] = PARTLY_USED
        kl.create_pods(api, [seed])
        c, secs = kl.wait_until(lambda: view_ready(health, 1), 60, 0.5)
        check("extender sees the nodes and the bound pod (its RBAC: list/watch)",
              secs is not None, json.dumps(c))

        sched_port = kl.free_port()
        cfg = work / "kube-scheduler-extender.yaml"
        cfg.write_text(scheduler_config(certs, port))
        skc = os.environ["TESSERA_K8S_SCHEDULER_KUBECONFIG"]
        sched = kl.Process("kube-scheduler-extender", [
            str(Path(os.environ["TESSERA_K8S_BIN"]) / "kube-scheduler"), f"--config={cfg}",
            f"--authentication-kubeconfig={skc}", f"--authorization-kubeconfig={skc}",
            "--bind-address=127.0.0.1", f"--secure-port={sched_port}", "--profiling=false"])
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE

        def sched_healthy():
            conn = http.client.HTTPSConnection("127.0.0.1", sched_port, context=insecure,
                                               timeout=2)
            try:
                conn.request("GET", "/healthz")
                return conn.getresponse().status == 200
            except OSError:
                return False
            finally:
                conn.close()
        _, secs = kl.wait_until(sched_healthy, 90, 0.5)
        check("kube-scheduler with the shipped extender configuration is healthy",
              secs is not None, sched.tail(5) if secs is None else f"{secs:.1f}s")

        scenario(api, check, health)

        # A restarted extender rebuilds the GPUs in use from the assignments: ext-a's last GPU
        # holds the share, so a 1-GPU pod for ext-a (nodeSelector) must not go there although
        # kube-scheduler counts one nvidia.com/gpu free on it; once the share is gone, it does.
        rc = ext.close()
        check("extender stops on SIGTERM", rc == 0, f"exit {rc}")
        ext = kl.Process("tessera-extender", ext_args)
        c, secs = kl.wait_until(lambda: view_ready(health, 4), 60, 0.5)
        check("restarted extender has its view back", secs is not None, json.dumps(c))
        after_restart(api, check, health)

        # Direct calls: only kube-scheduler's certificate may call the verbs.
        ca = certs / "ca.crt"
        probe = {"Pod": kl.gpu_pod("probe", NS, gpus=1), "NodeNames": NODES}
        status, body = tls_call(port, ca, None, None, "/tessera/filter", probe)
        check("a client without a certificate is refused", status is None, body[:120])
        status, body = tls_call(port, ca, certs / "intruder.crt", certs / "intruder.key",
                                "/tessera/filter", probe)
        check("a certificate of the CA with another name gets 403", status == 403,
              f"HTTP {status}: {body[:120]}")
        status, body = plain_call(port, "/tessera/filter")
        check("plain HTTP on the verbs port is refused", status is None or status >= 400,
              f"{status}: {body[:80]}")
        status, body = tls_call(port, ca, certs / "client.crt", certs / "client.key",
                                "/tessera/filter", probe)
        check("kube-scheduler's certificate is served", status == 200, f"HTTP {status}")

        bad = dl.forbidden_lines(ext.log_text())
        check("extender log has no 403 Forbidden", not bad, " | ".join(bad[:3]))
        check("extender still running", ext.alive())
        check("kube-scheduler still running", sched.alive())
    finally:
        if sched:
            sched.close()
        ext.close()
        if check.failed:
            print(ext.tail(30), flush=True)
            if sched:
                print(sched.tail(30), flush=True)
    print(f"extender_mode_test: {total()} in all", flush=True)
    return check.exit_code()


def scenario(api: kl.Client, check: kl.Checks, health: int) -> None:
    t = dl.timer()
    # kube-scheduler alone spreads: a pod the extender is not interested in avoids ext-a.
    control = kl.gpu_pod("control", NS, gpus=None, scheduler="default-scheduler", cpu="1")
    kl.create_pods(api, [control])
    got = dl.wait_bound(api, NS, ["control"], 60)
    node = got["control"].get("spec", {}).get("nodeName")
    check("control: kube-scheduler alone puts a CPU-only pod on an empty node",
          node in NODES and node != PARTLY_USED and not assignment_of(got["control"]),
          f"on {node}")

    # Tessera packs: the next GPU pod goes onto the partly used node, on a free GPU.
    kl.create_pods(api, [kl.gpu_pod("pack", NS, gpus=1, scheduler="default-scheduler",
                                    priority_class=LOW)])
    p = dl.wait_bound(api, NS, ["pack"], 60)["pack"]
    a = assignment_of(p)
    node = p.get("spec", {}).get("nodeName")
    check("pack: bound by the extender onto the partly used node",
          node == PARTLY_USED and a.get("node") == node and a.get("kind") == "exclusive"
          and len(a.get("gpus", [])) == 1 and not set(a.get("gpus", [])) & {0, 1},
          f"on {node}, assignment {json.dumps(a)}")

    share = kl.gpu_pod("share", NS, gpus=None, gpu_memory="20Gi", gpu_compute=25,
                       scheduler="default-scheduler", priority_class=LOW)
    wrong = kl.gpu_pod("wrong-model", NS, gpus=1, scheduler="default-scheduler",
                       priority_class=LOW, annotations={"tessera.io/gpu-models": "A100-80GB"})
    fills = [kl.gpu_pod(f"fill-{i}", NS, gpus=4, scheduler="default-scheduler",
                        priority_class=LOW) for i in range(2)]
    kl.create_pods(api, [share, wrong])
    p = dl.wait_bound(api, NS, ["share"], 60)["share"]
    a = assignment_of(p)
    check("share: bound by the extender with a GPU share",
          bool(p.get("spec", {}).get("nodeName")) and a.get("node") == p["spec"]["nodeName"]
          and a.get("kind") in ("share", "mps") and len(a.get("gpus", [])) == 1,
          json.dumps(a))
    kl.create_pods(api, fills)
    got = dl.wait_bound(api, NS, ["fill-0", "fill-1"], 60)
    fill_nodes = {n: p.get("spec", {}).get("nodeName") for n, p in got.items()}
    check("fill pods: 4 GPUs each, bound with assignments on the two empty nodes",
          sorted(v or "" for v in fill_nodes.values()) == ["ext-b", "ext-c"]
          and all(len(assignment_of(p).get("gpus", [])) == 4 for p in got.values()),
          json.dumps(fill_nodes))

    def failed_scheduling():
        evs = [e for e in dl.events_for(api, NS, "wrong-model")
               if e.get("reason") == "FailedScheduling"]
        return evs if any("allowed models" in e.get("note", "") for e in evs) else None
    evs, secs = kl.wait_until(failed_scheduling, 60, 0.5)
    check("wrong-model: Pending, Tessera's reason in kube-scheduler's FailedScheduling Event",
          secs is not None and not dl.pod(api, NS, "wrong-model")["spec"].get("nodeName"),
          (evs or [{}])[-1].get("note", "")[:240] if evs else
          str([e.get("note") for e in dl.events_for(api, NS, "wrong-model")])[:240])
    cond = dl.condition(dl.pod(api, NS, "wrong-model"), "PodScheduled") or {}
    check("wrong-model: PodScheduled=False, Unschedulable",
          cond.get("status") == "False" and cond.get("reason") == "Unschedulable",
          cond.get("message", "")[:200])

    # No node has 4 free GPUs: the high-priority pod preempts through the extender.
    before = counters(health)
    kl.create_pods(api, [kl.gpu_pod("urgent", NS, gpus=4, scheduler="default-scheduler",
                                    priority_class=HIGH)])
    p = dl.wait_bound(api, NS, ["urgent"], 120)["urgent"]
    node = p.get("spec", {}).get("nodeName")
    a = assignment_of(p)
    after = counters(health)
    check("preempt verb called for the high-priority pod", after["preempt"] > before["preempt"],
          f"{before['preempt']:.0f} -> {after['preempt']:.0f}")
    check("urgent: bound by the extender after preemption",
          node in ("ext-b", "ext-c") and a.get("node") == node and len(a.get("gpus", [])) == 4,
          f"on {node}, {json.dumps(a)}")
    victim = next((n for n, v in fill_nodes.items() if v == node), None)
    left = {x["metadata"]["name"]: x for x in api.list_all(f"/api/v1/namespaces/{NS}/pods")[0]}
    gone = victim and (victim not in left or left[victim]["metadata"].get("deletionTimestamp"))
    # Only the fill pod on that node is needed; the other one may go too when the extender's
    # informer has not yet seen the first victim leave as kube-scheduler retries (a race that
    # leads to a second preemption), so this checks what must hold either way.
    check("the low-priority pod on that node was the victim, the others on ext-a stay",
          bool(gone) and all(n in left for n in ("seed", "pack", "share")),
          f"victim {victim}; left {sorted(left)}")

    c = counters(health)
    check("extender received filter, prioritize, bind and preempt calls",
          c["filter"] > 0 and c["prioritize"] > 0 and c["bind"] >= 5 and c["preempt"] > 0,
          json.dumps(c))
    check("no bad requests from kube-scheduler", c["bad"] == 0, json.dumps(c))
    check("prioritize took candidates' fits from the filter call before it",
          c["fits_reused"] > 0, json.dumps(c))
    check("scenario", True, t())


if __name__ == "__main__":
    sys.exit(main())
