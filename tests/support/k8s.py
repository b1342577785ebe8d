"""Kubernetes for the operator tests (and its bench): the Kubernetes binaries, the loopback
control plane, plain-dict access to the API server, and the operator's process.

- ``build(name)``: ``scripts/k8s/build.sh`` builds (once, cached in ``.cache/k8s/``) a binary;
  ``need`` skips a test whose binary could not be built.
- ``control_plane_module``: ``scripts/k8s/control_plane.py`` (etcd + kube-apiserver
  [+ kube-controller-manager] on loopback), loaded from its path.
- ``K8s``: the kubernetes client on a kubeconfig, with helpers for Odradek's resources;
  ``condition`` picks a status condition by type.
- ``OperatorProcess``: ``odradek operator`` as a subprocess, its log and peak RSS.
"""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest
from tests.support.tools import tool_missing

ROOT = Path(__file__).resolve().parents[2]


def _load_control_plane():
    spec = importlib.util.spec_from_file_location("odradek_k8s_control_plane", ROOT / "scripts/k8s/control_plane.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


control_plane_module = _load_control_plane()


def build(name: str) -> tuple[Path | None, str]:
    proc = subprocess.run([str(ROOT / "scripts/k8s/build.sh"), name], capture_output=True, text=True,
                          timeout=3 * 3600, stdin=subprocess.DEVNULL)
    if proc.returncode == 0:
        return Path(proc.stdout.split()[-1]), ""
    return None, f"scripts/k8s/build.sh {name} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}"


def need(bins: dict[str, Path | str], name: str) -> Path:
    value = bins[name]
    if not isinstance(value, Path):
        tool_missing(f"{name} could not be built: {value}")
    return value


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

    def apply_user(self, namespace: str, name: str, cluster: str, spec: dict) -> dict:
        """An OdradekUser naming its cluster by the label, as Strimzi's KafkaUser does."""
        obj = {"apiVersion": "odradek.dev/v1alpha1", "kind": "OdradekUser",
               "metadata": {"name": name, "namespace": namespace, "labels": {"odradek.dev/cluster": cluster}},
               "spec": spec}
        return self.apply(self.cr_path(namespace, "odradekusers", name), obj)

    def user(self, namespace: str, name: str) -> dict | None:
        return self.get(self.cr_path(namespace, "odradekusers", name))

    def cluster(self, namespace: str, name: str) -> dict | None:
        return self.get(self.cr_path(namespace, "odradekclusters", name))

    def topic(self, namespace: str, name: str) -> dict | None:
        return self.get(self.cr_path(namespace, "odradektopics", name))

    def child(self, namespace: str, kind: str, name: str) -> dict | None:
        group = {"StatefulSet": "apis/apps/v1", "Deployment": "apis/apps/v1", "PodDisruptionBudget": "apis/policy/v1"}
        plural = {"StatefulSet": "statefulsets", "Deployment": "deployments", "PodDisruptionBudget": "poddisruptionbudgets",
                  "Service": "services", "ConfigMap": "configmaps", "Pod": "pods",
                  "PersistentVolumeClaim": "persistentvolumeclaims", "Secret": "secrets"}[kind]
        return self.get(f"/{group.get(kind, 'api/v1')}/namespaces/{namespace}/{plural}/{name}")


def ready_check(get: Callable[[], dict | None], generation: int | None = None) -> Callable[[], dict | None]:
    """A ``wait_until`` check: the resource ``get()`` reads, once its Ready condition is True
    (and its status reports ``generation``, when given)."""
    def check() -> dict | None:
        obj = get()
        c = condition(obj, "Ready")
        if c and c["status"] == "True" and (generation is None or obj["status"].get("observedGeneration") == generation):
            return obj
        return None
    return check


def condition(obj: dict | None, type_: str) -> dict | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return c
    return None


def _rss_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


class OperatorProcess:
    def __init__(self, proc: subprocess.Popen, log: Path, metrics_url: str | None = None) -> None:
        self.proc, self.log, self.metrics_url = proc, log, metrics_url

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def peak_rss_mb(self) -> float:
        return _rss_kb(self.proc.pid, "VmHWM") / 1024
