"""Helpers for the tests that install deploy/ on the real control plane
(manifests_test.py, extender_mode_test.py): reading the manifests, kubectl,
the Prometheus Operator CRD from the Go module cache, pod conditions and
events, and a comparison of applied objects with what the API server kept.
"""

from __future__ import annotations

import json
import os
import subprocess
import re
import time
import urllib.parse
from pathlib import Path

import yaml

import k8slib

DEPLOY = k8slib.REPO / "deploy"
PROMCRD_MODULE = k8slib.HERE / "promcrd"
PROM_OPERATOR = "github.com/prometheus-operator/prometheus-operator"
PROMETHEUSRULE_CRD = "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml"


def deploy_files() -> list[Path]:
    """Every *.yaml under deploy/: namespaces first, then CRDs, then the rest (sorted)."""
    files = sorted(DEPLOY.rglob("*.yaml"))

    def rank(p: Path) -> tuple[int, str]:
        kinds = {d.get("kind") for d in load_docs(p)}
        return (0 if kinds == {"Namespace"} else 1 if "CustomResourceDefinition" in kinds else 2,
                str(p))
    return sorted(files, key=rank)


def load_docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def kubectl(*args: str, timeout: float = 120, stdin: str | None = None,
            kubeconfig: str | None = None) -> subprocess.CompletedProcess:
    cmd = [str(Path(os.environ["TESSERA_K8S_BIN"]) / "kubectl"),
           "--kubeconfig", kubeconfig or os.environ["KUBECONFIG"], *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)


def apply(target: str, kustomize: bool = False) -> subprocess.CompletedProcess:
    """kubectl apply --server-side (strict server-side field validation) of a file or a
    kustomization directory."""
    return kubectl("apply", "--server-side", "--field-manager=tessera-e2e",
                   "-k" if kustomize else "-f", target)


def wait_established(crd_names: list[str], timeout: int = 90) -> subprocess.CompletedProcess:
    return kubectl("wait", "--for=condition=Established", f"--timeout={timeout}s",
                   *[f"crd/{n}" for n in crd_names], timeout=timeout + 30)


def prometheusrule_crd() -> Path:
    """The PrometheusRule CRD of the Prometheus Operator release pinned in promcrd/go.mod,
    downloaded into the Go module cache (verified against promcrd/go.sum) on first use."""
    env = {**os.environ, "GOFLAGS": "-mod=readonly"}
    out = subprocess.run(["go", "mod", "download", "-json", PROM_OPERATOR],
                         cwd=PROMCRD_MODULE, capture_output=True, text=True, env=env,
                         timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"go mod download {PROM_OPERATOR}: {out.stderr.strip()[-500:]}")
    info = json.loads(out.stdout)
    if info.get("Error"):
        raise RuntimeError(f"go mod download {PROM_OPERATOR}: {info['Error']}")
    path = Path(info["Dir"]) / PROMETHEUSRULE_CRD
    if not path.exists():
        raise RuntimeError(f"{PROMETHEUSRULE_CRD} not in {info['Dir']}")
    return path


def differences(want, got, path: str = "") -> list[str]:
    """Where `got` (read back from the API server) lacks or changes something of `want` (the
    manifest). Defaults the server adds are fine; numbers and quantities compare by value."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return [f"{path}: expected an object, got {json.dumps(got)[:80]}"]
        out = []
        for k, v in want.items():
            if k not in got:
                out.append(f"{path}.{k}: missing (pruned or dropped)")
            else:
                out.extend(differences(v, got[k], f"{path}.{k}"))
        return out
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return [f"{path}: expected {len(want)} items, got {json.dumps(got)[:120]}"]
        out = []
        for i, (w, g) in enumerate(zip(want, got)):
            out.extend(differences(w, g, f"{path}[{i}]"))
        return out
    if want == got or str(want) == str(got):
        return []
    try:
        if float(want) == float(got):
            return []
    except (TypeError, ValueError):
        pass
    return [f"{path}: {json.dumps(want)} became {json.dumps(got)}"]


def pod(api: k8slib.Client, ns: str, name: str) -> dict:
    status, body = api.get(f"/api/v1/namespaces/{ns}/pods/{name}")
    return body if status == 200 else {}


def condition(pod_: dict, kind: str) -> dict | None:
    for c in pod_.get("status", {}).get("conditions", []) or []:
        if c.get("type") == kind:
            return c
    return None


def events_for(api: k8slib.Client, ns: str, name: str) -> list[dict]:
    """events.k8s.io/v1 Events about the object `name` in `ns` (any kind)."""
    query = urllib.parse.urlencode({"fieldSelector": f"regarding.name={name}"})
    out = api.must("GET", f"/apis/events.k8s.io/v1/namespaces/{ns}/events?{query}")
    return out.get("items", [])


def wait_bound(api: k8slib.Client, ns: str, names: list[str], timeout: float) -> dict[str, dict]:
    """Waits until every named pod has spec.nodeName; returns the pods as last read."""
    last: dict[str, dict] = {}

    def probe():
        items, _ = api.list_all(f"/api/v1/namespaces/{ns}/pods")
        by_name = {p["metadata"]["name"]: p for p in items}
        last.clear()
        last.update({n: by_name.get(n, {}) for n in names})
        return all(last[n].get("spec", {}).get("nodeName") for n in names)
    k8slib.wait_until(probe, timeout, 0.5)
    return dict(last)


def check_access(sa: k8slib.Client, check: k8slib.Checks, allowed: list, denied: list) -> None:
    """SelfSubjectAccessReviews with a service account's own token: every call in `allowed`
    ((verb, group, resource, subresource, namespace, name) as the authorizer sees it) is
    granted, none in `denied`."""
    def review(verb, group, resource, sub, ns, name):
        attrs = {"verb": verb, "group": group, "resource": resource}
        for k, v in (("subresource", sub), ("namespace", ns), ("name", name)):
            if v:
                attrs[k] = v
        out = sa.must("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                      {"apiVersion": "authorization.k8s.io/v1",
                       "kind": "SelfSubjectAccessReview",
                       "spec": {"resourceAttributes": attrs}})
        return bool(out.get("status", {}).get("allowed"))

    def name(a):
        verb, group, resource, sub, ns, obj = a
        return (f"{verb} {group + '/' if group else ''}{resource}{'/' + sub if sub else ''}"
                f"{' in ' + ns if ns else ''}{' named ' + obj if obj and obj != 'x' else ''}")
    missing = [name(a) for a in allowed if not review(*a)]
    check("RBAC grants every call the code makes", not missing, "missing: " + ", ".join(missing))
    extra = [name(a) for a in denied if review(*a)]
    check("RBAC grants nothing more (sampled)", not extra, "granted: " + ", ".join(extra))


def forbidden_lines(text: str) -> list[str]:
    # 403 as a status, not as part of a number (a port such as 40327 is not a refusal).
    return [line for line in text.splitlines()
            if re.search(r"(?<!\d)403(?!\d)", line) or "forbidden" in line.lower()]


def timer():
    start = time.monotonic()
    return lambda: f"{time.monotonic() - start:.1f}s"
