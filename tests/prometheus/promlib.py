"""Shared pieces of the monitoring tests: free ports, a real Prometheus server, Tessera's
processes, and a minimal Kubernetes API server for `tessera scheduler`.

Every process started here is registered with a Processes object, which stops them all on exit
(also when the test fails or raises).
"""
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SKIP = 77  # CTest SKIP_RETURN_CODE


def require(*tools):
    """Exits with SKIP when one of the tools is not installed."""
    for t in tools:
        if shutil.which(t) is None and not os.path.exists(t):
            print(f"SKIP: {t} is not installed")
            sys.exit(SKIP)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=10):
    """(status, body) of a GET; connection errors raise OSError."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def wait_for(what, fn, timeout=30, interval=0.2):
    """Calls fn until it returns a true value; raises after timeout seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            v = fn()
            if v:
                return v
        except OSError as e:
            last = e
        time.sleep(interval)
    raise TimeoutError(f"{what}: not within {timeout} s" + (f" ({last})" if last else ""))


class Processes:
    """Started processes, terminated (then killed) in reverse order by close()."""

    def __init__(self):
        self.procs = []

    def start(self, argv, **kw):
        p = subprocess.Popen(argv, stdout=kw.pop("stdout", subprocess.DEVNULL),
                             stderr=kw.pop("stderr", subprocess.PIPE), text=True, **kw)
        self.procs.append(p)
        return p

    def close(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def start_prometheus(procs, workdir, config, storage=None, extra=()):
    """Starts /usr/bin/prometheus on a free loopback port; returns its base URL once ready."""
    port = free_port()
    cfg = os.path.join(workdir, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write(config)
    storage = storage or os.path.join(workdir, "data")
    log = open(os.path.join(workdir, "prometheus.log"), "w")
    p = procs.start(["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={storage}",
                     f"--web.listen-address=127.0.0.1:{port}",
                     "--storage.tsdb.retention.time=10y", *extra],
                    stderr=log)
    url = f"http://127.0.0.1:{port}"

    def ready():
        if p.poll() is not None:
            log.flush()
            raise RuntimeError("prometheus exited: " + open(log.name).read()[-2000:])
        return http_get(url + "/-/ready", timeout=2)[0] == 200

    wait_for("prometheus ready", ready, timeout=30)
    return url


def query(url, expr, at=None):
    """Instant query; the result list (raises on an API error)."""
    params = {"query": expr}
    if at is not None:
        params["time"] = str(at)
    status, body = http_get(url + "/api/v1/query?" + urllib.parse.urlencode(params))
    doc = json.loads(body)
    if status != 200 or doc.get("status") != "success":
        raise RuntimeError(f"query {expr!r}: HTTP {status}: {body[:300]}")
    return doc["data"]["result"]


# ---- A Kubernetes API server just large enough for `tessera scheduler`: lists from a fixed set
# of objects, watches that stay open without events, and writes that succeed.

def gpu_node(name, gpus, product="NVIDIA-H100-80GB-HBM3"):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": "node-" + name, "resourceVersion": "1",
                         "labels": {"nvidia.com/gpu.product": product,
                                    "nvidia.com/gpu.count": str(gpus)}},
            "spec": {},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi",
                                       "nvidia.com/gpu": str(gpus)},
                       "capacity": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(gpus)},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def gpu_pod(ns, name, gpus, queue=None):
    ann = {"tessera.io/queue": queue} if queue else {}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "uid": f"pod-{ns}-{name}",
                         "resourceVersion": "1", "annotations": ann,
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"schedulerName": "tessera",
                     "containers": [{"name": "main", "image": "x",
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": "Pending"}}


def bound_pod(ns, name, node, gpu_index, queue=None):
    """A running pod holding one whole GPU of `node`, as the scheduler bound it."""
    pod = gpu_pod(ns, name, 1, queue)
    pod["metadata"]["annotations"]["tessera.io/assignment"] = json.dumps(
        {"node": node, "kind": "exclusive", "gpus": [gpu_index]})
    pod["spec"]["nodeName"] = node
    pod["status"]["phase"] = "Running"
    return pod


def queue_object(name, gpus):
    return {"apiVersion": "tessera.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": name, "resourceVersion": "1"},
            "spec": {"flavors": [{"name": "all", "nominal": {"gpu": gpus}}]}}


class FakeApiServer:
    """Serves GET lists of `objects` (path -> list of items) and open, silent watches."""

    def __init__(self, objects):
        self.objects = objects
        self.stopping = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def send_json(self, code, doc):
                body = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                u = urllib.parse.urlparse(self.path)
                q = urllib.parse.parse_qs(u.query)
                if u.path not in outer.objects:
                    return self.send_json(404, {"kind": "Status", "code": 404,
                                                "reason": "NotFound"})
                if q.get("watch", ["false"])[0] in ("true", "1"):
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    self.wfile.flush()
                    timeout = float(q.get("timeoutSeconds", ["30"])[0])
                    outer.stopping.wait(min(timeout, 30))
                    try:
                        self.wfile.write(b"0\r\n\r\n")
                    except OSError:
                        pass
                    return
                self.send_json(200, {"kind": "List", "apiVersion": "v1",
                                     "metadata": {"resourceVersion": "1"},
                                     "items": outer.objects[u.path]})

            def write(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n) if n else b"{}"
                try:
                    doc = json.loads(body)
                except ValueError:
                    doc = {}
                self.send_json(201 if self.command == "POST" else 200, doc)

            do_POST = do_PUT = do_PATCH = write

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def kubeconfig(self, path):
        with open(path, "w") as f:
            f.write(f"""apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: {self.url}
users:
- name: fake
  user:
    token: test
contexts:
- name: fake
  context:
    cluster: fake
    user: fake
current-context: fake
""")
        return path


@contextlib.contextmanager
def scheduler(procs, tessera, workdir):
    """`tessera scheduler` against a FakeApiServer holding a 2-GPU node, a Queue with a quota of
    8 GPUs, a pod of that queue bound to GPU 0 and two pods that cannot fit (4 GPUs each); yields the /metrics URL once the core's
    metrics are served."""
    objects = {
        "/api/v1/nodes": [gpu_node("gpu-1", 2)],
        "/api/v1/pods": [gpu_pod("ml", "wide-0", 4, "team-a"), gpu_pod("ml", "wide-1", 4),
                         bound_pod("ml", "bound-0", "gpu-1", 0, "team-a")],
        "/apis/tessera.io/v1alpha1/queues": [queue_object("team-a", 8)],
    }
    with FakeApiServer(objects) as api:
        port = free_port()
        kubeconfig = api.kubeconfig(os.path.join(workdir, "kubeconfig"))
        log = open(os.path.join(workdir, "scheduler.log"), "w")
        p = procs.start([tessera, "scheduler", "--kubeconfig", kubeconfig,
                         "--metrics-address", f"127.0.0.1:{port}"], stderr=log)
        url = f"http://127.0.0.1:{port}/metrics"

        def served():
            if p.poll() is not None:
                raise RuntimeError("tessera scheduler exited: " + open(log.name).read()[-2000:])
            status, body = http_get(url, timeout=2)
            return status == 200 and "tessera_pending_pods{" in body

        wait_for("tessera scheduler /metrics", served, timeout=60)
        yield url


def extender(procs, tessera, workdir):
    """`tessera extender --no-cluster --insecure` on loopback; returns its /metrics URL."""
    port, health = free_port(), free_port()
    log = open(os.path.join(workdir, "extender.log"), "w")
    p = procs.start([tessera, "extender", "--no-cluster", "--insecure",
                     "--listen", f"127.0.0.1:{port}", "--health-listen", f"127.0.0.1:{health}"],
                    stderr=log)
    url = f"http://127.0.0.1:{health}/metrics"

    def served():
        if p.poll() is not None:
            raise RuntimeError("tessera extender exited: " + open(log.name).read()[-2000:])
        return http_get(url, timeout=2)[0] == 200

    wait_for("tessera extender /metrics", served, timeout=60)
    return url


def webhook(procs, tessera, workdir):
    """`tessera webhook --insecure` on loopback after one pod review; returns its /metrics URL."""
    port = free_port()
    log = open(os.path.join(workdir, "webhook.log"), "w")
    p = procs.start([tessera, "webhook", "--insecure", "--listen", f"127.0.0.1:{port}"],
                    stderr=log)
    base = f"http://127.0.0.1:{port}"

    def served():
        if p.poll() is not None:
            raise RuntimeError("tessera webhook exited: " + open(log.name).read()[-2000:])
        return http_get(base + "/healthz", timeout=2)[0] == 200

    wait_for("tessera webhook /healthz", served, timeout=60)
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "share", "namespace": "ml"},
           "spec": {"containers": [{"name": "c", "resources": {
               "limits": {"tessera.io/gpu-memory": "8Gi"}}}]}}
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "review-1", "operation": "CREATE",
                          "kind": {"group": "", "version": "v1", "kind": "Pod"}, "object": pod}}
    req = urllib.request.Request(base + "/mutate-pods", data=json.dumps(review).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        answer = json.load(r)
    if not answer.get("response", {}).get("patch"):
        raise RuntimeError(f"tessera webhook did not patch a GPU-memory pod: {answer}")
    return base + "/metrics"

