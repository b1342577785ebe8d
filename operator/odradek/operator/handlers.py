"""kopf handlers for OdradekCluster, OdradekTopic and OdradekUser (OdradekRebalance's in
``rebalance_run``, OdradekConnect's and OdradekConnector's in ``connect_run``): a few lines each, delegating to
``reconcile`` (and ``users``) and mapping its outcomes onto kopf (PermanentError for invalid specs with the
reason in status, TemporaryError while waiting) and onto status conditions.

Settings: progress and diff-base are kept in ``operator.odradek.dev/*`` annotations (the CRDs' status
schemas are structural, so kopf's default ``status.kopf`` would be pruned). Intervals and delays
come from ``OperatorSettings`` (read from the environment at start-up): importing this module
registers nothing; ``register`` does, into the registry the CLI hands to ``kopf.run``, and binds
the settings to every handler (handler ids stay the functions' names).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Mapping

import kopf

from odradek.operator import (admin, certs, connect_run, mirrormaker2_run, gateway_acls, kube, maintenance, manual, metrics, principals,
                              rebalance_run, reconcile, tiered_storage, users)
from odradek.operator.status import (GATEWAY_USER_NOT_READY, ClusterHealth, gateway_users_pending, is_paused, now,
                                     readiness, set_condition)
from odradek.operator.settings import OperatorSettings
from odradek.operator.validation import SpecError, parse_cluster

CLUSTER = ("odradek.dev", "v1alpha1", "odradekclusters")
TOPIC = ("odradek.dev", "v1alpha1", "odradektopics")
USER = ("odradek.dev", "v1alpha1", "odradekusers")
KOPF_PREFIX = "operator.odradek.dev"


def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    # Not "odradek.dev": kopf leaves its own prefix's annotations out of the diff, and
    # odradek.dev/pause-reconciliation must trigger the update handlers.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=KOPF_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=KOPF_PREFIX, key="last-handled-configuration")
    settings.persistence.finalizer = "odradek.dev/finalizer"
    settings.posting.level = 30  # events for warnings and errors only
    settings.execution.max_workers = 4
    # A deleted resource keeps its finalizer until its drift timer has stopped; a timer caught
    # mid-run (a blocking call in the thread pool) is polled again after this, kopf's default
    # being 60 s: deleting a user or topic then took a minute.
    settings.background.cancellation_polling = 1.0


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

def _controller_url_condition(conditions: Any, meta: Any, settings: OperatorSettings) -> list[dict]:
    """``ControllerUrlRefused`` while the cluster's controller-url annotation is ignored."""
    _, refused = principals.annotated_controller_urls(meta, settings.trusted_controller_urls)
    return set_condition(conditions, "ControllerUrlRefused", True if refused else None, "UntrustedControllerUrl",
                         refused or "", meta.get("generation"))


def reconcile_cluster(body: kopf.Body, meta: kopf.Meta, status: kopf.Status, patch: kopf.Patch,
                      logger: Any, operator_settings: OperatorSettings, **_: Any) -> None:
    old = dict(status)
    if _paused(patch, old, dict(meta)):
        return
    maint = maintenance.apply(body, lambda: reconcile.controller_client(kube.shared(), body, operator_settings))
    if maint.enabled is not None:   # odradek.dev/maintenance: the brokers the operator put in maintenance
        patch.metadata.annotations[maintenance.ENABLED] = maint.enabled or None
    if maint.problem:
        logger.warning(maint.problem)
    try:
        outcome = reconcile.apply_cluster(kube.shared(), body, lambda objs: kopf.adopt(objs, owner=body), logger,
                                          operator_settings)
    except SpecError as e:
        _fail(patch, old, meta.get("generation"), e.reason, str(e))
        if isinstance(e, (kube.SecretConflict, tiered_storage.CredentialsMissing)):   # may be resolved: look again
            raise kopf.TemporaryError(str(e), delay=operator_settings.retry_delay) from None
        raise kopf.PermanentError(str(e)) from None
    patch.status.update(outcome.status)
    if outcome.gateway_acls.granted is not None:
        patch.metadata.annotations[gateway_acls.GRANTED] = outcome.gateway_acls.granted or None
    conditions = set_condition(old.get("conditions"), "Warning", True if outcome.warning else None,
                               "ScaleDownRefused", outcome.warning or "", meta.get("generation"))
    conditions = set_condition(conditions, "GatewayUsersRefused", True if outcome.gateway_refused else None,
                               GATEWAY_USER_NOT_READY if outcome.gateway_pending else "GatewayUserRefused",
                               outcome.gateway_refused or "", meta.get("generation"))
    patch.status["conditions"] = _controller_url_condition(conditions, meta, operator_settings)
    if old.get("phase") in (None, "Pending", "Failed", "Paused"):
        patch.status["phase"] = "Reconciling"
    if outcome.waiting:
        patch.status["phase"] = "Rolling"
    if outcome.gateway_acls.problem:
        logger.warning(outcome.gateway_acls.problem)
    retry = (outcome.waiting or outcome.warning or outcome.gateway_refused or outcome.rebalancing
             or outcome.gateway_acls.problem)
    if retry:   # a refused user may become mappable; an auto-rebalance moves on; the controller may start
        raise kopf.TemporaryError(retry, delay=operator_settings.retry_delay)
    if maint.retry:
        raise kopf.TemporaryError(maint.problem, delay=operator_settings.retry_delay)


def refresh_cluster_status(body: kopf.Body, meta: kopf.Meta, status: kopf.Status, patch: kopf.Patch,
                           logger: Any, operator_settings: OperatorSettings, **_: Any) -> None:
    if status.get("phase") in ("Failed", "Paused") or is_paused(meta):
        return
    if status.get("observedGeneration") is None:   # not reconciled yet: no Ready before its status
        return
    try:
        spec = parse_cluster(body.get("spec") or {})
    except SpecError:   # the reconcile handler reports it
        return
    name, namespace = meta["name"], meta["namespace"]
    due = reconcile.renewal_due(kube.shared(), name, namespace, spec)
    if due:  # a changed annotation runs the update handler, which renews and rolls the pods
        logger.info("certificates to renew: %s", due)
        patch.metadata.annotations[certs.RENEWAL_ANNOTATION] = now()
    rotated = reconcile.tiered_credentials_rotated(kube.shared(), name, namespace, spec)
    if rotated:   # Secrets are not watched: the annotation's change runs the reconcile, which rolls the brokers
        logger.info("tiered storage credentials changed in Secret %s", rotated)
        patch.metadata.annotations[tiered_storage.ROTATION_ANNOTATION] = now()
    marked = manual.pending(kube.shared(), name, namespace)   # evicted or marked pods: reconcile to roll them
    if marked and marked != (meta.get("annotations") or {}).get(manual.PENDING):
        patch.metadata.annotations[manual.PENDING] = marked
    health = reconcile.cluster_health(kube.shared(), body, spec, operator_settings)
    listeners = reconcile.listener_status(kube.shared(), name, namespace, spec)
    # Not through kopf's patch: the reconcile may have changed the status while health was read.
    kube.shared().update_status("odradek.dev/v1alpha1", "OdradekCluster", namespace, name,
                                functools.partial(status_now, health, listeners, operator_settings))


def status_now(health: ClusterHealth, listeners: list, settings: OperatorSettings,
               cluster: Mapping[str, Any]) -> dict | None:
    """The status timer's fields over the cluster as it is now: its conditions merged into the
    current ones, what the reconcile says (rolling, gateway users being taken in) as it says it
    now; None once the reconcile failed it or it is paused (the reconcile's phase stays)."""
    status, meta = cluster.get("status") or {}, cluster["metadata"]
    if status.get("phase") in ("Failed", "Paused") or is_paused(meta):
        return None
    conditions = status.get("conditions") or []
    health = dataclasses.replace(health, rolling=status.get("rolling"),
                                 gateway_pending=gateway_users_pending(conditions))
    ready = readiness(conditions, *health.verdict(), meta.get("generation"))
    return {**health.status_fields(), "listeners": listeners,
            "conditions": _controller_url_condition(ready, meta, settings)}


def _uses_racks(spec: kopf.Spec, **_: Any) -> bool:
    return bool((spec.get("rack") or {}).get("topologyKey"))


def unbind_rack_reader(name: str, namespace: str, operator_settings: OperatorSettings, **_: Any) -> None:
    """The rack ClusterRoleBinding is cluster-scoped, so no owner reference can collect it (the
    finalizer this handler needs exists only on rack-aware clusters)."""
    reconcile.sync_rack_binding(kube.shared(), name, namespace, operator_settings.rack_cluster_role or None,
                                wanted=False)


# -- OdradekTopic ---------------------------------------------------------------------------

def _attempt(patch: kopf.Patch, old: dict, generation: int | None, retry_delay: float, step: Callable[[], Any]) -> Any:
    """``step()``, its failures mapped onto status and kopf: an invalid spec or a refusal of
    the controller fails for good (PermanentError, reason in status), waiting retries."""
    try:
        return step()
    except SpecError as e:
        _fail(patch, old, generation, e.reason, str(e))
        raise kopf.PermanentError(str(e)) from None
    except admin.AdminError as e:
        if e.permanent:
            _fail(patch, old, generation, e.name, e.message)
            raise kopf.PermanentError(f"{e.name}: {e.message}") from None
        _waiting(patch, old, generation, e.name, e.message)
        raise kopf.TemporaryError(str(e), delay=retry_delay) from None
    except (reconcile.ClusterMissing, reconcile.Waiting, users.Waiting, admin.Unreachable) as e:
        _waiting(patch, old, generation, type(e).__name__, str(e))
        raise kopf.TemporaryError(str(e), delay=retry_delay) from None


def reconcile_topic(name: str, namespace: str, meta: kopf.Meta, spec: kopf.Spec, status: kopf.Status,
                    patch: kopf.Patch, logger: Any, operator_settings: OperatorSettings, **_: Any) -> None:
    old, generation = dict(status), meta.get("generation")
    if _paused(patch, old, dict(meta)):
        return
    fields = _attempt(patch, old, generation, operator_settings.retry_delay, lambda: reconcile.sync_topic(
        kube.shared(), name, namespace, meta, spec, logger, operator_settings, old))
    patch.status.update(fields)
    patch.status["phase"] = "Ready"
    patch.status["conditions"] = readiness(
        old.get("conditions"), True, "TopicReady",
        f"{fields['partitions']} partitions, replication factor {fields['replicas']}", generation)


def _waiting(patch: kopf.Patch, old: dict, generation: int | None, reason: str, message: str) -> None:
    patch.status["phase"] = "NotReady"
    patch.status["conditions"] = readiness(old.get("conditions"), False, reason, message, generation)


def delete_topic(name: str, namespace: str, meta: kopf.Meta, spec: kopf.Spec, status: kopf.Status, logger: Any,
                 operator_settings: OperatorSettings, **_: Any) -> None:
    try:
        outcome = reconcile.release_or_delete_topic(kube.shared(), name, namespace, meta, spec, logger,
                                                    operator_settings, dict(status))
    except (admin.AdminError, admin.Unreachable) as e:
        raise kopf.TemporaryError(f"deleting the topic: {e}", delay=operator_settings.retry_delay) from None
    logger.info(outcome)


# -- OdradekUser ----------------------------------------------------------------------------

def reconcile_user(body: kopf.Body, namespace: str, meta: kopf.Meta, spec: kopf.Spec, status: kopf.Status,
                   patch: kopf.Patch, logger: Any, operator_settings: OperatorSettings, **_: Any) -> None:
    old, generation = dict(status), meta.get("generation")
    if _paused(patch, old, dict(meta)):
        return

    def sync() -> dict:
        cluster = reconcile.topic_cluster(kube.shared(), namespace, meta, spec)
        client = reconcile.controller_client(kube.shared(), cluster, operator_settings)
        return users.sync_user(kube.shared(), client, body, cluster["metadata"]["name"],
                               lambda objs: kopf.adopt(objs, owner=body), logger,
                               certs.user_certificate(kube.shared(), cluster, body["metadata"]["name"])
                               if users.auth_type(spec) == users.TLS else None)
    fields = _attempt(patch, old, generation, operator_settings.retry_delay, sync)
    patch.status.update(fields)
    patch.status["phase"] = "Ready"
    patch.status["conditions"] = readiness(old.get("conditions"), True, "UserReady",
                                           users.describe(spec, fields), generation)


def delete_user(name: str, namespace: str, meta: kopf.Meta, spec: kopf.Spec, status: kopf.Status, logger: Any,
                operator_settings: OperatorSettings, **_: Any) -> None:
    cluster, why = reconcile.cluster_for_cleanup(kube.shared(), namespace, meta, spec)
    if cluster is None:
        logger.info("%s: releasing without removing the user", why)
        return
    try:
        logger.info(users.remove_user(reconcile.controller_client(kube.shared(), cluster, operator_settings),
                                      name, status))
    except (admin.AdminError, admin.Unreachable) as e:
        raise kopf.TemporaryError(f"removing the user: {e}", delay=operator_settings.retry_delay) from None


# -- registration ---------------------------------------------------------------------------

def register(registry: kopf.OperatorRegistry, settings: OperatorSettings) -> None:
    """Register every handler into ``registry`` with ``settings`` bound (what the decorators
    would do at import time, once the settings are known), each counted and timed per kind
    (``odradek.operator.metrics``)."""
    on, retry = kopf.on, settings.retry_delay

    def bind(kind: str, fn: Any) -> Any:
        return metrics.instrument(kind, functools.partial(fn, operator_settings=settings))

    on.startup(registry=registry)(configure)
    for resource, kind, reconcile_fn, delete_fn, when in (
            (CLUSTER, "OdradekCluster", reconcile_cluster, unbind_rack_reader, _uses_racks),
            (TOPIC, "OdradekTopic", reconcile_topic, delete_topic, None),
            (USER, "OdradekUser", reconcile_user, delete_user, None)):
        for event in (on.update, on.create, on.resume):
            event(*resource, backoff=retry, registry=registry)(bind(kind, reconcile_fn))
        on.delete(*resource, when=when, retries=30, backoff=retry, registry=registry)(bind(kind, delete_fn))
    on.timer(*CLUSTER, interval=settings.status_interval, initial_delay=1.0,
             registry=registry)(bind("OdradekCluster", refresh_cluster_status))
    on.timer(*TOPIC, interval=settings.drift_interval, initial_delay=settings.drift_interval,
             registry=registry)(bind("OdradekTopic", reconcile_topic))
    on.timer(*USER, interval=settings.drift_interval, initial_delay=settings.drift_interval,
             registry=registry)(bind("OdradekUser", reconcile_user))
    rebalance_run.register(registry, settings, bind)   # OdradekRebalance
    connect_run.register(registry, settings, bind)     # OdradekConnect, OdradekConnector
    mirrormaker2_run.register(registry, settings, bind)   # OdradekMirrorMaker2
