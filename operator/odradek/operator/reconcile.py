"""Reconciliation steps with I/O: what the kopf handlers delegate to.

Each function takes the ``Kube`` client (``kube.py``) and plain dicts, does the reads and
writes, and returns the status fields to patch; decisions are the pure functions of
``builders``, ``rolling``, ``topics`` and ``status``. Exceptions: ``SpecError`` (invalid
spec), ``Waiting`` (retry later, with the reason), ``admin.Unreachable`` / ``admin.AdminError``.
The operator's settings (``OperatorSettings``, read at start-up) come in as an argument.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from odradek.operator import admin, builders, certs, listeners, principals, rolling, topics, validation
from odradek.operator.kube import Kube
from odradek.operator.settings import OperatorSettings
from odradek.operator.status import ClusterHealth

CONTROLLER_URL_ANNOTATION = "odradek.dev/controller-url"
RBAC = "rbac.authorization.k8s.io/v1"


class Waiting(Exception):
    """Progress needs something that is not there yet (pods ready, partitions in sync...)."""


class ClusterMissing(Exception):
    """A topic's cluster does not exist or is being deleted."""


# -- finding the active controller ----------------------------------------------------------

def controller_candidates(kube: Kube, cluster: Mapping[str, Any], settings: OperatorSettings) -> list[str]:
    """Where the controller instances are: the cluster's ``odradek.dev/controller-url``
    annotation, else the operator's override (``ODRADEK_OPERATOR_CONTROLLER_URL``), else the
    ready endpoints of the ``<cluster>-controller`` Service, by the names their certificates
    carry (``https://<pod-ip-dashed>.<cluster>-controller.<ns>.svc:8080``: the control plane
    takes mutual TLS)."""
    meta = cluster["metadata"]
    annotated = (meta.get("annotations") or {}).get(CONTROLLER_URL_ANNOTATION)
    if annotated:
        return [u.strip() for u in annotated.split(",") if u.strip()]
    if settings.controller_urls:
        return list(settings.controller_urls)
    service = builders.names(meta["name"])["controller"]
    urls = []
    for eps in kube.list("discovery.k8s.io/v1", "EndpointSlice", meta["namespace"],
                         f"kubernetes.io/service-name={service}"):
        for ep in eps.get("endpoints") or []:
            if (ep.get("conditions") or {}).get("ready") is False:
                continue
            for address in ep.get("addresses") or []:
                urls.append(principals.controller_url(meta["name"], address, meta["namespace"]))
    return urls


def controller_client(kube: Kube, cluster: Mapping[str, Any], settings: OperatorSettings) -> admin.ControllerClient:
    """A client of the active controller; over https it presents the operator's certificate."""
    candidates = controller_candidates(kube, cluster, settings)
    tls = None
    if any(url.startswith("https:") for url in candidates):
        tls = principals.operator_tls(kube, cluster["metadata"]["name"], cluster["metadata"]["namespace"])
    return admin.ControllerClient(candidates, tls=tls)


# -- OdradekCluster -------------------------------------------------------------------------

@dataclass
class ClusterOutcome:
    status: dict[str, Any]
    warning: str | None = None      # a refused scale-down
    waiting: str | None = None      # a rolling restart in progress
    applied: list[str] = field(default_factory=list)


def apply_cluster(kube: Kube, body: Mapping[str, Any], adopt: Callable[[list[dict]], None],
                  logger: logging.Logger, settings: OperatorSettings) -> ClusterOutcome:
    """Validate, apply every child, grow PVCs, take one rolling-restart step."""
    meta, spec = body["metadata"], body.get("spec") or {}
    name, namespace = meta["name"], meta["namespace"]
    validation.validate_cluster(spec)
    specs = listeners.validate(spec)
    rack_role = rack_cluster_role(spec, settings)
    names = builders.names(name)
    live_sts = kube.get("apps/v1", "StatefulSet", namespace, names["brokers"])
    current = (live_sts or {}).get("spec", {}).get("replicas")
    desired = int((spec.get("brokers") or {}).get("replicas", 3))

    client, metadata = None, None
    if current is not None and desired < current:
        client = controller_client(kube, body, settings)
        try:
            metadata = client.cluster()
        except (admin.Unreachable, admin.AdminError) as e:
            logger.warning("scale-down check: %s", e)
    scale = rolling.plan_scale(current, desired, metadata)

    # Certificates first: a bad clusterCa/clientsCa raises SpecError before anything is applied.
    # Brokers' certificates carry their external TLS listeners' addresses (node addresses, load
    # balancers), read from the live pods and Services.
    host_ips = broker_host_ips(kube, name, namespace)
    existing = {n: kube.get("v1", "Service", namespace, n) for li in specs if li.external and li.tls
                for n in listeners.service_names(name, li, scale.replicas)[1]}
    cert_names = listeners.certificate_names(specs, scale.replicas, host_ips.values(),
                                             external_addresses(name, specs, scale.replicas, existing))
    plan = certs.sync_certificates(kube, name, namespace, spec, adopt, scale.replicas, cert_names)
    if plan.renewed:
        logger.info("certificates issued: %s", ", ".join(plan.renewed))
    for warning in plan.warnings:
        logger.warning(warning)
    sync_zookeeper_digest(kube, name, namespace, adopt)
    services = builders.build_listener_services(name, namespace, spec, scale.replicas)
    adopt(services)
    live_services = {s["metadata"]["name"]: kube.apply(s) for s in services}
    external = external_addresses(name, specs, scale.replicas, live_services)
    children = builders.build_children(name, namespace, spec, broker_replicas=scale.replicas, external=external,
                                       certificates=plan.versions["broker"], tls=broker_tls(name, specs))
    principals.secure_children(children, name, namespace, plan.versions)
    adopt(children)
    applied = [f"Service/{n}" for n in live_services]
    for child in children:
        if child["kind"] == "StatefulSet":
            live = live_sts if child["metadata"]["name"] == names["brokers"] else \
                kube.get("apps/v1", "StatefulSet", namespace, child["metadata"]["name"])
            child = builders.keep_immutable(child, live)
        kube.apply(child)
        applied.append(f"{child['kind']}/{child['metadata']['name']}")
    sync_rack_binding(kube, name, namespace, rack_role, bool(builders.rack_topology_key(spec)))
    resized = grow_claims(kube, name, namespace, spec, scale.replicas)
    if resized:
        logger.info("resized %s", ", ".join(resized))

    waiting = None
    if live_sts is not None:
        step = roll_step(kube, body, scale.replicas, settings, client, external, plan.versions["broker"])
        if not step.done:
            waiting = step.reason
    if waiting is None and any(li.type == "nodeport" and li.tls for li in specs) and len(host_ips) < scale.replicas:
        # Their certificates need the nodes' addresses: look again once every pod is scheduled.
        waiting = f"waiting for the broker pods' node addresses ({len(host_ips)}/{scale.replicas} scheduled)"
    status = {
        "observedGeneration": meta.get("generation"),
        "desiredBrokers": desired,
        "bootstrapServers": builders.bootstrap_servers(name, namespace, spec),
        "listeners": listener_status(kube, body, specs, live_services),
        "gatewayAddress": builders.gateway_address(name, namespace) if builders.build_gateway(name, namespace, spec) else None,
        "rolling": waiting,
    }
    return ClusterOutcome(status, None if scale.allowed else scale.reason, waiting, applied)


def external_addresses(name: str, specs: list[listeners.Listener], replicas: int,
                       live: Mapping[str, Mapping[str, Any]]) -> dict[tuple[str, int], str | None]:
    """(listener, ordinal) -> what that broker advertises, from its live Service."""
    out = {}
    for li in (li for li in specs if li.external):
        for ordinal, service in enumerate(listeners.service_names(name, li, replicas)[1]):
            out[(li.name, ordinal)] = listeners.external_address(li, live.get(service))
    return out


def broker_host_ips(kube: Kube, name: str, namespace: str) -> dict[int, str]:
    """Broker ordinal -> the address of the node its pod runs on (scheduled pods only)."""
    out = {}
    for pod in kube.list("v1", "Pod", namespace, _selector(builders.selector(name, "broker"))):
        ip = (pod.get("status") or {}).get("hostIP")
        if ip:
            out[int(pod["metadata"]["name"].rpartition("-")[2])] = ip
    return out


def broker_tls(name: str, specs: list[listeners.Listener]) -> listeners.BrokerTls | None:
    """The brokers' TLS material (``certs``) when a listener has TLS or authentication: then
    replication is mutual TLS too, with the brokers', operator's and gateway's certificates."""
    if not listeners.secured(specs):
        return None
    return listeners.BrokerTls(certs.broker_ssl_config(), certs.principal(name, "broker"),
                               (certs.principal(name, "operator"), certs.principal(name, "gateway")))


def listener_status(kube: Kube, body: Mapping[str, Any], specs: list[listeners.Listener] | None = None,
                    live: Mapping[str, Mapping[str, Any]] | None = None) -> list[dict] | None:
    """``status.listeners``: each listener's type, bootstrap address and the CA Secret to trust."""
    meta, spec = body["metadata"], body.get("spec") or {}
    name, namespace = meta["name"], meta["namespace"]
    specs = listeners.parse(spec) if specs is None else specs
    if not specs:
        return None
    host_ips = list(broker_host_ips(kube, name, namespace).values()) if any(
        li.type == "nodeport" for li in specs) else []
    out = []
    for li in specs:
        bootstrap_service = listeners.service_names(name, li, 0)[0]
        service = (live or {}).get(bootstrap_service)
        if li.external and service is None:
            service = kube.get("v1", "Service", namespace, bootstrap_service)
        entry = {"name": li.name, "type": li.type, "tls": li.tls}
        bootstrap = listeners.bootstrap_address(name, namespace, li, service, host_ips)
        if bootstrap:  # unknown until a node port's pods or a load balancer exist
            entry["bootstrapServers"] = bootstrap
        if li.tls:
            entry["caSecret"] = certs.secret_names(name)["cluster_ca_cert"]
        out.append(entry)
    return out


def sync_zookeeper_digest(kube: Kube, name: str, namespace: str, adopt: Callable[[list[dict]], None]) -> None:
    """The brokers' and controllers' ZooKeeper digest credentials (generated once, then kept)."""
    secret = principals.zookeeper_secret(
        name, namespace, kube.get("v1", "Secret", namespace, principals.zookeeper_secret_name(name)))
    adopt([secret])
    kube.apply(secret)


def renewal_due(kube: Kube, body: Mapping[str, Any]) -> str | None:
    """The certificates the cluster's next reconcile would renew because of time alone (for the
    status timer: a due renewal is triggered through ``certs.RENEWAL_ANNOTATION``), or None."""
    meta = body["metadata"]
    try:
        due = certs.expiring(meta["name"], body.get("spec") or {},
                             certs.read_existing(kube, meta["name"], meta["namespace"]))
    except (validation.SpecError, ValueError):   # the reconcile reports it
        return None
    return ", ".join(due) or None


def rack_cluster_role(spec: Mapping[str, Any], settings: OperatorSettings) -> str | None:
    """The ClusterRole (``nodes get``) the brokers' ServiceAccount is bound to when the cluster
    uses racks: ``ODRADEK_OPERATOR_RACK_CLUSTERROLE``, set by the chart (``rbac.brokerRack``);
    empty means the chart grants no node access, so a rack-aware cluster is an invalid spec.
    ``None`` when the operator does not manage rack bindings at all."""
    role = settings.rack_cluster_role
    if not role:
        if builders.rack_topology_key(spec):
            raise validation.SpecError(
                "spec.rack.topologyKey needs the brokers to read their Node: install the chart with "
                "rbac.brokerRack=true (a ClusterRole for nodes get, bound per rack-aware cluster)")
        return None
    return role


def sync_rack_binding(kube: Kube, name: str, namespace: str, role: str | None, wanted: bool) -> None:
    """Bind the brokers' ServiceAccount to ``role`` when the cluster uses racks, unbind otherwise."""
    if role is None:
        return
    binding = builders.build_rack_binding(name, namespace, role)
    if wanted:
        kube.apply(binding)
    else:
        kube.delete(RBAC, "ClusterRoleBinding", None, binding["metadata"]["name"])


def grow_claims(kube: Kube, name: str, namespace: str, spec: Mapping[str, Any], replicas: int) -> list[str]:
    """Patch the brokers' PVCs up to ``brokers.storage.size`` (never down)."""
    storage = (spec.get("brokers") or {}).get("storage") or {}
    if storage.get("type", "persistent-claim") != "persistent-claim":
        return []
    want = storage.get("size", "10Gi")
    resized = []
    for pvc_name in builders.pvc_names(name, replicas):
        pvc = kube.get("v1", "PersistentVolumeClaim", namespace, pvc_name)
        if pvc is None:
            continue
        have = pvc["spec"]["resources"]["requests"]["storage"]
        validation.validate_storage_change(have, want)
        if validation.quantity_bytes(want) > validation.quantity_bytes(have):
            kube.merge_patch("v1", "PersistentVolumeClaim", namespace, pvc_name,
                             {"spec": {"resources": {"requests": {"storage": want}}}})
            resized.append(f"{pvc_name} {have} -> {want}")
    return resized


def roll_step(kube: Kube, body: Mapping[str, Any], replicas: int, settings: OperatorSettings,
              client: admin.ControllerClient | None = None,
              external: Mapping[tuple[str, int], str | None] | None = None,
              certificates: str = "") -> rolling.RollStep:
    """One step of a rolling restart: delete at most one outdated broker pod (``external`` and
    ``certificates``, the brokers' certificate version, are part of the config hash)."""
    meta, spec = body["metadata"], body.get("spec") or {}
    name, namespace = meta["name"], meta["namespace"]
    pods = [rolling.PodView.from_pod(p) for p in
            kube.list("v1", "Pod", namespace, _selector(builders.selector(name, "broker")))]
    desired_hash = builders.config_hash(name, namespace, spec, external, certificates)
    if all(p.config_hash == desired_hash for p in pods):
        return rolling.plan_roll(pods, desired_hash, replicas, 0)
    urp = None
    try:
        urp = (client or controller_client(kube, body, settings)).health().get("under_replicated_partitions")
    except (admin.Unreachable, admin.AdminError):
        pass
    step = rolling.plan_roll(pods, desired_hash, replicas, urp)
    if step.action == "restart":
        kube.delete("v1", "Pod", namespace, step.pod)
    return step


def cluster_health(kube: Kube, body: Mapping[str, Any], settings: OperatorSettings) -> ClusterHealth:
    """Read the children's status and the controller's health."""
    meta, spec = body["metadata"], body.get("spec") or {}
    name, namespace = meta["name"], meta["namespace"]
    names = builders.names(name)

    def ready(kind: str, obj_name: str, field_name: str) -> int:
        obj = kube.get("apps/v1", kind, namespace, obj_name)
        return int(((obj or {}).get("status") or {}).get(field_name) or 0)

    zk = spec.get("zookeeper") or {}
    zk_desired = 0 if zk.get("external") is not None else int((zk.get("managed") or {}).get("replicas", 3))
    gw_desired = int((spec.get("gateway") or {}).get("replicas", 0))
    active, urp = None, None
    try:
        health = controller_client(kube, body, settings).health()
        active, urp = health.get("id"), health.get("under_replicated_partitions")
    except (admin.Unreachable, admin.AdminError, OSError):
        pass
    return ClusterHealth(
        brokers_desired=int((spec.get("brokers") or {}).get("replicas", 3)),
        brokers_ready=ready("StatefulSet", names["brokers"], "readyReplicas"),
        controllers_available=ready("Deployment", names["controller"], "availableReplicas"),
        zookeeper_desired=zk_desired,
        zookeeper_ready=ready("StatefulSet", names["zookeeper"], "readyReplicas") if zk_desired else 0,
        gateway_desired=gw_desired,
        gateway_available=ready("Deployment", names["gateway"], "availableReplicas") if gw_desired else 0,
        active_controller=active, under_replicated=urp,
        rolling=(body.get("status") or {}).get("rolling"))


def _selector(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


# -- OdradekTopic ---------------------------------------------------------------------------

def topic_cluster(kube: Kube, namespace: str, meta: Mapping[str, Any], spec: Mapping[str, Any]) -> dict:
    """The OdradekCluster a topic (or user) belongs to (``spec.cluster`` or label ``odradek.dev/cluster``)."""
    cluster = spec.get("cluster") or (meta.get("labels") or {}).get(builders.CLUSTER_LABEL)
    if not cluster:
        raise validation.SpecError("no cluster: set spec.cluster or the label odradek.dev/cluster")
    body = kube.get("odradek.dev/v1alpha1", "OdradekCluster", namespace, cluster)
    if body is None:
        raise ClusterMissing(f"OdradekCluster {namespace}/{cluster} does not exist")
    if body["metadata"].get("deletionTimestamp"):
        raise ClusterMissing(f"OdradekCluster {namespace}/{cluster} is being deleted")
    return body


def sync_topic(kube: Kube, name: str, namespace: str, meta: Mapping[str, Any], spec: Mapping[str, Any],
               logger: logging.Logger, settings: OperatorSettings) -> dict[str, Any]:
    """Make the controller's topic match the spec; returns the status fields."""
    configs = validation.validate_topic(name, spec)
    topic = validation.topic_name(name, spec)
    cluster = topic_cluster(kube, namespace, meta, spec)
    client = controller_client(kube, cluster, settings)
    current = next((t for t in client.cluster().get("topics") or [] if t["name"] == topic), None)
    plan = topics.plan_topic(spec, configs, current)
    if plan.create:
        try:
            current = client.create_topic(topic, spec.get("partitions", -1), spec.get("replicas", -1), configs)
        except admin.AdminError as e:
            if e.code != admin.TOPIC_ALREADY_EXISTS:
                raise
            raise Waiting(f"topic {topic} appeared concurrently; re-reading") from None
    else:
        if plan.partitions:
            current = client.create_partitions(topic, plan.partitions)
        if plan.set_configs or plan.delete_configs:
            client.alter_configs(topic, plan.set_configs, list(plan.delete_configs))
    if not plan.empty:
        logger.info("topic %s: %s", topic, plan.describe())
    partitions, rf = topics.current_shape(current)
    return {"topicName": topic, "topicId": current.get("topic_id"), "partitions": partitions,
            "replicas": rf, "cluster": cluster["metadata"]["name"], "observedGeneration": meta.get("generation")}


def cluster_for_cleanup(kube: Kube, namespace: str, meta: Mapping[str, Any],
                        spec: Mapping[str, Any]) -> tuple[dict | None, str]:
    """The cluster a deleted resource is cleaned up in, or (None, why) when its finalizer must be
    released at once instead: the namespace is terminating (the controller's pods go with it),
    the cluster is gone or being deleted, or the resource never named one."""
    ns = kube.get("v1", "Namespace", None, namespace)
    if ns is not None and (ns.get("status") or {}).get("phase") == "Terminating":
        return None, f"namespace {namespace} is terminating"
    try:
        return topic_cluster(kube, namespace, meta, spec), ""
    except (ClusterMissing, validation.SpecError) as e:
        return None, str(e)


def release_or_delete_topic(kube: Kube, name: str, namespace: str, meta: Mapping[str, Any],
                            spec: Mapping[str, Any], logger: logging.Logger, settings: OperatorSettings) -> str:
    """On OdradekTopic deletion: delete the topic, or release when its cluster is gone."""
    try:
        topic = validation.topic_name(name, spec)
    except validation.SpecError as e:
        return f"{e}: releasing without deleting the topic"
    cluster, why = cluster_for_cleanup(kube, namespace, meta, spec)
    if cluster is None:
        return f"{why}: releasing without deleting the topic"
    try:
        controller_client(kube, cluster, settings).delete_topic(topic)
    except admin.AdminError as e:
        if e.code != admin.UNKNOWN_TOPIC:
            raise
        return f"topic {topic} was already gone"
    return f"topic {topic} deleted"
