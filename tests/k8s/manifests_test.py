#!/usr/bin/env python3
"""Installs everything in deploy/ on the real control plane and runs `tessera
scheduler` with exactly the rights deploy/scheduler/rbac.yaml grants.

  tests/k8s/controlplane.py -- python3 tests/k8s/manifests_test.py

1. Both Kustomizations (deploy/, deploy/extender/) build and apply; then every
   *.yaml under deploy/ (namespaces, CRDs, RBAC, ConfigMaps, Deployments,
   Services, NetworkPolicy, the samples, the PrometheusRule) is applied with
   `kubectl apply --server-side` (strict server-side field validation), CRDs
   first and Established before their objects. The PrometheusRule CRD comes
   from the Prometheus Operator module pinned in promcrd/go.mod, through the
   Go module cache. Every object reads back with what the manifest said (no
   field pruned), and the Deployments and the Job get their pods created
   (admission accepts the pod templates).
2. The CRDs' structural schemas reject invalid Queues and WorkloadGroups.
3. `tessera scheduler`, with deploy/scheduler/configmap.yaml's config.yaml,
   --leader-elect and a token of ServiceAccount tessera-system/tessera-scheduler
   (bound only by rbac.yaml), takes the Lease, binds whole-GPU, shared and
   gang pods with assignments, writes PodScheduled=False and an Event for a pod
   that cannot fit, and never meets 403 Forbidden.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import yaml

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
import deploylib as dl  # noqa: E402
import k8slib as kl  # noqa: E402

NODES = [f"manifests-gpu-{i}" for i in range(3)]
NS = "team-a"  # from deploy/samples/namespaces.yaml
IDENTITY = "e2e-manifests"
FOREIGN_CONDITION = {"type": "example.com/Audited", "status": "True", "reason": "E2E",
                     "message": "set by another controller",
                     "lastTransitionTime": "2026-01-01T00:00:00Z"}

# The API calls the code makes (tests/security/rbac_test.cc lists them), as the real
# authorizer sees them: (verb, group, resource, subresource, namespace, name).
SCHEDULER_ACCESS = [
    ("list", "", "pods", "", "", ""), ("watch", "", "pods", "", "", ""),
    ("list", "", "nodes", "", "", ""), ("watch", "", "nodes", "", "", ""),
    ("create", "", "pods", "binding", NS, "x"), ("create", "", "pods", "eviction", NS, "x"),
    ("patch", "", "pods", "status", NS, "x"),
    ("create", "events.k8s.io", "events", "", NS, ""),
    ("list", "tessera.io", "queues", "", "", ""),
    ("create", "coordination.k8s.io", "leases", "", "tessera-system", ""),
    ("get", "coordination.k8s.io", "leases", "", "tessera-system", "tessera-scheduler"),
    ("update", "coordination.k8s.io", "leases", "", "tessera-system", "tessera-scheduler"),
]
# Least privilege: what it must not be able to do.
SCHEDULER_DENIED = [
    ("delete", "", "pods", "", NS, "x"), ("get", "", "secrets", "", NS, "x"),
    ("update", "coordination.k8s.io", "leases", "", "tessera-system", "other"),
    ("create", "coordination.k8s.io", "leases", "", NS, ""),
    ("update", "", "nodes", "", "", "x"), ("get", "", "pods", "", NS, "x"),
]


def apply_manifests(api: kl.Client, check: kl.Checks) -> None:
    t = dl.timer()
    for kdir in ("deploy", "deploy/extender"):
        built = dl.kubectl("kustomize", str(kl.REPO / kdir))
        kinds = sorted({f"{d['kind']}/{d['metadata']['name']}"
                        for d in yaml.safe_load_all(built.stdout) if d}) if built.returncode == 0 else []
        check(f"kubectl kustomize {kdir}", built.returncode == 0 and len(kinds) > 0,
              built.stderr.strip()[-300:] if built.returncode else f"{len(kinds)} objects")
    # kustomize orders the Namespace and the CRDs first itself.
    r = dl.apply(str(kl.REPO / "deploy"), kustomize=True)
    check("kubectl apply --server-side -k deploy/", r.returncode == 0,
          (r.stderr or r.stdout).strip()[-400:] if r.returncode else "")
    r = dl.apply(str(kl.REPO / "deploy/extender"), kustomize=True)
    check("kubectl apply --server-side -k deploy/extender/", r.returncode == 0,
          (r.stderr or r.stdout).strip()[-400:] if r.returncode else "")

    files = dl.deploy_files()
    crds = [d["metadata"]["name"] for f in files for d in dl.load_docs(f)
            if d["kind"] == "CustomResourceDefinition"]
    try:
        prom = dl.prometheusrule_crd()
        check("PrometheusRule CRD from the Go module cache", True, str(prom))
    except Exception as e:  # noqa: BLE001
        check("PrometheusRule CRD from the Go module cache", False, str(e))
        prom = None
    with_crds = [f for f in files
                 if {d["kind"] for d in dl.load_docs(f)} & {"Namespace",
                                                            "CustomResourceDefinition"}]
    rest = [f for f in files if f not in with_crds]
    for f in with_crds + ([prom] if prom else []) + [None] + rest:
        if f is None:
            # Every CRD Established before the first custom object.
            names = crds + ([d["metadata"]["name"] for d in dl.load_docs(prom)] if prom else [])
            r = dl.wait_established(names)
            check("CRDs Established", r.returncode == 0,
                  (r.stderr or r.stdout).strip()[-300:] if r.returncode else ", ".join(names))
            continue
        r = dl.apply(str(f))
        rel = f.relative_to(kl.REPO) if f.is_relative_to(kl.REPO) else f.name
        check(f"apply --server-side {rel}", r.returncode == 0,
              (r.stderr or r.stdout).strip()[-500:] if r.returncode
              else f"{len(dl.load_docs(f))} objects")

    for name in crds:
        crd = api.must("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        conds = {c["type"]: c["status"] for c in crd.get("status", {}).get("conditions", [])}
        check(f"CRD {name} structural, names accepted",
              conds.get("Established") == "True" and conds.get("NamesAccepted") == "True"
              and conds.get("NonStructuralSchema") != "True", json.dumps(conds))

    # Every object reads back with what its manifest said.
    for f in dl.deploy_files():
        r = dl.kubectl("get", "-f", str(f), "-o", "json")
        rel = f.relative_to(kl.REPO)
        if not check(f"read back {rel}", r.returncode == 0, r.stderr.strip()[-300:]):
            continue
        out = json.loads(r.stdout)
        got = out.get("items", [out]) if out.get("kind", "").endswith("List") else [out]
        keyed = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
                 for o in got}
        diffs = []
        for d in dl.load_docs(f):
            ns = d["metadata"].get("namespace", "")
            o = keyed.get((d["kind"], ns, d["metadata"]["name"]))
            if o is None:
                diffs.append(f"{d['kind']}/{d['metadata']['name']} not found")
                continue
            want = {k: v for k, v in d.items() if k not in ("metadata", "status")}
            want["metadata"] = {k: d["metadata"][k] for k in ("labels", "annotations")
                                if k in d["metadata"]}
            diffs += [f"{d['kind']}/{d['metadata']['name']}{x}"
                      for x in dl.differences(want, o)]
        check(f"objects of {rel} kept as applied", not diffs, "; ".join(diffs[:5]))
    check("manifests applied", True, t())


def check_workloads(api: kl.Client, check: kl.Checks) -> None:
    """Deployments and the Job create their pods: admission accepts the pod templates
    (priority classes, security contexts, volumes), then they are removed again."""
    workloads = []
    for f in dl.deploy_files():
        for d in dl.load_docs(f):
            if d["kind"] in ("Deployment", "Job"):
                workloads.append(d)
    for w in workloads:
        ns, name = w["metadata"]["namespace"], w["metadata"]["name"]
        want = w["spec"].get("replicas", w["spec"].get("parallelism", 1))
        group = "apps/v1/namespaces" if w["kind"] == "Deployment" else "batch/v1/namespaces"
        plural = "deployments" if w["kind"] == "Deployment" else "jobs"
        sel = ",".join(f"{k}={v}" for k, v in
                       w["spec"].get("selector", {}).get("matchLabels", {}).items())
        if w["kind"] == "Job":
            sel = f"batch.kubernetes.io/job-name={name}"

        def created():
            items, _ = api.list_all(f"/api/v1/namespaces/{ns}/pods", selector=sel)
            return len(items) >= want and items
        pods, secs = kl.wait_until(created, 90, 0.5)
        detail = f"{len(pods or [])}/{want} pods"
        if secs is None:
            evs = api.must("GET", f"/api/v1/namespaces/{ns}/events").get("items", [])
            fails = [e.get("message", "") for e in evs if e.get("reason") == "FailedCreate"]
            detail += f"; FailedCreate: {fails[:2]}"
        check(f"{w['kind']} {ns}/{name} gets its pods created", secs is not None, detail)
        api.request("DELETE", f"/apis/{group}/{ns}/{plural}/{name}",
                    {"kind": "DeleteOptions", "apiVersion": "v1",
                     "propagationPolicy": "Background"})
    for p in ("notebook-alice",):
        api.request("DELETE", f"/api/v1/namespaces/{NS}/pods/{p}")

    # The sample workloads are gone before Tessera starts, so only this test's pods remain.
    def gone():
        left = []
        for ns in ("team-a", "team-b", "tessera-system"):
            items, _ = api.list_all(f"/api/v1/namespaces/{ns}/pods")
            left += [p["metadata"]["name"] for p in items]
        return not left
    _, secs = kl.wait_until(gone, 90, 0.5)
    check("sample workloads removed", secs is not None)


def check_invalid(api: kl.Client, check: kl.Checks) -> None:
    """The CRDs' structural schemas reject invalid objects (HTTP 422 naming the field)."""
    def queue(name, spec):
        return {"apiVersion": "tessera.io/v1alpha1", "kind": "Queue",
                "metadata": {"name": name}, "spec": spec}

    def group(name, spec):
        return {"apiVersion": "tessera.io/v1alpha1", "kind": "WorkloadGroup",
                "metadata": {"name": name, "namespace": NS}, "spec": spec}
    flavors = [{"name": "any", "nominal": {"gpu": 1}}]
    cases = [
        ("Queue weight 0", "/apis/tessera.io/v1alpha1/queues",
         queue("bad-weight", {"weight": 0, "flavors": flavors}), "spec.weight"),
        ("Queue weight -1", "/apis/tessera.io/v1alpha1/queues",
         queue("bad-weight-neg", {"weight": -1, "flavors": flavors}), "spec.weight"),
        ("Queue without flavors", "/apis/tessera.io/v1alpha1/queues",
         queue("bad-flavors", {"weight": 1}), "spec.flavors"),
        ("Queue with negative nominal gpu", "/apis/tessera.io/v1alpha1/queues",
         queue("bad-nominal", {"flavors": [{"name": "x", "nominal": {"gpu": -1}}]}),
         "nominal.gpu"),
        ("Queue with unknown withinQueue", "/apis/tessera.io/v1alpha1/queues",
         queue("bad-preempt", {"flavors": flavors, "preemption": {"withinQueue": "Always"}}),
         "withinQueue"),
        ("WorkloadGroup minMember 0", f"/apis/tessera.io/v1alpha1/namespaces/{NS}/workloadgroups",
         group("bad-min", {"minMember": 0}), "spec.minMember"),
        ("WorkloadGroup without minMember",
         f"/apis/tessera.io/v1alpha1/namespaces/{NS}/workloadgroups",
         group("bad-nomin", {"queue": "team-a"}), "spec.minMember"),
        ("WorkloadGroup with bad topology",
         f"/apis/tessera.io/v1alpha1/namespaces/{NS}/workloadgroups",
         group("bad-topology", {"minMember": 2, "topology": "rack"}), "spec.topology"),
    ]
    for what, path, body, field in cases:
        status, out = api.post(path, body)
        msg = out.get("message", "") if isinstance(out, dict) else str(out)
        check(f"rejected: {what}", status == 422 and field in msg,
              f"HTTP {status}: {msg[:160]}")
    # The same objects made valid are accepted, so the refusals above are the schema's.
    ok_cases = [
        ("Queue weight 0.5", "/apis/tessera.io/v1alpha1/queues",
         queue("ok-weight", {"weight": 0.5, "flavors": flavors})),
        ("WorkloadGroup minMember 1", f"/apis/tessera.io/v1alpha1/namespaces/{NS}/workloadgroups",
         group("ok-min", {"minMember": 1, "topology": "same-node"})),
    ]
    for what, path, body in ok_cases:
        status, out = api.post(path, body)
        check(f"accepted: {what}", status == 201,
              f"HTTP {status}: {out.get('message', '') if isinstance(out, dict) else out}")
        api.request("DELETE", f"{path}/{body['metadata']['name']}")


def run_scheduler(api: kl.Client, check: kl.Checks) -> None:
    cm = dl.load_docs(kl.REPO / "deploy/scheduler/configmap.yaml")[0]
    config = cm["data"]["config.yaml"]
    lease_cfg = yaml.safe_load(config)["leaderElection"]
    token = kl.token_for(api, "tessera-system", "tessera-scheduler")
    sa = kl.Client.from_env(token)
    status, _ = sa.get(f"/api/v1/namespaces/{NS}/secrets")
    check("the scheduler's token is not an admin's (secrets forbidden)", status == 403,
          f"HTTP {status}")
    dl.check_access(sa, check, SCHEDULER_ACCESS, SCHEDULER_DENIED)
    kubeconfig = kl.write_kubeconfig(kl.workdir() / "tessera-scheduler.kubeconfig", token,
                                     "tessera-scheduler")
    # A pod that cannot fit, created before the scheduler starts, carrying a condition of
    # another controller that Tessera's PodScheduled=False must not wipe.
    kl.create_pods(api, [kl.gpu_pod("too-big", NS, gpus=9, queue="team-a")])
    api.must("PATCH", f"/api/v1/namespaces/{NS}/pods/too-big/status",
             {"status": {"conditions": [FOREIGN_CONDITION]}},
             content_type="application/strategic-merge-patch+json")
    sched, port = kl.start_scheduler("tessera-scheduler-manifests", config, kubeconfig,
                                     ["--leader-elect", "--identity", IDENTITY])
    try:
        _run_scheduler(api, check, sched, port, lease_cfg)
    finally:
        rc = sched.close()
        log = sched.log_text()
        bad = dl.forbidden_lines(log)
        check("scheduler log has no 403 Forbidden", not bad and "Forbidden" not in log,
              " | ".join(bad[:3]))
        check("scheduler exits cleanly on SIGTERM", rc == 0, f"exit {rc}")
        status, lease = api.get(f"/apis/coordination.k8s.io/v1/namespaces/"
                                f"{lease_cfg['namespace']}/leases/{lease_cfg['name']}")
        holder = lease.get("spec", {}).get("holderIdentity") if status == 200 else "?"
        check("the Lease is released on stop", status == 200 and not holder,
              f"holderIdentity {holder!r}")
        if check.failed:
            print(sched.tail(40), flush=True)


def _run_scheduler(api: kl.Client, check: kl.Checks, sched: kl.Process, port: int,
                   lease_cfg: dict) -> None:
    lease_path = (f"/apis/coordination.k8s.io/v1/namespaces/{lease_cfg['namespace']}"
                  f"/leases/{lease_cfg['name']}")

    def lease():
        s, body = api.get(lease_path)
        return body if s == 200 and body.get("spec", {}).get("holderIdentity") == IDENTITY \
            else None
    held, secs = kl.wait_until(lease, 60, 0.5)
    check("scheduler holds the Lease", secs is not None and sched.alive(),
          f"after {secs:.1f}s" if secs is not None else sched.tail(10))

    t = dl.timer()
    pods = [
        kl.gpu_pod("whole-4", NS, gpus=4, queue="team-a"),
        kl.gpu_pod("whole-2", NS, gpus=2, queue="team-a"),
        kl.gpu_pod("share", NS, gpus=None, gpu_memory="10Gi", gpu_compute=25, queue="team-a"),
        kl.gpu_pod("gang-0", NS, gpus=2, queue="team-a", gang="e2e-gang", min_member=2),
        kl.gpu_pod("gang-1", NS, gpus=2, queue="team-a", gang="e2e-gang", min_member=2),
    ]
    kl.create_pods(api, pods)
    fits = [p["metadata"]["name"] for p in pods]
    got = dl.wait_bound(api, NS, fits, 120)
    bound = {n: p for n, p in got.items() if p.get("spec", {}).get("nodeName")}
    check("GPU pods bound", len(bound) == len(fits),
          f"{len(bound)}/{len(fits)} in {t()}; unbound: {sorted(set(fits) - set(bound))}")

    used: dict[str, set[int]] = {}
    for name, p in sorted(bound.items()):
        node = p["spec"]["nodeName"]
        try:
            a = kl.assignment(p)
        except ValueError as e:
            check(f"{name}: assignment is JSON", False, str(e))
            continue
        want_gpus = {"whole-4": 4, "whole-2": 2, "gang-0": 2, "gang-1": 2, "share": 1}[name]
        ok = bool(a) and a.get("node") == node and len(a.get("gpus", [])) == want_gpus
        if name == "share":
            ok = ok and a.get("kind") in ("mps", "share", "timeslice")
        else:
            ok = ok and a.get("kind") == "exclusive"
            dup = used.setdefault(node, set()) & set(a.get("gpus", []))
            ok = ok and not dup
            used[node] |= set(a.get("gpus", []))
        uuids = a.get("uuids", []) if a else []
        ok = ok and uuids == [kl.gpu_uuid(node, g) for g in a.get("gpus", [])]
        check(f"{name}: bound to {node} with its assignment", ok, json.dumps(a))
    if "gang-0" in bound and "gang-1" in bound:
        check("gang members bound together", True)

    def running():
        return all(dl.pod(api, NS, n).get("status", {}).get("phase") == "Running" for n in bound)
    _, secs = kl.wait_until(running, 60, 0.5)
    check("bound pods run (kwok)", secs is not None)

    def unschedulable():
        c = dl.condition(dl.pod(api, NS, "too-big"), "PodScheduled")
        return c if c and c.get("status") == "False" and c.get("message") else None
    cond, secs = kl.wait_until(unschedulable, 60, 0.5)
    check("too-big: PodScheduled=False with a reason", secs is not None
          and cond.get("reason") == "Unschedulable", json.dumps(cond))
    kept = dl.condition(dl.pod(api, NS, "too-big"), FOREIGN_CONDITION["type"])
    check("too-big: another controller's condition survives Tessera's status patch",
          bool(kept) and kept.get("status") == "True",
          json.dumps(dl.pod(api, NS, "too-big").get("status", {}).get("conditions")))
    check("too-big stays unbound", not dl.pod(api, NS, "too-big").get("spec", {}).get("nodeName"))

    def failed_event():
        evs = dl.events_for(api, NS, "too-big")
        return [e for e in evs if e.get("reason") == "FailedScheduling"]
    evs, secs = kl.wait_until(failed_event, 60, 0.5)
    check("too-big: FailedScheduling Event written", secs is not None,
          (evs or [{}])[0].get("note", "")[:200])
    # Tessera writes Warning Events only (docs/OPERATIONS.md): none for the pods it bound.
    warned = [n for n in bound if not n.startswith("gang-")
              and any(e.get("type") == "Warning" for e in dl.events_for(api, NS, n))]
    check("no Warning Events for bound pods", not warned, ", ".join(warned))

    # The Lease is renewed (update by name), not only created.
    first = (held or {}).get("spec", {}).get("renewTime")

    def renewed():
        s, body = api.get(lease_path)
        rt = body.get("spec", {}).get("renewTime") if s == 200 else None
        return rt if rt and rt != first and \
            body["spec"].get("holderIdentity") == IDENTITY else None
    rt, secs = kl.wait_until(renewed, 30, 0.5)
    check("Lease renewed by the scheduler", secs is not None, f"{first} -> {rt}")
    text = kl.metrics(port)
    check("tessera_leader is 1", kl.metric_value(text, "tessera_leader") == 1.0)
    errors = kl.metric_value(text, "tessera_binding_errors_total")
    check("no binding errors", not errors, f"tessera_binding_errors_total {errors}")


def main() -> int:
    check = kl.Checks()
    api = kl.Client.from_env()
    total = dl.timer()
    kl.create_nodes(api, [kl.kwok_gpu_node(n, 8, "H100-80GB") for n in NODES])
    check("kwok GPU nodes Ready", kl.wait_nodes_ready(api, NODES, 120))
    apply_manifests(api, check)
    t = dl.timer()
    check_workloads(api, check)
    check("workload checks", True, t())
    check_invalid(api, check)
    t = dl.timer()
    run_scheduler(api, check)
    check("scheduler checks", True, t())
    print(f"manifests_test: {total()} in all", flush=True)
    return check.exit_code()


if __name__ == "__main__":
    sys.exit(main())
