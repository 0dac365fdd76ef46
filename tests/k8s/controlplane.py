#!/usr/bin/env python3
"""Runs a real single-machine Kubernetes control plane for tests.

Starts etcd, kube-apiserver (TLS, static bearer tokens, RBAC and Node
authorization, service-account tokens), kube-controller-manager,
kube-scheduler and kwok, all on free loopback ports in a temporary directory,
and stops them again on exit, Ctrl-C or SIGTERM. kwok plays the kubelet for
nodes annotated kwok.x-k8s.io/node=fake, using the stages in kwok-stages.yaml.

  controlplane.py [--bin DIR] [--workdir DIR] [--keep] [--no-kube-scheduler]
                  [--<component>-arg ARG ...] [-- COMMAND ...]

With a COMMAND it runs it once the control plane is ready and exits with its
status; without one it waits for a signal. Either way it writes env.sh in the
work directory and exports to COMMAND:

  KUBECONFIG             admin kubeconfig (group system:masters)
  TESSERA_K8S_SERVER     https://127.0.0.1:PORT
  TESSERA_K8S_TOKEN      the admin bearer token
  TESSERA_K8S_CA         CA certificate that signed the API server's certificate
  TESSERA_K8S_BIN        directory with the binaries (kubectl among them)
  TESSERA_K8S_WORKDIR    the work directory (logs/ holds each component's log)
  TESSERA_K8S_ETCD       etcd's client URL (plain HTTP, loopback)
  TESSERA_K8S_SCHEDULER_KUBECONFIG  kubeconfig of user system:kube-scheduler

--no-kube-scheduler leaves kube-scheduler out (a test starts its own), and
--<component>-arg ARG (repeatable) appends ARG to one component's command line.

The binaries come from --bin, else $TESSERA_K8S_BIN, else scripts/k8s-setup.sh
(which builds them on first use). Start-up phases are timed on stderr.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
FAKE_NODE_VALUE = "fake"
SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"
POD_CIDR = "10.244.0.0/16"
ISSUER = "https://kubernetes.default.svc.cluster.local"


def log(msg: str) -> None:
    print(f"controlplane: {msg}", file=sys.stderr, flush=True)


# Loopback traffic must never go through a proxy set in the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Api:
    """Minimal JSON client for the API server, bearer-token authenticated."""

    def __init__(self, server: str, token: str, ca_file: str) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.ctx = ssl.create_default_context(cafile=ca_file)
        self.opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=self.ctx))

    def request(self, method: str, path: str, body=None, content_type="application/json",
                timeout: float = 10.0):
        """Returns (status, parsed JSON or text). Never raises on HTTP errors."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with self.opener.open(req, timeout=timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as err:
            status, raw = err.code, err.read()
        text = raw.decode(errors="replace")
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def get(self, path: str):
        return self.request("GET", path)

    def post(self, path: str, body):
        return self.request("POST", path, body)


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports (all held open at once, then released)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def run(cmd: list[str], cwd: Path) -> None:
    res = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{res.stdout}")


def make_pki(pki: Path) -> None:
    """A throw-away CA, the API server's serving certificate and the
    service-account signing key pair (all ECDSA P-256, valid two days)."""
    pki.mkdir(parents=True)
    (pki / "openssl.cnf").write_text(f"""\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = tessera-test
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign, digitalSignature
subjectKeyIdentifier = hash
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, IP:{SERVICE_IP}, DNS:localhost, DNS:kubernetes, \
DNS:kubernetes.default, DNS:kubernetes.default.svc, DNS:kubernetes.default.svc.cluster.local
""")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run(["openssl", "req", "-x509", *ec, "-config", "openssl.cnf", "-extensions", "ca",
         "-subj", "/CN=tessera-test-ca", "-days", "2", "-keyout", "ca.key", "-out", "ca.crt"], pki)
    run(["openssl", "req", "-new", *ec, "-config", "openssl.cnf", "-subj", "/CN=kube-apiserver",
         "-keyout", "apiserver.key", "-out", "apiserver.csr"], pki)
    run(["openssl", "x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
         "-CAcreateserial", "-days", "2", "-extfile", "openssl.cnf", "-extensions", "server",
         "-out", "apiserver.crt"], pki)
    run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-out", "sa.key"], pki)
    run(["openssl", "pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub"], pki)
    for key in pki.glob("*.key"):
        key.chmod(0o600)


def write_kubeconfig(path: Path, server: str, ca: Path, user: str, token: str) -> None:
    # JSON is valid YAML, and every client here reads it.
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "tessera", "cluster": {"server": server,
                                                     "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "tessera", "context": {"cluster": "tessera", "user": user}}],
        "current-context": "tessera",
    }
    path.write_text(json.dumps(cfg, indent=2) + "\n")
    path.chmod(0o600)


def _die_with_parent() -> None:
    """Child pre-exec: die at once if this script is killed without cleaning
    up (an orderly stop is ControlPlane.stop's job; SIGTERM here could leave
    kube-apiserver waiting for an etcd that is gone)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class ControlPlane:
    def __init__(self, bin_dir: Path, workdir: Path, extra: dict[str, list[str]] | None = None,
                 kube_scheduler: bool = True) -> None:
        self.extra = extra or {}
        self.kube_scheduler = kube_scheduler
        self.etcd_url = ""
        self.bin = bin_dir
        self.dir = workdir
        self.logs = workdir / "logs"
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.timings: list[tuple[str, float]] = []
        self.t0 = time.monotonic()
        self.server = ""
        self.tokens: dict[str, str] = {}
        self.api: Api | None = None

    # -- process handling ------------------------------------------------
    def spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        args = [*args, *self.extra.get(name, [])]
        self.logs.mkdir(exist_ok=True)
        out = open(self.logs / f"{name}.log", "wb")
        proc = subprocess.Popen([str(self.bin / args[0]), *args[1:]], stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, cwd=self.dir,
                                start_new_session=True, preexec_fn=_die_with_parent)
        out.close()
        self.procs.append((name, proc))
        return proc

    def check_alive(self) -> None:
        for name, proc in self.procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with status {proc.returncode}\n"
                                   + self.log_tail(name))

    def log_tail(self, name: str, lines: int = 30) -> str:
        try:
            text = (self.logs / f"{name}.log").read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(f"  {name}| {line}" for line in text[-lines:])

    def wait_for(self, what: str, probe, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            try:
                if probe():
                    break
            except (OSError, ssl.SSLError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(0.2)
        elapsed = time.monotonic() - self.t0
        self.timings.append((what, elapsed))
        log(f"{what}: ready at {elapsed:.1f}s")

    def stop(self) -> None:
        """Stops the components one by one, newest first, so that each one's
        dependencies (the API server, etcd) are still there while it exits."""
        for name, proc in reversed(self.procs):
            if proc.poll() is not None:
                continue
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=20)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                log(f"{name} did not stop within 20s; killing it")
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        self.procs.clear()

    # -- start-up ----------------------------------------------------------
    def start(self) -> None:
        pki = self.dir / "pki"
        make_pki(pki)
        self.timings.append(("certificates", time.monotonic() - self.t0))

        (etcd_port, peer_port, api_port, kcm_port, sched_port, kwok_port) = free_ports(6)

        etcd_url = f"http://127.0.0.1:{etcd_port}"
        self.etcd_url = etcd_url
        peer_url = f"http://127.0.0.1:{peer_port}"
        self.spawn("etcd", [
            "etcd", "--name=default", f"--data-dir={self.dir / 'etcd'}",
            f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=default={peer_url}", "--initial-cluster-state=new",
            "--unsafe-no-fsync", "--log-level=warn",
        ])

        def etcd_healthy() -> bool:
            with _OPENER.open(f"{etcd_url}/health", timeout=2) as resp:
                return json.load(resp).get("health") == "true"
        self.wait_for("etcd", etcd_healthy, 60)

        self.tokens = {name: secrets.token_hex(24)
                       for name in ("admin", "controller-manager", "scheduler", "kwok")}
        identities = [
            ("admin", "tessera-admin", "system:masters"),
            ("controller-manager", "system:kube-controller-manager", ""),
            ("scheduler", "system:kube-scheduler", ""),
            # kwok stands in for the kubelets of every fake node.
            ("kwok", "kwok-controller", "system:masters"),
        ]
        token_file = pki / "tokens.csv"
        token_file.write_text("".join(
            f'{self.tokens[key]},{user},{user},"{groups}"\n' for key, user, groups in identities))
        token_file.chmod(0o600)

        self.server = f"https://127.0.0.1:{api_port}"
        self.spawn("kube-apiserver", [
            "kube-apiserver",
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1", f"--secure-port={api_port}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--token-auth-file={token_file}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            f"--service-account-issuer={ISSUER}",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            # The advertised address of the built-in "kubernetes" Service may
            # not be loopback; no test reaches the API server through it.
            "--endpoint-reconciler-type=none",
            f"--cert-dir={pki / 'generated'}",
            "--allow-privileged=true",
            "--profiling=false",
        ])
        ca = pki / "ca.crt"
        self.api = Api(self.server, self.tokens["admin"], str(ca))

        def apiserver_ready() -> bool:
            status, body = self.api.request("GET", "/readyz", timeout=5)
            return status == 200
        self.wait_for("kube-apiserver /readyz", apiserver_ready, 180)

        kubeconfigs = {}
        for key, user, _ in identities:
            path = self.dir / f"{key}.kubeconfig"
            write_kubeconfig(path, self.server, ca, user, self.tokens[key])
            kubeconfigs[key] = path

        kcm = kubeconfigs["controller-manager"]
        self.spawn("kube-controller-manager", [
            "kube-controller-manager",
            f"--kubeconfig={kcm}", f"--authentication-kubeconfig={kcm}",
            f"--authorization-kubeconfig={kcm}",
            "--bind-address=127.0.0.1", f"--secure-port={kcm_port}",
            "--leader-elect=false",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={ca}",
            f"--cluster-signing-cert-file={ca}", f"--cluster-signing-key-file={pki / 'ca.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--profiling=false",
        ])
        sched = kubeconfigs["scheduler"]
        if self.kube_scheduler:
            self.spawn("kube-scheduler", [
                "kube-scheduler",
                f"--kubeconfig={sched}", f"--authentication-kubeconfig={sched}",
                f"--authorization-kubeconfig={sched}",
                "--bind-address=127.0.0.1", f"--secure-port={sched_port}",
                "--leader-elect=false",
                "--profiling=false",
            ])
        self.spawn("kwok", [
            "kwok",
            f"--kubeconfig={kubeconfigs['kwok']}",
            f"--config={HERE / 'kwok-stages.yaml'}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}={FAKE_NODE_VALUE}",
            f"--cidr={POD_CIDR}",
            # kwok renews a Lease per node only when this is set (the default 0 means none);
            # without it the node lifecycle controller marks every fake node NotReady after
            # its grace period, in the middle of a long test.
            "--node-lease-duration-seconds=40",
            f"--server-address=127.0.0.1:{kwok_port}",
        ])

        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE  # self-signed loopback health endpoints
        local_tls = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                                urllib.request.HTTPSHandler(context=insecure))

        def healthz(opener, url):
            def probe() -> bool:
                with opener.open(url, timeout=2) as resp:
                    return resp.status == 200
            return probe
        if self.kube_scheduler:
            self.wait_for("kube-scheduler /healthz",
                          healthz(local_tls, f"https://127.0.0.1:{sched_port}/healthz"), 120)
        self.wait_for("kube-controller-manager /healthz",
                      healthz(local_tls, f"https://127.0.0.1:{kcm_port}/healthz"), 120)
        self.wait_for("kwok /healthz", healthz(_OPENER, f"http://127.0.0.1:{kwok_port}/healthz"),
                      120)

        # Pods can only be created once the service-account controller has
        # made the namespace's default ServiceAccount.
        def default_sa() -> bool:
            status, _ = self.api.get("/api/v1/namespaces/default/serviceaccounts/default")
            return status == 200
        self.wait_for("default ServiceAccount", default_sa, 120)

        self.write_env(kubeconfigs["admin"])
        log(f"control plane ready in {time.monotonic() - self.t0:.1f}s at {self.server}")

    def env(self) -> dict[str, str]:
        return {
            "KUBECONFIG": str(self.dir / "admin.kubeconfig"),
            "TESSERA_K8S_SERVER": self.server,
            "TESSERA_K8S_TOKEN": self.tokens["admin"],
            "TESSERA_K8S_CA": str(self.dir / "pki" / "ca.crt"),
            "TESSERA_K8S_BIN": str(self.bin),
            "TESSERA_K8S_WORKDIR": str(self.dir),
            "TESSERA_K8S_ETCD": self.etcd_url,
            "TESSERA_K8S_SCHEDULER_KUBECONFIG": str(self.dir / "scheduler.kubeconfig"),
        }

    def write_env(self, admin_kubeconfig: Path) -> None:
        lines = [f"export {k}='{v}'" for k, v in self.env().items()]
        (self.dir / "env.sh").write_text("\n".join(lines) + "\n")
        (self.dir / "env.sh").chmod(0o600)
        (self.dir / "timings.json").write_text(json.dumps(
            [{"phase": p, "seconds": round(s, 3)} for p, s in self.timings], indent=2) + "\n")


def find_bin(arg: str | None) -> Path:
    if arg:
        return Path(arg).resolve()
    if os.environ.get("TESSERA_K8S_BIN"):
        return Path(os.environ["TESSERA_K8S_BIN"]).resolve()
    out = subprocess.run([str(REPO / "scripts" / "k8s-setup.sh")], check=True,
                         stdout=subprocess.PIPE, text=True).stdout.strip()
    return Path(out.splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", help="directory with the binaries (default: build or reuse the cache)")
    parser.add_argument("--workdir", help="use this empty directory (kept) instead of a temporary one")
    parser.add_argument("--keep", action="store_true", help="keep the work directory afterwards")
    parser.add_argument("--no-kube-scheduler", action="store_true",
                        help="do not start kube-scheduler (a test starts its own)")
    for comp in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"):
        parser.add_argument(f"--{comp}-arg", action="append", default=[], metavar="ARG",
                            dest=comp.replace("-", "_"),
                            help=f"extra command-line argument for {comp} (repeatable)")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="command to run against the ready control plane")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command

    bin_dir = find_bin(args.bin)
    for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"):
        if not os.access(bin_dir / name, os.X_OK):
            log(f"missing {bin_dir / name}; run scripts/k8s-setup.sh")
            return 2

    if args.workdir:
        workdir = Path(args.workdir).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        keep = True
    else:
        workdir = Path(tempfile.mkdtemp(prefix="tessera-k8s-"))
        keep = args.keep

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)
    # SIGINT too: a shell starts background jobs with SIGINT ignored.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)

    extra = {comp: getattr(args, comp.replace("-", "_"))
             for comp in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
                          "kwok")}
    cp = ControlPlane(bin_dir, workdir, extra, kube_scheduler=not args.no_kube_scheduler)
    status = 1
    try:
        cp.start()
        if command:
            status = subprocess.run(command, env={**os.environ, **cp.env()}).returncode
        else:
            log(f"source {workdir / 'env.sh'} to use it; Ctrl-C stops it")
            while True:
                cp.check_alive()
                time.sleep(1)
    except KeyboardInterrupt:
        status = 130
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
    except RuntimeError as exc:
        log(f"error: {exc}")
        for name, _ in cp.procs:
            tail = cp.log_tail(name, 15)
            if tail:
                print(tail, file=sys.stderr)
        keep = True
        status = 1
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # let the shutdown finish
        cp.stop()
        if keep:
            log(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
