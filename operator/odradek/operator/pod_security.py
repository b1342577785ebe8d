"""The security contexts of every pod an OdradekCluster runs (brokers, controllers, gateways,
ZooKeeper): Kubernetes' *restricted* Pod Security Standard, as Strimzi's operands run.

Every pod: ``runAsNonRoot``, the runtime's default seccomp profile. Every container (init
containers too): no privilege escalation, every capability dropped, a read-only root
filesystem, the same seccomp profile. What a process writes goes to volumes: the brokers'
data (their claim or emptyDir), the Secrets and emptyDirs the builders mount, and an emptyDir
per directory listed in ``WRITABLE`` (``/tmp`` everywhere: Python's ``tempfile``, the JVM's
``hsperfdata``; ZooKeeper's entrypoint writes ``zoo.cfg`` into ``/conf`` and the official
image logs under ``/logs``). Python writes no bytecode (the image sets
``PYTHONDONTWRITEBYTECODE``; its packages are compiled at build time).

The official ``zookeeper`` image starts as root and drops to its ``zookeeper`` user (uid
1000) with gosu; a non-root pod starts it as that user directly (``ZOOKEEPER_USER``), which
the image's entrypoint supports (it skips its chown and gosu).

``harden(pod, component)`` is applied by ``builders`` to each pod spec it builds, before the
user's ``spec.template.pod`` overrides (which may replace the pod-level ``securityContext``,
never the containers').
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

RUNTIME_DEFAULT = {"type": "RuntimeDefault"}
CONTAINER = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
             "capabilities": {"drop": ["ALL"]}, "seccompProfile": RUNTIME_DEFAULT}
ZOOKEEPER_USER = 1000
# component -> the directories its containers write outside their volumes (each an emptyDir)
WRITABLE: Mapping[str, tuple[str, ...]] = {"zookeeper": ("/tmp", "/conf", "/logs")}
DEFAULT_WRITABLE = ("/tmp",)


def pod_context(component: str, existing: Mapping[str, Any] | None = None) -> dict:
    """The pod-level ``securityContext`` (``existing``: what the builder set, e.g. ``fsGroup``)."""
    out = {**(existing or {}), "runAsNonRoot": True, "seccompProfile": dict(RUNTIME_DEFAULT)}
    if component == "zookeeper":
        out |= {"runAsUser": ZOOKEEPER_USER, "runAsGroup": ZOOKEEPER_USER, "fsGroup": ZOOKEEPER_USER}
    return out


def container_context(existing: Mapping[str, Any] | None = None) -> dict:
    return {**(existing or {}), **copy.deepcopy(CONTAINER)}


def _volume_name(path: str) -> str:
    return "writable-" + path.strip("/").replace("/", "-")


def harden(pod: dict, component: str) -> None:
    """Give ``pod`` (a pod spec being built) the restricted contexts and an emptyDir for each
    directory its containers write (unless a volume is already mounted there)."""
    pod["securityContext"] = pod_context(component, pod.get("securityContext"))
    volumes = pod.setdefault("volumes", [])
    for container in (*pod.get("initContainers", []), *pod["containers"]):
        container["securityContext"] = container_context(container.get("securityContext"))
        mounted = {m["mountPath"] for m in container.get("volumeMounts", [])}
        for path in WRITABLE.get(component, DEFAULT_WRITABLE):
            if path in mounted:
                continue
            name = _volume_name(path)
            container.setdefault("volumeMounts", []).append({"name": name, "mountPath": path})
            if all(v["name"] != name for v in volumes):
                volumes.append({"name": name, "emptyDir": {}})
