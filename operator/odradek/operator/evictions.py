"""Evictions of broker pods become the operator's safe rolls (Strimzi Drain Cleaner's model;
docs/kubernetes.md, "Evictions and node drains").

The validating webhook on ``pods/eviction`` (``webhook.AdmissionServer`` serves it on every
operator replica, standbys included: ``start``) asks ``decide`` about each eviction. A broker pod of an OdradekCluster in a namespace this operator watches is marked
with ``odradek.dev/manual-rolling-update`` and the eviction is denied with 429, the code a
PodDisruptionBudget denial has, so ``kubectl drain`` and the cluster autoscaler retry it as
they would a budget's; the operator then restarts the pod itself (``rolling.plan_roll``)
once no partition would drop below min.insync.replicas, and the StatefulSet recreates it on a
schedulable node. Marking is idempotent, so any replica may answer. Every other eviction (other pods, other operators' brokers, a pod already
terminating, a cluster being deleted) is allowed untouched. A dry-run eviction marks nothing.
"""

from __future__ import annotations

import fnmatch
import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from odradek.operator import builders, kube, manual, webhook
from odradek.operator.kube import COMPONENT_LABEL, MANAGED_BY
from odradek.operator.settings import OperatorSettings

PATH = "evictions"          # the webhook's path: /evictions
DENIED = 429                # TooManyRequests: a disruption not allowed now (as a PDB answers)

log = logging.getLogger("odradek.operator.evictions")


@dataclass(frozen=True)
class EvictionDecision:
    allow: bool
    reason: str
    mark: bool = False      # set the pod's manual-roll annotation


def decide(pod: Mapping[str, Any] | None, watched: Callable[[str], bool],
           cluster: Callable[[str, str], Mapping[str, Any] | None]) -> EvictionDecision:
    """``watched(namespace)``: this operator's namespaces; ``cluster(namespace, name)``: the
    OdradekCluster, None when absent."""
    if pod is None:
        return EvictionDecision(True, "no such pod")
    meta = pod["metadata"]
    labels = meta.get("labels") or {}
    owner = labels.get(builders.CLUSTER_LABEL)
    if labels.get(COMPONENT_LABEL) != "broker" or labels.get(MANAGED_BY[0]) != MANAGED_BY[1] or not owner:
        return EvictionDecision(True, f"{meta['name']} is not an Odradek broker pod")
    if not watched(meta["namespace"]):
        return EvictionDecision(True, f"namespace {meta['namespace']} is not watched by this operator")
    if meta.get("deletionTimestamp"):
        return EvictionDecision(True, f"{meta['name']} is already terminating")
    body = cluster(meta["namespace"], owner)
    if body is None or body["metadata"].get("deletionTimestamp"):
        return EvictionDecision(True, f"OdradekCluster {owner} is gone or being deleted")
    return EvictionDecision(False, f"broker pod {meta['name']} is restarted by the Odradek operator instead, "
                                   "once no partition would drop below min.insync.replicas; retry the eviction",
                            mark=not manual.requested(meta))


def review(api: kube.Kube, name: str, namespace: str, dryrun: bool, watched: Callable[[str], bool]) -> EvictionDecision:
    """Decide on the eviction of pod ``namespace/name`` and mark the pod (unless a dry run)."""
    verdict = decide(api.get("v1", "Pod", namespace, name), watched,
                     lambda ns, c: api.get("odradek.dev/v1alpha1", "OdradekCluster", ns, c))
    if verdict.mark and not dryrun:
        manual.mark_pod(api, namespace, name)
    return verdict


def answer(api: kube.Kube, request: Mapping[str, Any], watched: Callable[[str], bool]) -> webhook.Answer:
    """The webhook's answer to an AdmissionReview ``request`` on pods/eviction."""
    if request.get("subResource") != "eviction":
        return webhook.Answer(True)
    name, namespace = request["name"], request["namespace"]
    verdict = review(api, name, namespace, bool(request.get("dryRun")), watched)
    log.info("eviction of %s/%s %s: %s", namespace, name, "allowed" if verdict.allow else "denied", verdict.reason)
    return webhook.Answer(verdict.allow, "" if verdict.allow else verdict.reason, DENIED)


def start(own: OperatorSettings, namespaces: tuple[str, ...] = ()) -> webhook.AdmissionServer | None:
    """With ``own.webhook_listen`` set: the certificate (issued when missing or due), its CA
    published, the webhook served from now on (in threads, for the process's life).
    ``namespaces``: the operator's (kopf's globs; none: all)."""
    if not own.webhook_listen:
        return None
    api = kube.shared()

    def watched(namespace: str) -> bool:
        return not namespaces or any(fnmatch.fnmatchcase(namespace, glob) for glob in namespaces)

    ns, _, secret = own.webhook_secret.rpartition("/")

    def read() -> dict[str, bytes]:
        return webhook.serving_certificate(api, ns or "default", secret, own.webhook_hosts)

    def publish(ca: bytes) -> int:
        return webhook.publish_ca(api, own.webhook_configuration, ca)

    data = read()
    published = publish(data["ca.crt"])
    server = webhook.AdmissionServer(own.webhook_listen, data, {PATH: lambda r: answer(api, r, watched)})
    threading.Thread(target=webhook.keep_fresh, args=(server, read, publish, threading.Event()),
                     daemon=True, name="webhook-certificate").start()
    log.info("eviction webhook on %s; its CA in %d webhooks of %s", own.webhook_listen, published,
             own.webhook_configuration)
    return server
