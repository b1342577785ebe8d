"""OdradekMirrorMaker2 with I/O, and its kopf handlers (registered by ``handlers.register``).

``sync_mirror_maker``: the target OdradekCluster it names is read and parsed, ``mirrormaker2``
builds every object and they are applied, owned by the OdradekMirrorMaker2 (they go with it;
MirrorMaker's topics and the mirrored ones stay on the cluster). The status reports the
replicas (the Deployment's ready ones), its user, the flow (``source->target``, the patterns,
the policy); Ready once every replica is ready (its readiness probe: its MirrorMaker has
its connectors, ``mirrormaker2.READY_PATTERN``) and its OdradekUser is. A timer refreshes it.

Lag per mirrored partition is not reported: MirrorMaker 2 publishes it nowhere the operator can
read cheaply (its metrics are JMX beans of the pod; the source's end offsets need the source's
credentials from the operator), so ``docs/migration.md`` shows how to compare end offsets instead.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import kopf

from odradek.operator import connect, kube, mirrormaker2
from odradek.operator.connect_run import API, _ready, _reconcile, target_cluster
from odradek.operator.settings import OperatorSettings

MIRROR_MAKER = ("odradek.dev", "v1alpha1", "odradekmirrormaker2s")


def sync_mirror_maker(k: kube.Kube, body: Mapping[str, Any],
                      adopt: Callable[[list[dict]], None]) -> tuple[dict, tuple, dict]:
    """Apply what the OdradekMirrorMaker2 owns; (status fields, (ready, reason, message), {})."""
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
    waiting = [f"OdradekUser {u} not Ready" for u in users if not _ready(k.get(API, "OdradekUser", namespace, u))]
    if ready_replicas < spec.replicas:
        waiting.insert(0, f"MirrorMaker {ready_replicas}/{spec.replicas} ready")
    if waiting:
        return fields, (False, "ChildrenNotReady", "; ".join(waiting)), {}
    return fields, (True, "MirrorMakerReady", f"{ready_replicas} replicas mirroring {fields['flow']}"), {}


def reconcile_mirror_maker(body: kopf.Body, meta: kopf.Meta, status: kopf.Status, patch: kopf.Patch, logger: Any,
                           operator_settings: OperatorSettings, **_: Any) -> None:
    _reconcile(meta, status, patch, operator_settings,
               lambda: sync_mirror_maker(kube.shared(), body, lambda objs: kopf.adopt(objs, owner=body)))


def register(registry: kopf.OperatorRegistry, settings: OperatorSettings, bind: Callable[[str, Any], Any]) -> None:
    """Create/update/resume and a status timer."""
    handler = bind("OdradekMirrorMaker2", reconcile_mirror_maker)
    for event in (kopf.on.update, kopf.on.create, kopf.on.resume):
        event(*MIRROR_MAKER, backoff=settings.retry_delay, registry=registry)(handler)
    kopf.on.timer(*MIRROR_MAKER, interval=settings.status_interval, initial_delay=settings.status_interval,
                  registry=registry)(handler)
