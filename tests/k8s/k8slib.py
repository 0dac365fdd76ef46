"""Shared helpers for the end-to-end tests and the benchmark that run against
the real control plane started by controlplane.py.

Connection details come from the variables controlplane.py exports
(TESSERA_K8S_SERVER, TESSERA_K8S_TOKEN, TESSERA_K8S_CA, TESSERA_K8S_BIN,
TESSERA_K8S_WORKDIR); the tessera binary from TESSERA_BINARY, else the release
or asan build in the repository.

Client keeps one persistent HTTPS connection per thread, so thousands of
requests do not pay a TLS handshake each.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
FAKE_NODE_VALUE = "fake"
GPU = "nvidia.com/gpu"
ASSIGNMENT = "tessera.io/assignment"
INVENTORY = "tessera.io/gpu-inventory"

# Catalog name -> GFD product label and memory (MiB), for the models tests use.
MODELS = {
    "H100-80GB": ("NVIDIA-H100-80GB-HBM3", 81559),
    "A100-80GB": ("NVIDIA-A100-SXM4-80GB", 81920),
    "A100-40GB": ("NVIDIA-A100-SXM4-40GB", 40960),
    "T4": ("Tesla-T4", 15360),
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class ApiError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, body) -> None:
        msg = body.get("message", "") if isinstance(body, dict) else str(body)[:300]
        super().__init__(f"{method} {path}: HTTP {status}: {msg}")
        self.status = status
        self.body = body


class Client:
    """JSON client for the API server with a bearer token; thread-safe (one
    keep-alive connection per thread)."""

    def __init__(self, server: str, token: str, ca_file: str) -> None:
        parsed = urllib.parse.urlparse(server)
        self.server = server.rstrip("/")
        self.host = parsed.hostname or "127.0.0.1"
        self.port = parsed.port or 443
        self.token = token
        self.ca_file = ca_file
        self.ctx = ssl.create_default_context(cafile=ca_file)
        self.local = threading.local()

    @staticmethod
    def from_env(token: str | None = None) -> "Client":
        return Client(os.environ["TESSERA_K8S_SERVER"], token or os.environ["TESSERA_K8S_TOKEN"],
                      os.environ["TESSERA_K8S_CA"])

    def _conn(self, timeout: float) -> http.client.HTTPSConnection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx,
                                               timeout=timeout)
            self.local.conn = conn
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def _drop(self) -> None:
        conn = getattr(self.local, "conn", None)
        if conn is not None:
            conn.close()
        self.local.conn = None

    def request(self, method: str, path: str, body=None, content_type="application/json",
                timeout: float = 30.0):
        """Returns (status, parsed JSON or text); never raises on HTTP errors."""
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            if isinstance(data, str):
                data = data.encode()
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        for attempt in range(2):
            conn = self._conn(timeout)
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
                status = resp.status
                break
            except (http.client.HTTPException, ConnectionError, OSError):
                self._drop()
                if attempt == 1:
                    raise
        text = raw.decode(errors="replace")
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def get(self, path: str):
        return self.request("GET", path)

    def post(self, path: str, body):
        return self.request("POST", path, body)

    def must(self, method: str, path: str, body=None, ok=(200, 201, 202),
             content_type="application/json"):
        status, out = self.request(method, path, body, content_type=content_type)
        if status not in ok:
            raise ApiError(method, path, status, out)
        return out

    def list_all(self, path: str, selector: str = "", field_selector: str = "",
                 page: int = 500) -> tuple[list[dict], str]:
        """Every item of a collection, read in pages; returns (items, resourceVersion)."""
        items: list[dict] = []
        cont = ""
        while True:
            query = {"limit": str(page)}
            if selector:
                query["labelSelector"] = selector
            if field_selector:
                query["fieldSelector"] = field_selector
            if cont:
                query["continue"] = cont
            out = self.must("GET", f"{path}?{urllib.parse.urlencode(query)}")
            items.extend(out.get("items", []))
            cont = out.get("metadata", {}).get("continue", "")
            if not cont:
                return items, out.get("metadata", {}).get("resourceVersion", "")

    def watch(self, path: str, resource_version: str, timeout_s: int = 300,
              selector: str = ""):
        """Yields watch events (dicts with type and object) on a connection of its own."""
        query = {"watch": "1", "resourceVersion": resource_version,
                 "timeoutSeconds": str(timeout_s), "allowWatchBookmarks": "true"}
        if selector:
            query["labelSelector"] = selector
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx,
                                           timeout=timeout_s + 30)
        try:
            conn.request("GET", f"{path}?{urllib.parse.urlencode(query)}",
                         headers={"Authorization": f"Bearer {self.token}",
                                  "Accept": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                raise ApiError("WATCH", path, resp.status, resp.read().decode(errors="replace"))
            while True:
                line = resp.readline()
                if not line:
                    return
                if line.strip():
                    yield json.loads(line)
        finally:
            conn.close()


def parallel(fn, items, threads: int = 8) -> list:
    """fn(item) for every item on a thread pool; re-raises the first error."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(fn, items))


def wait_until(probe, timeout: float, interval: float = 0.2):
    """Polls probe() until it returns something truthy; returns (value, seconds)
    or (last value, None) on timeout."""
    start = time.monotonic()
    value = None
    while time.monotonic() - start < timeout:
        value = probe()
        if value:
            return value, time.monotonic() - start
        time.sleep(interval)
    return value, None


class Checks:
    """Counts named checks and prints one line each."""

    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def __call__(self, name: str, ok: bool, detail: str = "") -> bool:
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
        return bool(ok)

    def exit_code(self) -> int:
        print(f"{self.passed} passed, {self.failed} failed", flush=True)
        return 0 if self.failed == 0 and self.passed > 0 else 1


# -- objects -----------------------------------------------------------------

def gpu_uuid(node: str, index: int) -> str:
    """A stable, UUID-shaped GPU id per node and index."""
    digest = hashlib.sha256(f"{node}/{index}".encode()).hexdigest()
    return f"GPU-{digest[:8]}-{digest[8:12]}-4{digest[13:16]}-8{digest[17:20]}-{digest[20:32]}"


def kwok_gpu_node(name: str, gpus: int = 8, model: str = "H100-80GB", inventory: bool = True,
                  labels: dict | None = None, cpu: str = "128", memory: str = "1Ti",
                  pods: str = "256") -> dict:
    """A node kwok runs, with GFD labels and, if asked, the Tessera inventory."""
    product, mem_mib = MODELS[model]
    annotations = {FAKE_NODE_ANNOTATION: FAKE_NODE_VALUE}
    if inventory:
        annotations[INVENTORY] = json.dumps([
            {"index": i, "uuid": gpu_uuid(name, i), "model": model, "memory_mib": mem_mib,
             "mig_enabled": False, "mig_layout": "", "health": "healthy"} for i in range(gpus)])
    all_labels = {"type": "kwok", "kubernetes.io/hostname": name,
                  "nvidia.com/gpu.product": product, "nvidia.com/gpu.count": str(gpus),
                  "nvidia.com/gpu.memory": str(mem_mib)}
    all_labels.update(labels or {})
    capacity = {"cpu": cpu, "memory": memory, "pods": pods, GPU: str(gpus)}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "annotations": annotations, "labels": all_labels},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def gpu_pod(name: str, namespace: str = "default", gpus: int | None = 1,
            gpu_memory: str | None = None, gpu_compute: int | None = None,
            queue: str | None = None, gang: str | None = None, min_member: int | None = None,
            scheduler: str = "tessera", labels: dict | None = None,
            annotations: dict | None = None, priority_class: str | None = None,
            cpu: str = "1", memory: str = "1Gi") -> dict:
    limits = {"cpu": cpu, "memory": memory}
    if gpus:
        limits[GPU] = str(gpus)
    if gpu_memory:
        limits["tessera.io/gpu-memory"] = gpu_memory
    if gpu_compute:
        limits["tessera.io/gpu-compute"] = str(gpu_compute)
    ann = dict(annotations or {})
    if queue:
        ann["tessera.io/queue"] = queue
    if gang:
        ann["tessera.io/gang"] = gang
    if min_member:
        ann["tessera.io/min-member"] = str(min_member)
    spec = {
        "schedulerName": scheduler,
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "registry.invalid/tessera/e2e:0",
                        "resources": {"limits": limits, "requests": limits}}],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": dict(labels or {"app": "tessera-e2e"}), "annotations": ann},
        "spec": spec,
    }


def namespace(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def ensure_namespace(api: Client, name: str) -> None:
    status, body = api.post("/api/v1/namespaces", namespace(name))
    if status not in (201, 409):
        raise ApiError("POST", "/api/v1/namespaces", status, body)

    def default_sa():
        s, _ = api.get(f"/api/v1/namespaces/{name}/serviceaccounts/default")
        return s == 200
    wait_until(default_sa, 60)


def create_nodes(api: Client, nodes: list[dict], threads: int = 8) -> None:
    parallel(lambda n: api.must("POST", "/api/v1/nodes", n), nodes, threads)


def wait_nodes_ready(api: Client, names: list[str], timeout: float = 120) -> bool:
    want = set(names)

    def ready():
        items, _ = api.list_all("/api/v1/nodes", selector="type=kwok")
        ok = {n["metadata"]["name"] for n in items
              if any(c.get("type") == "Ready" and c.get("status") == "True"
                     for c in n.get("status", {}).get("conditions", []))}
        return want <= ok
    _, secs = wait_until(ready, timeout, 0.5)
    return secs is not None


def create_pods(api: Client, pods: list[dict], threads: int = 8) -> None:
    parallel(lambda p: api.must("POST", f"/api/v1/namespaces/{p['metadata']['namespace']}/pods",
                                p), pods, threads)


def assignment(pod: dict) -> dict | None:
    raw = pod.get("metadata", {}).get("annotations", {}).get(ASSIGNMENT)
    return json.loads(raw) if raw else None


def token_for(api: Client, namespace_: str, service_account: str, seconds: int = 3600) -> str:
    out = api.must("POST", f"/api/v1/namespaces/{namespace_}/serviceaccounts/"
                   f"{service_account}/token",
                   {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                    "spec": {"expirationSeconds": seconds}})
    return out["status"]["token"]


def write_kubeconfig(path: Path, token: str, user: str = "tessera") -> Path:
    cfg = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": os.environ["TESSERA_K8S_SERVER"],
                                                 "certificate-authority":
                                                     os.environ["TESSERA_K8S_CA"]}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
        "current-context": "e2e",
    }
    path.write_text(json.dumps(cfg, indent=2) + "\n")
    path.chmod(0o600)
    return path


def workdir() -> Path:
    return Path(os.environ.get("TESSERA_K8S_WORKDIR", "/tmp"))


def free_port() -> int:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def tessera_binary() -> str:
    env = os.environ.get("TESSERA_BINARY")
    if env:
        return env
    for preset in ("release", "asan"):
        path = REPO / "build" / preset / "apps" / "tessera" / "tessera"
        if path.exists():
            return str(path)
    raise RuntimeError("no tessera binary: set TESSERA_BINARY or build a preset")


class Process:
    """A child process with its output in a log file; stopped on close()."""

    def __init__(self, name: str, args: list[str], env: dict | None = None) -> None:
        self.name = name
        self.log_path = workdir() / "logs" / f"{name}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        out = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     env={**os.environ, **(env or {})})
        out.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.alive():
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def close(self, timeout: float = 15) -> int | None:
        if self.alive():
            self.kill(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill(signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 30) -> str:
        return "\n".join(f"  {self.name}| {l}" for l in self.log_text().splitlines()[-lines:])

    def rss_peak_kib(self) -> int:
        """VmHWM of the process (KiB); 0 once it has exited."""
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        except OSError:
            pass
        return 0


def start_scheduler(name: str, config_yaml: str, kubeconfig: Path | None = None,
                    extra: list[str] | None = None) -> tuple[Process, int]:
    """Starts `tessera scheduler`; returns the process and its metrics port."""
    cfg = workdir() / f"{name}.yaml"
    cfg.write_text(config_yaml)
    port = free_port()
    args = [tessera_binary(), "scheduler", "--config", str(cfg),
            "--kubeconfig", str(kubeconfig or os.environ["KUBECONFIG"]),
            "--metrics-address", f"127.0.0.1:{port}", *(extra or [])]
    return Process(name, args), port


def with_processes(check: Checks, body) -> int:
    """Runs body(procs), where body appends the processes it starts to procs; closes them all
    afterwards, printing each exit code and, if a check failed, the end of its log."""
    procs: list[Process] = []
    try:
        return body(procs)
    finally:
        for p in procs:
            rc = p.close()
            print(f"{p.name} exit code {rc}", flush=True)
            if check.failed:
                print(p.tail(40), flush=True)


def metrics(port: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/metrics")
        return conn.getresponse().read().decode(errors="replace")
    finally:
        conn.close()


def metric_value(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            try:
                return float(line.rsplit(" ", 1)[1])
            except ValueError:
                return None
    return None
