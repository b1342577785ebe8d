"""kopf handlers for OdradekCluster and OdradekTopic: a few lines each, delegating to
``reconcile`` and mapping its outcomes onto kopf (PermanentError for invalid specs with the
reason in status, TemporaryError while waiting) and onto status conditions.

Settings: progress and diff-base are kept in ``operator.odradek.dev/*`` annotations (the CRDs' status
schemas are structural, so kopf's default ``status.kopf`` would be pruned). Intervals come from
``ODRADEK_OPERATOR_STATUS_INTERVAL`` (cluster status refresh, default 15 s),
``ODRADEK_OPERATOR_DRIFT_INTERVAL`` (topic drift check, default 60 s) and
``ODRADEK_OPERATOR_RETRY_DELAY`` (waits, default 10 s).
"""

from __future__ import annotations

import os
from typing import Any

import kopf

from odradek.operator import admin, kube, reconcile
from odradek.operator.status import is_paused, readiness, set_condition
from odradek.operator.validation import SpecError

CLUSTER = ("odradek.dev", "v1alpha1", "odradekclusters")
TOPIC = ("odradek.dev", "v1alpha1", "odradektopics")
STATUS_INTERVAL = float(os.environ.get("ODRADEK_OPERATOR_STATUS_INTERVAL", "15"))
DRIFT_INTERVAL = float(os.environ.get("ODRADEK_OPERATOR_DRIFT_INTERVAL", "60"))
RETRY_DELAY = float(os.environ.get("ODRADEK_OPERATOR_RETRY_DELAY", "10"))
KOPF_PREFIX = "operator.odradek.dev"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # Not "odradek.dev": kopf leaves its own prefix's annotations out of the diff, and
    # odradek.dev/pause-reconciliation must trigger the update handlers.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=KOPF_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=KOPF_PREFIX, key="last-handled-configuration")
    settings.persistence.finalizer = "odradek.dev/finalizer"
    settings.posting.level = 30  # events for warnings and errors only
    settings.execution.max_workers = 4


def _fail(patch: kopf.Patch, old: dict, generation: int | None, reason: str, message: str) -> None:
    patch.status["phase"] = "Failed"
    patch.status["observedGeneration"] = generation
    patch.status["conditions"] = readiness(old.get("conditions"), False, reason, message, generation)


def _paused(patch: kopf.Patch, old: dict, meta: dict) -> bool:
    paused = is_paused(meta)
    conds = set_condition(old.get("conditions"), "ReconciliationPaused", True if paused else None,
                                 "AnnotationSet", "odradek.dev/pause-reconciliation is \"true\"",
                                 meta.get("generation"))
    if paused:
        patch.status["phase"] = "Paused"
    patch.status["conditions"] = conds
    old["conditions"] = conds
    return paused


# -- OdradekCluster -------------------------------------------------------------------------

@kopf.on.resume(*CLUSTER, backoff=RETRY_DELAY)
@kopf.on.create(*CLUSTER, backoff=RETRY_DELAY)
@kopf.on.update(*CLUSTER, backoff=RETRY_DELAY)
def reconcile_cluster(body: kopf.Body, meta: kopf.Meta, status: kopf.Status, patch: kopf.Patch,
                      logger: Any, **_: Any) -> None:
    old = dict(status)
    if _paused(patch, old, dict(meta)):
        return
    try:
        outcome = reconcile.apply_cluster(kube.shared(), body, lambda objs: kopf.adopt(objs, owner=body), logger)
    except SpecError as e:
        _fail(patch, old, meta.get("generation"), "InvalidSpec", str(e))
        raise kopf.PermanentError(str(e)) from None
    patch.status.update(outcome.status)
    patch.status["conditions"] = set_condition(
        old.get("conditions"), "Warning", True if outcome.warning else None, "ScaleDownRefused",
        outcome.warning or "", meta.get("generation"))
    if old.get("phase") in (None, "Pending", "Failed", "Paused"):
        patch.status["phase"] = "Reconciling"
    if outcome.waiting:
        patch.status["phase"] = "Rolling"
    if outcome.waiting or outcome.warning:
        raise kopf.TemporaryError(outcome.waiting or outcome.warning, delay=RETRY_DELAY)


@kopf.timer(*CLUSTER, interval=STATUS_INTERVAL, initial_delay=1.0)
def refresh_cluster_status(body: kopf.Body, meta: kopf.Meta, status: kopf.Status, patch: kopf.Patch,
                           **_: Any) -> None:
    if status.get("phase") in ("Failed", "Paused") or is_paused(meta):
        return
    health = reconcile.cluster_health(kube.shared(), body)
    ready, reason, message = health.verdict()
    patch.status["readyBrokers"] = health.brokers_ready
    patch.status["desiredBrokers"] = health.brokers_desired
    patch.status["brokers"] = f"{health.brokers_ready}/{health.brokers_desired}"
    patch.status["activeController"] = health.active_controller
    patch.status["underReplicatedPartitions"] = health.under_replicated
    patch.status["phase"] = health.phase()
    patch.status["conditions"] = readiness(
        status.get("conditions"), ready, reason, message, meta.get("generation"))


def _uses_racks(spec: kopf.Spec, **_: Any) -> bool:
    return bool((spec.get("rack") or {}).get("topologyKey"))


@kopf.on.delete(*CLUSTER, when=_uses_racks, retries=30, backoff=RETRY_DELAY)
def unbind_rack_reader(name: str, namespace: str, spec: kopf.Spec, **_: Any) -> None:
    """The rack ClusterRoleBinding is cluster-scoped, so no owner reference can collect it (the
    finalizer this handler needs exists only on rack-aware clusters)."""
    reconcile.sync_rack_binding(kube.shared(), name, namespace, reconcile.configured_rack_role() or None, wanted=False)


# -- OdradekTopic ---------------------------------------------------------------------------

@kopf.on.resume(*TOPIC, backoff=RETRY_DELAY)
@kopf.on.create(*TOPIC, backoff=RETRY_DELAY)
@kopf.on.update(*TOPIC, backoff=RETRY_DELAY)
@kopf.timer(*TOPIC, interval=DRIFT_INTERVAL, initial_delay=DRIFT_INTERVAL)
def reconcile_topic(name: str, namespace: str, meta: kopf.Meta, spec: kopf.Spec, status: kopf.Status,
                    patch: kopf.Patch, logger: Any, **_: Any) -> None:
    old, generation = dict(status), meta.get("generation")
    if _paused(patch, old, dict(meta)):
        return
    try:
        fields = reconcile.sync_topic(kube.shared(), name, namespace, meta, spec, logger)
    except SpecError as e:
        _fail(patch, old, generation, "InvalidSpec", str(e))
        raise kopf.PermanentError(str(e)) from None
    except admin.AdminError as e:
        if e.permanent:
            _fail(patch, old, generation, e.name, e.message)
            raise kopf.PermanentError(f"{e.name}: {e.message}") from None
        _waiting(patch, old, generation, e.name, e.message)
        raise kopf.TemporaryError(str(e), delay=RETRY_DELAY) from None
    except (reconcile.ClusterMissing, reconcile.Waiting, admin.Unreachable) as e:
        _waiting(patch, old, generation, type(e).__name__, str(e))
        raise kopf.TemporaryError(str(e), delay=RETRY_DELAY) from None
    patch.status.update(fields)
    patch.status["phase"] = "Ready"
    patch.status["conditions"] = readiness(
        old.get("conditions"), True, "TopicReady",
        f"{fields['partitions']} partitions, replication factor {fields['replicas']}", generation)


def _waiting(patch: kopf.Patch, old: dict, generation: int | None, reason: str, message: str) -> None:
    patch.status["phase"] = "NotReady"
    patch.status["conditions"] = readiness(old.get("conditions"), False, reason, message, generation)


@kopf.on.delete(*TOPIC, retries=30, backoff=RETRY_DELAY)
def delete_topic(name: str, namespace: str, meta: kopf.Meta, spec: kopf.Spec, logger: Any, **_: Any) -> None:
    try:
        outcome = reconcile.release_or_delete_topic(kube.shared(), name, namespace, meta, spec, logger)
    except (admin.AdminError, admin.Unreachable) as e:
        raise kopf.TemporaryError(f"deleting the topic: {e}", delay=RETRY_DELAY) from None
    logger.info(outcome)
