"""OdradekMirrorMaker2 with I/O, and its kopf handlers (registered by ``handlers.register``).

``sync_mirror_maker``: the target OdradekCluster it names is read and parsed, ``mirrormaker2``
builds every object and they are applied, owned by the OdradekMirrorMaker2 (they go with it;
MirrorMaker's topics and the mirrored ones stay on the cluster). The status reports the
replicas (the Deployment's ready ones), its user, the flow (``source->target``, the patterns,
the policy); Ready once every replica is ready (its readiness probe: its MirrorMaker has
its connectors, ``mirrormaker2.READY_PATTERN``) and its OdradekUser is. A timer refreshes it.

The replication lag (``check_lag``, ``status.mirrors`` and the ``LagChecked`` condition): at most
every ``mirror_lag_interval`` (and at once after a spec change), the operator reads what
MirrorMaker committed on the target and the source's end offsets (``mirrormaker2_offsets``) as
MirrorMaker's own clients would, with its credentials: ``mm2.properties``'s settings for each
cluster, the mounted Secrets read from the API (``mirrormaker2_lag``). The target is reached at
MirrorMaker's address, or at the ``odradek.dev/target-bootstrap-servers`` annotation's when
every host it names is one the operator's administrator trusts (development, like the
cluster's ``odradek.dev/controller-url``). Bounded by ``LAG_CHECK_SECONDS``; what fails is the
condition's reason and message, never the handler's.
"""

from __future__ import annotations

import base64
import datetime
import time
import urllib.parse
from typing import Any, Callable, Mapping, Sequence

import kopf

from odradek.operator import connect, kube, mirrormaker2, mirrormaker2_lag
from odradek.operator.connect import ClusterAccess
from odradek.operator.connect_run import API, _ready, _reconcile, target_cluster
from odradek.operator.mirrormaker2_lag import LagUnavailable
from odradek.operator.settings import OperatorSettings
from odradek.operator.spec import MirrorMaker2Spec
from odradek.operator.status import now, set_condition

MIRROR_MAKER = ("odradek.dev", "v1alpha1", "odradekmirrormaker2s")
TARGET_BOOTSTRAP_ANNOTATION = "odradek.dev/target-bootstrap-servers"
LAG_CHECK_SECONDS = 5.0   # the whole check: both clusters, clients started and stopped
LagCheck = Callable[[MirrorMaker2Spec, ClusterAccess], "dict | None"]


def sync_mirror_maker(k: kube.Kube, body: Mapping[str, Any], adopt: Callable[[list[dict]], None],
                      lag: LagCheck = lambda spec, access: None) -> tuple[dict, tuple]:
    """Apply what the OdradekMirrorMaker2 owns; (status fields, (ready, reason, message)).
    ``lag``: the ``status.mirrors`` entry, or None when not due."""
    meta = body["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    cluster_name, cluster_spec = target_cluster(k, meta, body.get("spec") or {})
    spec = mirrormaker2.parse_mirror_maker(body.get("spec") or {}, cluster_name)
    access = connect.cluster_access(cluster_name, namespace, cluster_spec, spec)
    objects = mirrormaker2.build_mirror_maker(name, namespace, spec, access)
    adopt(objects)
    for obj in objects:
        k.apply(obj)
    deployment = k.get("apps/v1", "Deployment", namespace, mirrormaker2.names(name)["deployment"]) or {}
    ready_replicas = int((deployment.get("status") or {}).get("readyReplicas") or 0)
    users = [o["metadata"]["name"] for o in objects if o["kind"] == "OdradekUser"]
    fields = {"observedGeneration": meta.get("generation"), "cluster": cluster_name,
              "bootstrapServers": access.bootstrap, "sourceBootstrapServers": spec.source.bootstrap_servers,
              "flow": f"{spec.source.alias}->{spec.target_alias}", "topicsPattern": spec.topics_pattern,
              "groupsPattern": spec.groups_pattern, "replicationPolicy": spec.replication_policy,
              "replicas": spec.replicas, "readyReplicas": ready_replicas, "user": users[0] if users else None}
    if (mirror := lag(spec, access)) is not None:
        fields["mirrors"] = [mirror]
    waiting = [f"OdradekUser {u} not Ready" for u in users if not _ready(k.get(API, "OdradekUser", namespace, u))]
    if ready_replicas < spec.replicas:
        waiting.insert(0, f"MirrorMaker {ready_replicas}/{spec.replicas} ready")
    if waiting:
        return fields, (False, "ChildrenNotReady", "; ".join(waiting))
    return fields, (True, "MirrorMakerReady", f"{ready_replicas} replicas mirroring {fields['flow']}")


# -- the lag ----------------------------------------------------------------------------------

def _trusted_hosts(trusted: Sequence[str]) -> set[str]:
    return {urllib.parse.urlsplit(t).hostname for t in trusted} - {None}


def target_bootstrap(meta: Mapping[str, Any], access: ClusterAccess, trusted: Sequence[str]) -> str:
    """Where the operator reaches the target: the annotation's servers if it trusts every host."""
    annotated = (meta.get("annotations") or {}).get(TARGET_BOOTSTRAP_ANNOTATION) or ""
    servers = [s.strip() for s in annotated.split(",") if s.strip()]
    hosts = {s.rsplit(":", 1)[0].strip("[]") for s in servers}
    return annotated if servers and hosts <= _trusted_hosts(trusted) else access.bootstrap


def lag_due(meta: Mapping[str, Any], status: Mapping[str, Any], interval: float) -> bool:
    """No check yet, one older than ``interval`` seconds, or a spec changed since."""
    checked = ((status.get("mirrors") or [{}])[0]).get("lastChecked")
    if not checked or status.get("observedGeneration") != meta.get("generation"):
        return True
    at = datetime.datetime.strptime(checked, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    return (datetime.datetime.now(datetime.timezone.utc) - at).total_seconds() >= interval


def _secret_reader(k: kube.Kube, namespace: str, mounts: Mapping[str, tuple[str, str]]) -> Callable[[str], str | None]:
    """``read(path)``: a file of MirrorMaker's pod in a Secret it mounts (None: not in one)."""
    def read(path: str) -> str | None:
        directory, key = path.rsplit("/", 1)
        if directory not in mounts:
            return None
        name = mounts[directory][1]
        raw = ((k.get("v1", "Secret", namespace, name) or {}).get("data") or {}).get(key)
        if raw is None:
            raise LagUnavailable("CredentialsMissing", f"Secret {namespace}/{name} has no {key} (yet)")
        return base64.b64decode(raw).decode()
    return read


def measure_lag(k: kube.Kube, meta: Mapping[str, Any], spec: MirrorMaker2Spec, access: ClusterAccess,
                trusted: Sequence[str]) -> mirrormaker2_lag.MirrorLag:
    """MirrorMaker's lag, read with its own settings and credentials within ``LAG_CHECK_SECONDS``."""
    try:   # confluent-kafka, loaded by the first check (the image's gateway extra)
        from odradek.operator import mirrormaker2_offsets
    except ImportError as e:
        raise LagUnavailable("Unsupported", f"the operator has no Kafka client ({e.name} is not installed)") from None
    mirrored = mirrormaker2_lag.TopicFilter.of(spec)
    properties = mirrormaker2.mm2_properties(spec, access)
    read = _secret_reader(k, meta["namespace"], mirrormaker2.secret_mounts(meta["name"], spec, access))
    target_java = {**mirrormaker2_lag.cluster_settings(properties, spec.target_alias),
                   "bootstrap.servers": target_bootstrap(meta, access, trusted)}
    target = mirrormaker2_lag.librdkafka_settings(target_java, read)
    source = mirrormaker2_lag.librdkafka_settings(mirrormaker2_lag.cluster_settings(properties, spec.source.alias),
                                                  read)
    deadline = time.monotonic() + LAG_CHECK_SECONDS
    alias = spec.source.alias
    copied = mirrormaker2_offsets.copied_offsets(target, mirrormaker2_lag.offsets_topic(spec), f"{alias}-mm2", alias,
                                                 deadline)
    return mirrormaker2_lag.mirror_lag(mirrormaker2_offsets.source_offsets(source, mirrored, deadline), copied)


def check_lag(k: kube.Kube, meta: Mapping[str, Any], spec: MirrorMaker2Spec, access: ClusterAccess,
              trusted: Sequence[str]) -> tuple[dict, tuple[bool, str, str]]:
    """(the ``status.mirrors`` entry, the LagChecked condition's (status, reason, message))."""
    checked = now()
    try:
        lag = measure_lag(k, meta, spec, access, trusted)
    except LagUnavailable as e:
        return mirrormaker2_lag.status_entry(spec, checked, None), (False, e.reason, str(e))
    return mirrormaker2_lag.status_entry(spec, checked, lag), (True, "LagChecked", lag.summary())


def reconcile_mirror_maker(body: kopf.Body, meta: kopf.Meta, status: kopf.Status, patch: kopf.Patch, logger: Any,
                           operator_settings: OperatorSettings, **_: Any) -> None:
    k, checked = kube.shared(), []

    def lag(spec: MirrorMaker2Spec, access: ClusterAccess) -> dict | None:
        if not lag_due(meta, status, operator_settings.mirror_lag_interval):
            return None
        entry, condition = check_lag(k, meta, spec, access, operator_settings.trusted_controller_urls)
        checked.append(condition)
        return entry

    _reconcile(meta, status, patch, operator_settings,
               lambda: sync_mirror_maker(k, body, lambda objs: kopf.adopt(objs, owner=body), lag))
    for condition in checked:   # after _reconcile wrote Ready from the old conditions
        patch.status["conditions"] = set_condition(patch.status.get("conditions"), "LagChecked", *condition,
                                                   meta.get("generation"))


def register(registry: kopf.OperatorRegistry, settings: OperatorSettings, bind: Callable[[str, Any], Any]) -> None:
    """Create/update/resume and a status timer."""
    handler = bind("OdradekMirrorMaker2", reconcile_mirror_maker)
    for event in (kopf.on.update, kopf.on.create, kopf.on.resume):
        event(*MIRROR_MAKER, backoff=settings.retry_delay, registry=registry)(handler)
    kopf.on.timer(*MIRROR_MAKER, interval=settings.status_interval, initial_delay=settings.status_interval,
                  registry=registry)(handler)
