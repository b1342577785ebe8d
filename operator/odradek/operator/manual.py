"""Manual rolls and the safety check every broker restart passes (docs/kubernetes.md, "Manual
rolling updates" and "Evictions and node drains").

``odradek.dev/manual-rolling-update: "true"`` (Strimzi's ``strimzi.io/manual-rolling-update``):
on a broker pod it asks the operator to restart that pod; on the OdradekCluster, every broker
pod. The eviction webhook (``evictions``) sets the pod's annotation for an eviction it denies.
The cluster's annotation is spread onto the pods and removed at once (``spread_cluster_request``);
a pod's goes with the pod: the StatefulSet recreates it from the template, which has none.
Pods are not watched: the status timer notices marked pods (``pending``) and names them in the
cluster's ``odradek.dev/manual-rolling-update-pending`` annotation, which runs the reconcile.
The cluster's own annotation is removed inside that reconcile, so the pods' marks (and the
timer) carry the roll on.
Marked pods are rolled by ``rolling.plan_roll`` like outdated ones, one at a time, highest
ordinal first.

``below_min_isr`` is the check of Strimzi's KafkaRoller: a broker may restart only when no
partition it is in the ISR of would drop below min.insync.replicas (the controller's view of
the ISRs). A partition whose min.insync.replicas is at least its replication factor is left out:
no restart can ever keep it writable (replication factor 1, or min.insync.replicas = RF), so it
would block every roll for ever; Strimzi documents the same exception.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from odradek.operator import admin
from odradek.operator.rolling import MANUAL_ROLL

MIN_ISR = "min.insync.replicas"
PENDING = "odradek.dev/manual-rolling-update-pending"   # on the cluster, set by the operator


def requested(meta: Mapping[str, Any]) -> bool:
    return ((meta.get("annotations") or {}).get(MANUAL_ROLL) or "").lower() == "true"


def below_min_isr(metadata: Mapping[str, Any], default_min_isr: int) -> dict[int, list[str]]:
    """Broker id -> the partitions (``topic-p``) its restart would take below min.insync.replicas."""
    out: dict[int, list[str]] = {}
    for topic in metadata.get("topics") or []:
        min_isr = int((topic.get("configs") or {}).get(MIN_ISR, default_min_isr))
        for p in topic.get("partitions") or []:
            isr = p.get("isr") or []
            if min_isr >= len(p.get("replicas") or []) or len(isr) - 1 >= min_isr:
                continue
            for broker in isr:
                out.setdefault(broker, []).append(f"{topic['name']}-{p['partition']}")
    return out


def roll_safety(client: admin.ControllerClient, default_min_isr: int) -> tuple[int | None, dict[int, list[str]] | None]:
    """The controller's under-replicated count and ``below_min_isr`` (None, None: unreachable)."""
    try:
        view = client.cluster()
    except (admin.Unreachable, admin.AdminError):
        return None, None
    return view.get("under_replicated_partitions"), below_min_isr(view, default_min_isr)


def spread_cluster_request(kube: Any, cluster: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> list[str]:
    """A cluster marked for a manual roll: mark each broker pod, then unmark the cluster; the
    pods marked (none when the cluster is not marked)."""
    meta = cluster["metadata"]
    if not requested(meta):
        return []
    marked = []
    for pod in pods:
        if not pod["metadata"].get("deletionTimestamp"):
            mark_pod(kube, meta["namespace"], pod["metadata"]["name"])
            marked.append(pod["metadata"]["name"])
    kube.merge_patch("odradek.dev/v1alpha1", "OdradekCluster", meta["namespace"], meta["name"],
                     {"metadata": {"annotations": {MANUAL_ROLL: None}}})
    return marked


def mark_pod(kube: Any, namespace: str, pod: str) -> None:
    kube.merge_patch("v1", "Pod", namespace, pod, {"metadata": {"annotations": {MANUAL_ROLL: "true"}}})


def pending(kube: Any, cluster: str, namespace: str) -> str | None:
    """The broker pods marked for a manual roll, as ``name:uid`` (a pod recreated under the same
    name is another pod), comma-separated; None: none. The status timer writes a new value into
    the cluster's ``PENDING`` annotation, and the change runs the update handler, which rolls
    them (pods are not watched). The annotation is never removed: an annotation set and unset
    within one handling would leave kopf an empty diff, and a delayed handler unresumed."""
    selector = f"app.kubernetes.io/instance={cluster},app.kubernetes.io/component=broker"
    names = sorted(f"{p['metadata']['name']}:{p['metadata'].get('uid', '')[:8]}"
                   for p in kube.list("v1", "Pod", namespace, selector)
                   if requested(p["metadata"]) and not p["metadata"].get("deletionTimestamp"))
    return ",".join(names) or None
