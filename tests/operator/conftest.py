"""Fixtures for the operator tests against a real Kubernetes API server (no kubelet).

- ``k8s_bins`` (session): ``scripts/k8s/build.sh`` builds (once, cached in ``.cache/k8s/``)
  kube-apiserver, kube-controller-manager, kubectl and helm. The API-server tests are skipped,
  with the build's output as the reason, only if kube-apiserver cannot be built; tests that
  need one of the others skip naming it.
- ``control_plane`` (session): etcd + kube-apiserver (+ kube-controller-manager) on loopback
  (``scripts/k8s/control_plane.py``), stopped by PID at the end.
- ``k8s``: a ``K8s`` helper (kubernetes client on the generated kubeconfig) with the CRDs
  applied; ``namespace``: a fresh namespace per test.
- ``operator`` (session): ``odradek operator`` as a subprocess (a real ``kopf run``), short
  intervals; its peak RSS is checked at teardown (≤ 150 MB) and written to its log directory.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import wait_until

ROOT = Path(__file__).resolve().parents[2]
OPERATOR_MEMORY_LIMIT_MB = 150


def _load_control_plane():
    spec = importlib.util.spec_from_file_location("odradek_k8s_control_plane", ROOT / "scripts/k8s/control_plane.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


control_plane_module = _load_control_plane()


def _build(name: str) -> tuple[Path | None, str]:
    proc = subprocess.run([str(ROOT / "scripts/k8s/build.sh"), name], capture_output=True, text=True,
                          timeout=3 * 3600, stdin=subprocess.DEVNULL)
    if proc.returncode == 0:
        return Path(proc.stdout.split()[-1]), ""
    return None, f"scripts/k8s/build.sh {name} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}"


@pytest.fixture(scope="session")
def k8s_bins() -> dict[str, Path | str]:
    """name -> path, or name -> the reason it could not be built."""
    out: dict[str, Path | str] = {}
    for name in ("kube-apiserver", "kube-controller-manager", "kubectl", "helm"):
        path, why = _build(name)
        out[name] = path if path else why
        if name == "kube-apiserver" and path is None:
            pytest.skip(f"the Kubernetes API server cannot be built here, so the operator tests against it "
                        f"do not run: {why}")
    return out


def need(bins: dict[str, Path | str], name: str) -> Path:
    value = bins[name]
    if not isinstance(value, Path):
        pytest.skip(f"{name} could not be built: {value}")
    return value


@pytest.fixture(scope="session")
def control_plane(k8s_bins, tmp_path_factory):
    kcm = k8s_bins["kube-controller-manager"]
    cp = control_plane_module.ControlPlane(tmp_path_factory.mktemp("k8s"), k8s_bins["kube-apiserver"],
                                           kcm if isinstance(kcm, Path) else None)
    cp.start()
    yield cp
    cp.stop()


class K8s:
    """Plain-dict access to the test API server."""

    def __init__(self, kubeconfig: Path) -> None:
        from kubernetes import client, config

        from odradek.operator.kube import Kube
        self.api = config.new_client_from_config(str(kubeconfig))
        self.kube = Kube(self.api)
        self.core = client.CoreV1Api(self.api)
        self.ApiException = client.exceptions.ApiException

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
             query: list | None = None) -> Any:
        return self.kube.request(method, path, body, query, content_type)

    def get(self, path: str) -> dict | None:
        try:
            return self.call("GET", path)
        except self.ApiException as e:
            if e.status == 404:
                return None
            raise

    def apply(self, path: str, obj: dict) -> dict:
        return self.call("PATCH", path, obj, "application/apply-patch+yaml",
                         [("fieldManager", "odradek-tests"), ("force", "true")])

    def merge(self, path: str, patch: dict) -> dict:
        return self.call("PATCH", path, patch, "application/merge-patch+json")

    def delete(self, path: str) -> None:
        try:
            self.call("DELETE", path)
        except self.ApiException as e:
            if e.status != 404:
                raise

    # -- Odradek resources -----------------------------------------------------------------
    @staticmethod
    def cr_path(namespace: str, plural: str, name: str | None = None) -> str:
        base = f"/apis/odradek.dev/v1alpha1/namespaces/{namespace}/{plural}"
        return f"{base}/{name}" if name else base

    def apply_cluster(self, namespace: str, name: str, spec: dict, annotations: dict | None = None) -> dict:
        obj = {"apiVersion": "odradek.dev/v1alpha1", "kind": "OdradekCluster",
               "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}}, "spec": spec}
        return self.apply(self.cr_path(namespace, "odradekclusters", name), obj)

    def apply_topic(self, namespace: str, name: str, spec: dict) -> dict:
        obj = {"apiVersion": "odradek.dev/v1alpha1", "kind": "OdradekTopic",
               "metadata": {"name": name, "namespace": namespace}, "spec": spec}
        return self.apply(self.cr_path(namespace, "odradektopics", name), obj)

    def cluster(self, namespace: str, name: str) -> dict | None:
        return self.get(self.cr_path(namespace, "odradekclusters", name))

    def topic(self, namespace: str, name: str) -> dict | None:
        return self.get(self.cr_path(namespace, "odradektopics", name))

    def child(self, namespace: str, kind: str, name: str) -> dict | None:
        group = {"StatefulSet": "apis/apps/v1", "Deployment": "apis/apps/v1", "PodDisruptionBudget": "apis/policy/v1"}
        plural = {"StatefulSet": "statefulsets", "Deployment": "deployments", "PodDisruptionBudget": "poddisruptionbudgets",
                  "Service": "services", "ConfigMap": "configmaps", "Pod": "pods",
                  "PersistentVolumeClaim": "persistentvolumeclaims"}[kind]
        return self.get(f"/{group.get(kind, 'api/v1')}/namespaces/{namespace}/{plural}/{name}")


def condition(obj: dict | None, type_: str) -> dict | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return c
    return None


@pytest.fixture(scope="session")
def k8s(control_plane, k8s_bins) -> K8s:
    k = K8s(control_plane.kubeconfig)
    kubectl = k8s_bins["kubectl"]
    if isinstance(kubectl, Path):  # the way users install them
        subprocess.run([str(kubectl), "apply", "--server-side", "-f", str(ROOT / "crds")], check=True,
                       capture_output=True, env={**os.environ, **control_plane.env()}, timeout=60)
    else:
        for path in sorted((ROOT / "crds").glob("*.yaml")):
            crd = yaml.safe_load(path.read_text())
            k.apply(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}", crd)
    for plural in ("odradekclusters", "odradektopics"):
        wait_until(lambda: any(c["type"] == "Established" and c["status"] == "True" for c in
                               (k.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.odradek.dev")
                                or {}).get("status", {}).get("conditions", [])), 30, f"CRD {plural} established")
    return k


@pytest.fixture
def namespace(k8s) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    k8s.core.create_namespace({"metadata": {"name": name}})
    return name


def _rss_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


class OperatorProcess:
    def __init__(self, proc: subprocess.Popen, log: Path) -> None:
        self.proc, self.log = proc, log

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def peak_rss_mb(self) -> float:
        return _rss_kb(self.proc.pid, "VmHWM") / 1024


@pytest.fixture(scope="session")
def operator(k8s, control_plane, tmp_path_factory):
    logdir = tmp_path_factory.mktemp("operator")
    log = logdir / "operator.log"
    env = {**os.environ, **control_plane.env(), "ODRADEK_OPERATOR_STATUS_INTERVAL": "1",
           "ODRADEK_OPERATOR_DRIFT_INTERVAL": "2", "ODRADEK_OPERATOR_RETRY_DELAY": "1"}
    env.pop("ODRADEK_OPERATOR_CONTROLLER_URL", None)
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "odradek.cli", "operator", "--all-namespaces"],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=ROOT)
    op = OperatorProcess(proc, log)
    try:
        # kopf logs "Activity 'configure' succeeded." once the startup handler ran.
        wait_until(lambda: proc.poll() is not None or "'configure' succeeded" in log.read_text(),
                   60, "the operator to start", 0.2)
        if proc.poll() is not None:
            raise AssertionError(f"the operator exited {proc.returncode}:\n{op.log_tail()}")
        yield op
    finally:
        peak = op.peak_rss_mb() if proc.poll() is None else None
        control_plane_module.terminate(proc, 15)
        if peak is not None:
            (logdir / "memory.json").write_text(json.dumps({"peak_rss_mb": peak}))
            print(f"\noperator peak RSS (VmHWM): {peak:.1f} MB")
            assert peak <= OPERATOR_MEMORY_LIMIT_MB, f"operator peak RSS {peak:.1f} MB > {OPERATOR_MEMORY_LIMIT_MB} MB"


class FakeController:
    """A stand-in for the active controller's ``/internal/v1`` health and cluster answers, so a
    test can report under-replicated partitions and replica placement at will."""

    def __init__(self) -> None:
        import http.server
        import threading

        fake = self
        self.under_replicated = 0
        self.topics: list[dict] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's naming)
                if self.path == "/internal/v1/health":
                    body = {"id": "fake-0", "url": fake.url, "active": True, "epoch": 1,
                            "under_replicated_partitions": fake.under_replicated}
                elif self.path == "/internal/v1/cluster":
                    body = {"cluster_id": "fake", "controller_id": "fake-0", "controller_epoch": 1, "brokers": [],
                            "topics": fake.topics, "under_replicated_partitions": fake.under_replicated}
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_controller():
    fake = FakeController()
    yield fake
    fake.close()
