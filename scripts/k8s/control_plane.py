"""A local Kubernetes control plane on loopback, the way controller-runtime's envtest runs one:
etcd + kube-apiserver (+ kube-controller-manager when built), no kubelet, so no pod ever runs.

    python scripts/k8s/control_plane.py start [--dir DIR] [--no-controller-manager]
    python scripts/k8s/control_plane.py stop  [--dir DIR]

``start`` prints ``export KUBECONFIG=...``; state (PIDs, ports) is kept in ``DIR/state.json``
(default ``.cache/k8s/run``). The tests import ``ControlPlane`` from this file.

- Binaries: ``scripts/k8s/build.sh`` (built once from the Go module proxy, cached in
  ``.cache/k8s/``); etcd from PATH (Debian's etcd-server 3.4.23; it has no
  ``--unsafe-no-fsync``, so its data directory goes to /dev/shm when there is one).
- Ports: etcd and kube-apiserver cannot bind port 0 and report, so each gets a candidate port
  below the ephemeral range (``odradek.dev.processes.candidate_port``) and is started again on
  another when it exits with "address already in use"; kube-controller-manager serves no port.
- kube-apiserver: 127.0.0.1, self-signed serving certificate (``--cert-dir``),
  a static token for an admin in ``system:masters`` (``--token-auth-file``), RBAC, a
  generated RSA service-account key (issuer ``https://kubernetes.default.svc``). The
  ServiceAccount admission plugin is off (no token controller without a controller manager).
- kube-controller-manager (optional): garbage collector, StatefulSet/Deployment/ReplicaSet,
  EndpointSlice controllers, so owner-reference cascades and StatefulSet -> Pod/PVC happen.
Every process started is stopped by PID (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from odradek.dev.processes import candidate_port
from odradek.dev.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "scripts" / "k8s" / "build.sh"
DEFAULT_DIR = ROOT / ".cache" / "k8s" / "run"
KCM_CONTROLLERS = "garbage-collector-controller,statefulset-controller,deployment-controller,replicaset-controller,endpointslice-controller,persistentvolume-expander-controller"


PORT_ATTEMPTS = 5


def free_port() -> int:
    """A port free now (the e2e node's processes, in the node's own network namespace)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def terminate(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM a child, SIGKILL it after ``grace`` seconds; reap it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def binaries(names: tuple[str, ...] = ("kube-apiserver",)) -> dict[str, Path]:
    """Paths of the cached binaries, building the missing ones (``build.sh`` prints paths)."""
    out = subprocess.run([str(BUILD), *names], check=True, capture_output=True, text=True, timeout=3 * 3600).stdout
    paths = [Path(line) for line in out.split() if line.strip()]
    return dict(zip(names, paths))


class ControlPlane:
    def __init__(self, workdir: Path, kube_apiserver: Path, kube_controller_manager: Path | None = None,
                 address: str = "127.0.0.1", prefix: tuple[str, ...] = (), with_nodes: bool = False) -> None:
        """``address``/``prefix``/``with_nodes`` serve the e2e node (e2e/local_node.py): the API
        server on the node's address, every process started through ``prefix`` (``nsenter`` into
        its network namespace), and what pods need: ServiceAccount tokens, the root CA published,
        every default controller."""
        self.dir = Path(workdir)
        self.address, self.prefix, self.with_nodes = address, tuple(prefix), with_nodes
        self.apiserver_bin = kube_apiserver
        self.kcm_bin = kube_controller_manager
        self.procs: dict[str, subprocess.Popen] = {}
        self.pids: dict[str, int] = {}
        self.token = secrets.token_hex(16)
        self.port = 0
        self.kubeconfig = self.dir / "kubeconfig"

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, timeout: float = 90.0) -> "ControlPlane":
        self.dir.mkdir(parents=True, exist_ok=True)
        try:
            self._on_free_ports(self._start_etcd)
            self._on_free_ports(lambda: self._start_apiserver(timeout))
            if self.kcm_bin:
                self._start_kcm()
        except BaseException:
            self.stop()
            raise
        return self

    def _on_free_ports(self, start) -> None:
        """``start()``, again (on other candidate ports) while its process exits because a port was taken."""
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                return start()
            except RuntimeError as e:
                if "address already in use" not in str(e) or attempt == PORT_ATTEMPTS:
                    raise
                print(f"control plane: a port was taken ({str(e).splitlines()[0]}); trying others", file=sys.stderr)

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(self.dir / f"{name}.log", "ab")
        proc = subprocess.Popen([*self.prefix, *argv], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        log.close()
        self.procs[name], self.pids[name] = proc, proc.pid
        return proc

    def _start_etcd(self) -> None:
        shm = Path("/dev/shm")
        base = Path(os.environ.get("ODRADEK_ETCD_DIR", shm if shm.is_dir() and os.access(shm, os.W_OK) else self.dir))
        self.etcd_data = base / f"odradek-etcd-{os.getpid()}-{secrets.token_hex(4)}"
        client, peer = candidate_port(), candidate_port()
        self.etcd_url = f"http://{self.address}:{client}"
        self._spawn("etcd", [shutil.which("etcd") or "etcd", "--name", "default", "--data-dir", str(self.etcd_data),
                             "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
                             "--listen-peer-urls", f"http://{self.address}:{peer}",
                             "--initial-advertise-peer-urls", f"http://{self.address}:{peer}",
                             "--initial-cluster", f"default=http://{self.address}:{peer}",
                             "--quota-backend-bytes", str(2 * 1024**3), "--log-level", "warn"])
        self._until(lambda: urllib.request.urlopen(f"{self.etcd_url}/health", timeout=2).status == 200,
                   30, "etcd", "etcd")

    def _start_apiserver(self, timeout: float) -> None:
        certs = self.dir / "certs"
        certs.mkdir(exist_ok=True)
        sa_key = self.dir / "sa.key"
        if not sa_key.exists():
            subprocess.run(["openssl", "genrsa", "-out", str(sa_key), "2048"], check=True, capture_output=True)
        tokens = self.dir / "tokens.csv"
        tokens.write_text(f'{self.token},admin,admin,"system:masters"\n')
        self.port = candidate_port()
        node_args = ["--kubelet-preferred-address-types", "InternalIP"] if self.with_nodes \
            else ["--disable-admission-plugins", "ServiceAccount"]
        self._spawn("kube-apiserver", [
            str(self.apiserver_bin), "--bind-address", self.address, "--advertise-address", self.address,
            "--secure-port", str(self.port), "--cert-dir", str(certs),
            "--etcd-servers", self.etcd_url, "--token-auth-file", str(tokens),
            "--authorization-mode", "RBAC", "--service-cluster-ip-range", "10.96.0.0/16",
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-account-key-file", str(sa_key), "--service-account-signing-key-file", str(sa_key),
            *node_args, "--allow-privileged",
            "--enable-priority-and-fairness=false", "--profiling=false", "--v=1"])
        self.url = f"https://{self.address}:{self.port}"
        self._until(lambda: self._get("/readyz") == 200, timeout, "kube-apiserver /readyz", "kube-apiserver")
        self._write_kubeconfig()

    def _start_kcm(self) -> None:
        controllers = ["--controllers", "*", "--root-ca-file", str(self.dir / "certs" / "apiserver.crt")] \
            if self.with_nodes else ["--controllers", KCM_CONTROLLERS]
        self._spawn("kube-controller-manager", [
            str(self.kcm_bin), "--kubeconfig", str(self.kubeconfig), "--leader-elect=false",
            "--bind-address", "127.0.0.1", "--secure-port", "0",  # nothing reads its health: no port
            *controllers, "--concurrent-gc-syncs", "5",
            "--service-account-private-key-file", str(self.dir / "sa.key"), "--v=1"])
        time.sleep(0.5)
        if self.procs["kube-controller-manager"].poll() is not None:
            raise RuntimeError("kube-controller-manager exited:\n" + self.log_tail("kube-controller-manager"))

    def _ssl(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx

    def _get(self, path: str) -> int:
        req = urllib.request.Request(f"{self.url}{path}", headers={"Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(req, timeout=3, context=self._ssl()) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def _write_kubeconfig(self) -> None:
        ca = self.dir / "certs" / "apiserver.crt"
        cluster = {"server": self.url}
        if ca.exists():
            cluster["certificate-authority"] = str(ca)
        else:
            cluster["insecure-skip-tls-verify"] = True
        config = {"apiVersion": "v1", "kind": "Config", "current-context": "odradek-test",
                  "clusters": [{"name": "odradek-test", "cluster": cluster}],
                  "users": [{"name": "admin", "user": {"token": self.token}}],
                  "contexts": [{"name": "odradek-test", "context": {"cluster": "odradek-test", "user": "admin",
                                                                     "namespace": "default"}}]}
        self.kubeconfig.write_text(json.dumps(config, indent=2))  # JSON is YAML

    def _until(self, check, timeout: float, what: str, proc_name: str) -> None:
        """``check()`` true within ``timeout``, failing at once (with its log) if ``proc_name`` exits."""
        def ready():
            if self.procs[proc_name].poll() is not None:
                raise RuntimeError(f"{proc_name} exited with {self.procs[proc_name].returncode}:\n"
                                   + self.log_tail(proc_name))
            return check()
        try:
            wait_until(ready, timeout, what, 0.2, retry_on=(OSError,))  # not listening yet
        except TimeoutError as e:
            raise TimeoutError(f"{e}:\n" + self.log_tail(proc_name)) from None

    def log_tail(self, name: str, lines: int = 40) -> str:
        path = self.dir / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM each process started (reverse order), SIGKILL after 10 s; remove etcd's data."""
        for name in reversed(list(self.procs)):
            terminate(self.procs[name])
        self.procs.clear()
        if getattr(self, "etcd_data", None):
            shutil.rmtree(self.etcd_data, ignore_errors=True)

    def env(self) -> dict[str, str]:
        return {"KUBECONFIG": str(self.kubeconfig)}


# -- command line: start in the background, stop by the recorded PIDs ------------------------

def _main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["start", "stop"])
    p.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    p.add_argument("--no-controller-manager", action="store_true")
    a = p.parse_args(argv)
    state = a.dir / "state.json"
    if a.command == "stop":
        if not state.exists():
            print("not running", file=sys.stderr)
            return 0
        st = json.loads(state.read_text())
        for name, pid in reversed(list(st["pids"].items())):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            for _ in range(100):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(st.get("etcd_data", ""), ignore_errors=True)
        state.unlink()
        return 0
    names = ("kube-apiserver",) if a.no_controller_manager else ("kube-apiserver", "kube-controller-manager")
    bins = binaries(names)
    cp = ControlPlane(a.dir, bins["kube-apiserver"], bins.get("kube-controller-manager")).start()
    state.write_text(json.dumps({"pids": cp.pids, "etcd_data": str(cp.etcd_data), "url": cp.url}))
    print(f"export KUBECONFIG={cp.kubeconfig}")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
