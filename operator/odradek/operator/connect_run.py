"""OdradekConnect and OdradekConnector with I/O, and their kopf handlers (registered by
``handlers.register`` through ``register``).

OdradekConnect (``sync_connect``): the cluster it names is read and parsed, ``connect`` builds
every object and they are applied (owned by the OdradekConnect, but the storage OdradekTopics:
deleting a Connect cluster keeps its connectors' offsets, as Strimzi keeps a KafkaConnect's
topics); the status reports the workers (the Deployment's ready replicas), its user and topics;
Ready once every worker is ready and its OdradekUser and OdradekTopics are. A timer refreshes it.

OdradekConnector (``sync_connector``): the calls ``connectors.plan`` makes against the workers'
REST API (the ``k-connect-api`` Service, or the OdradekConnect's ``odradek.dev/connect-url``
annotation when its origin is one the operator's administrator trusts, as the cluster's
``odradek.dev/controller-url``), then the status ``GET .../status`` returns. A REST API that does
not answer yet, a rebalance in progress (409) or an OdradekConnect not there yet: retried
(NotReady); a configuration Kafka Connect refuses (4xx): NotReady with its message until the
spec changes. Deletion deletes the connector (a Connect cluster that is gone releases it).
"""

from __future__ import annotations

import urllib.parse
from typing import Any, Callable, Mapping

import kopf

from odradek.operator import connect, connectors, kube, reconcile, users
from odradek.operator.settings import OperatorSettings
from odradek.operator.spec import ClusterSpec, SpecError
from odradek.operator.status import is_paused, readiness, set_condition
from odradek.operator.validation import parse_cluster

CONNECT = ("odradek.dev", "v1alpha1", "odradekconnects")
CONNECTOR = ("odradek.dev", "v1alpha1", "odradekconnectors")
API = "odradek.dev/v1alpha1"


class Waiting(Exception):
    """What the resource needs is not there yet (its Connect cluster, its REST API)."""


def _ready(obj: Mapping[str, Any] | None) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in ((obj or {}).get("status") or {}).get("conditions") or [])


def target_cluster(k: kube.Kube, meta: Mapping[str, Any], raw_spec: Mapping[str, Any]) -> tuple[str, ClusterSpec]:
    """The OdradekCluster a runtime names (label or ``spec.cluster``): its name and parsed spec."""
    cluster = reconcile.topic_cluster(k, meta["namespace"], meta, raw_spec)
    name = cluster["metadata"]["name"]
    try:
        return name, parse_cluster(cluster.get("spec") or {})
    except SpecError as e:
        raise Waiting(f"OdradekCluster {name} has an invalid spec: {e}") from None


def sync_connect(k: kube.Kube, body: Mapping[str, Any], adopt: Callable[[list[dict]], None]) -> tuple[dict, tuple]:
    """Apply what the OdradekConnect owns; (status fields, (ready, reason, message))."""
    meta = body["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    spec = connect.parse_connect(name, body.get("spec") or {})
    cluster_name, cluster_spec = target_cluster(k, meta, body.get("spec") or {})
    access = connect.cluster_access(cluster_name, namespace, cluster_spec, spec)
    password = None
    if spec.rest_authentication == "basic":   # generated once, then kept: the workers read it at start
        secret = k.get("v1", "Secret", namespace, connect.names(name)["rest"])
        password = users.secret_value(secret, "password") or users.generate_password()
    objects = connect.build_connect(name, namespace, spec, access, password, cluster_spec.image)
    adopt([o for o in objects if o["kind"] != "OdradekTopic"])
    applied = {(o["kind"], o["metadata"]["name"]): k.apply(o) for o in objects}
    deployment = k.get("apps/v1", "Deployment", namespace, connect.names(name)["workers"]) or {}
    ready_workers = int((deployment.get("status") or {}).get("readyReplicas") or 0)
    user_names = [n for kind, n in applied if kind == "OdradekUser"]
    topics = [n for kind, n in applied if kind == "OdradekTopic"]
    fields = {"observedGeneration": meta.get("generation"), "cluster": cluster_name,
              "url": connect.rest_url(name, namespace), "bootstrapServers": access.bootstrap,
              "replicas": spec.replicas, "readyReplicas": ready_workers, "user": user_names[0] if user_names else None,
              "topics": sorted(t["spec"]["topicName"] for t in objects if t["kind"] == "OdradekTopic")}
    waiting = [f"OdradekUser {u} not Ready" for u in user_names if not _ready(k.get(API, "OdradekUser", namespace, u))]
    waiting += [f"OdradekTopic {t} not Ready" for t in topics if not _ready(k.get(API, "OdradekTopic", namespace, t))]
    if ready_workers < spec.replicas:
        waiting.insert(0, f"workers {ready_workers}/{spec.replicas} ready")
    if waiting:
        return fields, (False, "ChildrenNotReady", "; ".join(waiting))
    return fields, (True, "ConnectReady", f"{ready_workers} workers ready at {fields['url']}")


def _pause(patch: kopf.Patch, old: dict, meta: Mapping[str, Any]) -> bool:
    paused = is_paused(meta)
    old["conditions"] = set_condition(old.get("conditions"), "ReconciliationPaused", True if paused else None,
                                      "AnnotationSet", "odradek.dev/pause-reconciliation is \"true\"",
                                      meta.get("generation"))
    patch.status["conditions"] = old["conditions"]
    if paused:
        patch.status["phase"] = "Paused"
    return paused


def _write(patch: kopf.Patch, old: dict, generation: int | None, verdict: tuple[bool, str, str]) -> None:
    ready, reason, message = verdict
    patch.status["phase"] = "Ready" if ready else ("Failed" if reason in ("InvalidSpec",) else "NotReady")
    patch.status["conditions"] = readiness(old.get("conditions"), ready, reason, message, generation)


def _reconcile(meta: kopf.Meta, status: kopf.Status, patch: kopf.Patch, settings: OperatorSettings,
               sync: Callable[[], tuple[dict, tuple]]) -> None:
    """One pass of ``sync`` (status fields, verdict) mapped onto the status and kopf: an invalid
    spec fails for good, waiting retries."""
    old, generation = dict(status), meta.get("generation")
    if _pause(patch, old, meta):
        return
    try:
        fields, verdict = sync()
    except SpecError as e:
        _write(patch, old, generation, (False, e.reason, str(e)))
        raise kopf.PermanentError(str(e)) from None
    except (reconcile.ClusterMissing, Waiting) as e:
        _write(patch, old, generation, (False, type(e).__name__, str(e)))
        raise kopf.TemporaryError(str(e), delay=settings.retry_delay) from None
    patch.status.update(fields)
    _write(patch, old, generation, verdict)


def reconcile_connect(body: kopf.Body, meta: kopf.Meta, status: kopf.Status, patch: kopf.Patch, logger: Any,
                      operator_settings: OperatorSettings, **_: Any) -> None:
    _reconcile(meta, status, patch, operator_settings,
               lambda: sync_connect(kube.shared(), body, lambda objs: kopf.adopt(objs, owner=body)))


# -- OdradekConnector --------------------------------------------------------------------------

def rest_url(connect_body: Mapping[str, Any], trusted: tuple[str, ...]) -> str:
    """The workers' REST API: the annotation's URL when its origin is trusted, else the Service's."""
    meta = connect_body["metadata"]
    annotated = (meta.get("annotations") or {}).get(connectors.CONNECT_URL_ANNOTATION)
    if annotated:
        parts = urllib.parse.urlsplit(annotated)
        if (parts.scheme, parts.hostname) in {(t.scheme, t.hostname) for t in map(urllib.parse.urlsplit, trusted)}:
            return annotated
    return connect.rest_url(meta["name"], meta["namespace"])


def rest_client(k: kube.Kube, connect_body: Mapping[str, Any], settings: OperatorSettings) -> connectors.ConnectClient:
    """The workers' REST API, with the operator's login when it authenticates (its REST Secret)."""
    meta, credentials = connect_body["metadata"], None
    if connect.parse_connect(meta["name"], connect_body.get("spec") or {}).rest_authentication == "basic":
        secret = k.get("v1", "Secret", meta["namespace"], connect.names(meta["name"])["rest"])
        password = users.secret_value(secret, "password")
        if password is None:
            raise Waiting(f"Secret {meta['namespace']}/{connect.names(meta['name'])['rest']} (the REST API's "
                          "credentials) does not exist yet")
        credentials = (connect.REST_USERNAME, password)
    return connectors.ConnectClient(rest_url(connect_body, settings.trusted_controller_urls), credentials=credentials)


def _call(k: kube.Kube, client: connectors.ConnectClient, meta: Mapping[str, Any], call: connectors.Call,
          logger: Any) -> None:
    """One call of the plan. A restart's annotation is claimed first (removed while it still says
    what this pass read, ``kube.remove_annotation_if``): two passes holding one body (the timer's
    and the update's) restart once; a failed restart gives it back for the next pass."""
    name, namespace = meta["name"], meta["namespace"]
    key = connectors.restart_annotation(call)
    value = None if key is None else str(meta["annotations"][key])
    if key is not None and not k.remove_annotation_if(API, "OdradekConnector", namespace, name, key, value):
        return   # another pass took this restart, or the user asked again: the next pass acts
    try:
        client.call(call.method, call.path, call.body)
    except (connectors.ConnectUnreachable, connectors.ConnectError):
        if key is not None:
            k.merge_patch(API, "OdradekConnector", namespace, name, {"metadata": {"annotations": {key: value}}})
        raise
    logger.info("connector %s: %s", name, call.why)


def sync_connector(k: kube.Kube, body: Mapping[str, Any], settings: OperatorSettings,
                   logger: Any) -> tuple[dict, tuple]:
    """One pass; (status fields, verdict)."""
    meta = body["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    spec = connectors.parse_connector(body.get("spec") or {})
    connect_name = connectors.connect_name(meta, spec)
    connect_body = k.get(API, "OdradekConnect", namespace, connect_name)
    if connect_body is None:
        raise Waiting(f"OdradekConnect {namespace}/{connect_name} does not exist")
    try:
        client = rest_client(k, connect_body, settings)
    except SpecError as e:
        raise Waiting(f"OdradekConnect {namespace}/{connect_name} has an invalid spec: {e}") from None
    try:
        annotations = meta.get("annotations") or {}
        for call in connectors.plan(name, spec, client.config(name), client.status(name), annotations):
            _call(k, client, meta, call, logger)
        answer = client.status(name)
    except connectors.ConnectUnreachable as e:
        raise Waiting(str(e)) from None
    except connectors.ConnectError as e:
        if e.retriable:
            raise Waiting(f"Kafka Connect: {e}") from None
        fields = {"observedGeneration": meta.get("generation"), "connect": connect_name}
        return fields, (False, "ConnectorRefused", f"Kafka Connect refused it: {e.message}")
    fields = {"observedGeneration": meta.get("generation"), "connect": connect_name, "tasksMax": spec.tasks_max,
              "connectorStatus": answer}
    return fields, connectors.verdict(spec, answer)


def reconcile_connector(body: kopf.Body, meta: kopf.Meta, status: kopf.Status, patch: kopf.Patch, logger: Any,
                        operator_settings: OperatorSettings, **_: Any) -> None:
    _reconcile(meta, status, patch, operator_settings,
               lambda: sync_connector(kube.shared(), body, operator_settings, logger))


def delete_connector(body: kopf.Body, meta: kopf.Meta, logger: Any, operator_settings: OperatorSettings,
                     **_: Any) -> None:
    name, namespace = meta["name"], meta["namespace"]
    try:
        spec = connectors.parse_connector(body.get("spec") or {})
        connect_body = kube.shared().get(API, "OdradekConnect", namespace, connectors.connect_name(meta, spec))
    except SpecError as e:
        logger.info("%s: releasing without deleting the connector", e)
        return
    if connect_body is None or connect_body["metadata"].get("deletionTimestamp"):
        logger.info("its OdradekConnect is gone: releasing without deleting the connector")
        return
    try:
        client = rest_client(kube.shared(), connect_body, operator_settings)
        logger.info("connector %s %s", name, "deleted" if client.delete(name) else "was already gone")
    except (connectors.ConnectError, connectors.ConnectUnreachable, Waiting) as e:
        raise kopf.TemporaryError(f"deleting the connector: {e}", delay=operator_settings.retry_delay) from None
    except SpecError as e:
        logger.info("OdradekConnect: %s: releasing without deleting the connector", e)


def register(registry: kopf.OperatorRegistry, settings: OperatorSettings, bind: Callable[[str, Any], Any]) -> None:
    """Create/update/resume and a status timer for both kinds; the connector's deletion."""
    for resource, kind, fn in ((CONNECT, "OdradekConnect", reconcile_connect),
                               (CONNECTOR, "OdradekConnector", reconcile_connector)):
        handler = bind(kind, fn)
        for event in (kopf.on.update, kopf.on.create, kopf.on.resume):
            event(*resource, backoff=settings.retry_delay, registry=registry)(handler)
        kopf.on.timer(*resource, interval=settings.status_interval, initial_delay=settings.status_interval,
                      registry=registry)(handler)
    kopf.on.delete(*CONNECTOR, retries=30, backoff=settings.retry_delay, registry=registry)(
        bind("OdradekConnector", delete_connector))
