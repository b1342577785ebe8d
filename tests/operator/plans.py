"""Helpers of the operator's unit tests: a cluster's children as the reconcile plans them
(``validation.parse_cluster``, ``principals.security_plan``, ``builders``), without a cluster."""

from __future__ import annotations

from typing import Any, Mapping

from odradek.operator import builders, principals
from odradek.operator.security import SecurityPlan
from odradek.operator.spec import ClusterSpec
from odradek.operator.validation import parse_cluster

VERSIONS = {"broker": "broker-v1", "controller": "controller-v1", "gateway": "gateway-v1", "operator": "operator-v1",
            "zookeeper": "zookeeper-v1"}


def cluster_spec(raw: Mapping[str, Any] | None = None) -> ClusterSpec:
    return parse_cluster(raw or {})


def security(spec: ClusterSpec, cluster: str = "c", versions: Mapping[str, str] = VERSIONS) -> SecurityPlan:
    return principals.security_plan(cluster, spec.listeners, versions, spec.zookeeper.managed is not None)


def children(cluster: str, namespace: str, raw: Mapping[str, Any] | None = None,
             versions: Mapping[str, str] = VERSIONS, **kwargs: Any) -> list[dict]:
    """``builders.build_children`` for the spec ``raw`` with its security plan: what is applied."""
    spec = cluster_spec(raw)
    return builders.build_children(cluster, namespace, spec, security(spec, cluster, versions), **kwargs)


def probe_paths(container: Mapping[str, Any]) -> list[str]:
    """The routes a container's readiness probe asks, in order: an ``exec`` probe's ``--path``
    values (``odradek operator probe``), else the ``httpGet`` path."""
    probe = container["readinessProbe"]
    if "httpGet" in probe:
        return [probe["httpGet"]["path"]]
    command = probe["exec"]["command"]
    return [command[i + 1] for i, part in enumerate(command) if part == "--path"]
