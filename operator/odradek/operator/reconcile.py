"""Reconciliation steps with I/O: what the kopf handlers delegate to.

Each function takes the ``Kube`` client (``kube.py``) and plain dicts, does the reads and
writes, and returns the status fields to patch; decisions are the pure functions of
``builders``, ``rolling``, ``topics`` and ``status``. Exceptions: ``SpecError`` (invalid
spec), ``Waiting`` (retry later, with the reason), ``admin.Unreachable`` / ``admin.AdminError``.
The operator's settings (``OperatorSettings``, read at start-up) come in as an argument.
An OdradekCluster's reconcile observes (``observe_cluster``), plans without I/O
(``cluster_plan``) and applies exactly what was planned.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from odradek.operator import (admin, autorebalance, builders, certs, cluster_plan, gateway_acls, gateway_security,
                              listeners, manual, metrics, network_policies, principals, replicas_change, rolling,
                              tiered_storage, topics, validation, zookeeper)
from odradek.operator.kube import Kube
from odradek.operator.security import SecurityPlan
from odradek.operator.settings import OperatorSettings
from odradek.operator.spec import ClusterSpec
from odradek.operator.status import ClusterHealth, gateway_users_pending

RBAC = "rbac.authorization.k8s.io/v1"
NODE_ADDRESS_TYPES = ("InternalIP", "ExternalIP")   # a pod's status.hostIP is one of its Node's


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
    annotated, _ = principals.annotated_controller_urls(meta, settings.trusted_controller_urls)
    if annotated:   # only https Services of the namespace (or trusted origins): see principals
        return annotated
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
    gateway_refused: str | None = None   # gateway.users that cannot be mapped yet (looked at again)
    gateway_pending: tuple[str, ...] = ()   # those only not Ready yet: the cluster is not Ready either
    rebalancing: str | None = None       # what spec.autoRebalance waits for (autorebalance.py; looked at again)
    gateway_acls: gateway_acls.GrantOutcome = gateway_acls.GrantOutcome(None)   # the registry's ACLs


def apply_cluster(kube: Kube, body: Mapping[str, Any], adopt: Callable[[list[dict]], None],
                  logger: logging.Logger, settings: OperatorSettings) -> ClusterOutcome:
    """Parse the spec, observe, apply what ``cluster_plan`` plans (Secrets and listener Services,
    then every child), grow PVCs, take one rolling-restart step."""
    meta = body["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    spec = validation.parse_cluster(body.get("spec") or {})
    rack_role = rack_cluster_role(spec, settings)
    observed, client = observe_cluster(kube, body, spec, settings, logger)
    first = cluster_plan.plan_prerequisites(name, namespace, spec, observed)
    if first.certificates.renewed:
        logger.info("certificates issued: %s", ", ".join(first.certificates.renewed))
    for warning in first.certificates.warnings:
        logger.warning(warning)
    _apply(kube, adopt, first.secrets)
    live_services = _apply(kube, adopt, first.services)
    plan = cluster_plan.plan_children(name, namespace, spec, observed, first.certificates.versions, live_services)
    held = hold_behind_zookeeper(kube, name, namespace, spec, plan.children)
    _apply(kube, adopt, plan.children)
    for stale in plan.stale_policies:
        kube.delete(network_policies.API_VERSION, "NetworkPolicy", namespace, stale)
    if not spec.brokers.pdb.enabled:   # brokers.pdb.enabled: false removes the one built before
        kube.delete("policy/v1", "PodDisruptionBudget", namespace, builders.names(name)["brokers"])
    applied = [f"{o['kind']}/{o['metadata']['name']}" for o in (*first.services, *plan.children)]
    grant = gateway_acls.sync(lambda: client or controller_client(kube, body, settings), name, spec,
                              meta.get("annotations") or {})
    sync_rack_binding(kube, name, namespace, rack_role, bool(spec.rack_topology_key))
    resized = grow_claims(kube, name, namespace, spec, observed.scale.replicas)
    if resized:
        logger.info("resized %s", ", ".join(resized))
    waiting = _roll(kube, body, spec, observed, plan, settings, client) or held
    live_sts = observed.statefulsets.get(builders.names(name)["brokers"])
    auto = autorebalance.sync(kube, body, spec, (live_sts or {}).get("spec", {}).get("replicas"),
                              observed.scale.allowed, adopt)
    status = {
        "observedGeneration": meta.get("generation"),
        "desiredBrokers": spec.brokers.replicas,
        "bootstrapServers": builders.bootstrap_servers(name, namespace, spec),
        "listeners": listener_status(kube, name, namespace, spec, live_services),
        "gatewayAddress": builders.gateway_address(name, namespace) if spec.gateway.replicas > 0 else None,
        "rolling": waiting,
        "autoRebalance": auto.status,
    }
    refused = None if observed.scale.allowed or auto.holds_scale_down else observed.scale.reason
    return ClusterOutcome(status, refused, waiting, applied, gateway_refused=plan.gateway_refused,
                          gateway_pending=plan.gateway_pending,
                          rebalancing=auto.waiting, gateway_acls=grant)


def _roll(kube: Kube, body: Mapping[str, Any], spec: ClusterSpec, observed: cluster_plan.Observed,
          plan: cluster_plan.ClusterPlan, settings: OperatorSettings,
          client: admin.ControllerClient | None) -> str | None:
    """One rolling-restart step of existing brokers; what the cluster waits for, or None."""
    replicas, host_ips = observed.scale.replicas, observed.host_ips
    if observed.statefulsets.get(builders.names(body["metadata"]["name"])["brokers"]) is not None:
        step = roll_step(kube, body, spec, replicas, settings, plan.security, client, plan.external, plan.children)
        if not step.done:
            return step.reason
    if any(li.type == "nodeport" and li.tls for li in spec.listeners) and len(host_ips) < replicas:
        # Their certificates need the nodes' addresses: look again once every pod is scheduled.
        return f"waiting for the broker pods' node addresses ({len(host_ips)}/{replicas} scheduled)"
    if spec.gateway.replicas > 0 and spec.gateway.service_type == "NodePort" and not observed.gateway_host_ips:
        return "waiting for the gateway pods' node addresses (its certificate names them)"
    return None


def observe_cluster(kube: Kube, body: Mapping[str, Any], spec: ClusterSpec, settings: OperatorSettings,
                    logger: logging.Logger) -> tuple[cluster_plan.Observed, admin.ControllerClient | None]:
    """What the plan needs, read from the API server (and, for a scale-down, from the active
    controller: which partitions the brokers to remove hold; its client is returned for reuse)."""
    name, namespace = body["metadata"]["name"], body["metadata"]["namespace"]
    names = builders.names(name)
    live_sts = kube.get("apps/v1", "StatefulSet", namespace, names["brokers"])
    current = (live_sts or {}).get("spec", {}).get("replicas")
    client, metadata = None, None
    if current is not None and spec.brokers.replicas < current:
        client = controller_client(kube, body, settings)
        try:
            metadata = client.cluster()
        except (admin.Unreachable, admin.AdminError) as e:
            logger.warning("scale-down check: %s", e)
    scale = rolling.plan_scale(current, spec.brokers.replicas, metadata)
    statefulsets = {names["brokers"]: live_sts}
    if spec.zookeeper.managed is not None:
        statefulsets[names["zookeeper"]] = kube.get("apps/v1", "StatefulSet", namespace, names["zookeeper"])
    services = {n: kube.get("v1", "Service", namespace, n)
                for n in cluster_plan.observed_service_names(name, spec, scale.replicas)}
    digest = kube.get("v1", "Secret", namespace, principals.zookeeper_secret_name(name))
    gateway = spec.gateway.replicas > 0
    tokens = kube.get("v1", "Secret", namespace, gateway_security.tokens_secret_name(name)) if gateway else None
    node_port_gateway = gateway and spec.gateway.service_type == "NodePort"
    gateway_hosts = host_ips(kube, name, namespace, "gateway") if node_port_gateway else {}
    gateway_users = {u: kube.get("odradek.dev/v1alpha1", "OdradekUser", namespace, u) for u in spec.gateway.users}
    nodes = node_addresses(kube, logger) if node_port_gateway or any(
        li.type == "nodeport" and li.tls for li in spec.listeners) else ()
    ref = tiered_storage.credentials_ref(spec)
    return cluster_plan.Observed(scale, statefulsets, broker_host_ips(kube, name, namespace), services,
                                 certs.read_existing(kube, name, namespace), digest, gateway_tokens=tokens,
                                 gateway_host_ips=tuple(sorted(set(gateway_hosts.values()))),
                                 gateway_users=gateway_users, node_ips=nodes,
                                 tiered_credentials=kube.get("v1", "Secret", namespace, ref.name) if ref else None), client


def _apply(kube: Kube, adopt: Callable[[list[dict]], None], objects: Sequence[dict]) -> dict[str, dict]:
    """Adopt and apply ``objects`` in order; name -> the object as the API server returned it."""
    adopt(list(objects))
    return {o["metadata"]["name"]: kube.apply(o) for o in objects}


def host_ips(kube: Kube, name: str, namespace: str, component: str) -> dict[str, str]:
    """Pod name -> the address of the node it runs on, for ``component``'s scheduled pods."""
    out = {}
    for pod in kube.list("v1", "Pod", namespace, _selector(builders.selector(name, component))):
        ip = (pod.get("status") or {}).get("hostIP")
        if ip:
            out[pod["metadata"]["name"]] = ip
    return out


def node_addresses(kube: Kube, logger: logging.Logger) -> tuple[str, ...]:
    """Every Node's InternalIP and ExternalIP addresses (what a pod's ``status.hostIP`` is one of),
    for the brokers' certificates before their pods are scheduled; () where the operator may not
    list Nodes (the chart's ``rbac.nodeAddresses``: then they name the nodes once pods run there)."""
    try:
        nodes = kube.list("v1", "Node", None)
    except kube.ApiException as e:
        if e.status != 403:
            raise
        logger.debug("listing Nodes is not allowed: certificates name the brokers' nodes once scheduled")
        return ()
    return tuple(sorted({a["address"] for n in nodes for a in (n.get("status") or {}).get("addresses") or []
                         if a.get("type") in NODE_ADDRESS_TYPES and a.get("address")}))


def broker_host_ips(kube: Kube, name: str, namespace: str) -> dict[int, str]:
    """Broker ordinal -> the address of the node its pod runs on (scheduled pods only)."""
    return {int(pod.rpartition("-")[2]): ip for pod, ip in host_ips(kube, name, namespace, "broker").items()}


def listener_status(kube: Kube, name: str, namespace: str, spec: ClusterSpec,
                    live: Mapping[str, Mapping[str, Any]] | None = None) -> list[dict] | None:
    """``status.listeners``: each listener's type, bootstrap address and the CA Secret to trust
    (``live``: the listener Services as just applied; others are read)."""
    specs = spec.listeners
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


def renewal_due(kube: Kube, name: str, namespace: str, spec: ClusterSpec) -> str | None:
    """The certificates the cluster's next reconcile would renew because of time alone (for the
    status timer: a due renewal is triggered through ``certs.RENEWAL_ANNOTATION``), or None.
    Each run also exports when every certificate expires (``metrics.CERTIFICATES``)."""
    existing = certs.read_existing(kube, name, namespace)
    try:
        metrics.CERTIFICATES.record(namespace, name, certs.expiry_times(existing))
        due = certs.expiring(name, spec, existing)
    except ValueError:   # an unusable user-supplied CA: the reconcile reports it
        return None
    return ", ".join(due) or None


def tiered_credentials_rotated(kube: Kube, name: str, namespace: str, spec: ClusterSpec) -> str | None:
    """The credentials Secret of ``spec.tieredStorage`` when it holds another key than the brokers'
    file (for the status timer: the reconcile it triggers rewrites the file and rolls them), or None."""
    ref = tiered_storage.credentials_ref(spec)
    if ref is None:
        return None
    source = kube.get("v1", "Secret", namespace, ref.name)
    written = kube.get("v1", "Secret", namespace, tiered_storage.secret_name(name))
    return ref.name if tiered_storage.rotated(spec, source, written) else None


def rack_cluster_role(spec: ClusterSpec, settings: OperatorSettings) -> str | None:
    """The ClusterRole (``nodes get``) the brokers' ServiceAccount is bound to when the cluster
    uses racks: ``ODRADEK_OPERATOR_RACK_CLUSTERROLE``, set by the chart (``rbac.brokerRack``);
    empty means the chart grants no node access, so a rack-aware cluster is an invalid spec.
    ``None`` when the operator does not manage rack bindings at all."""
    role = settings.rack_cluster_role
    if not role:
        if spec.rack_topology_key:
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


def grow_claims(kube: Kube, name: str, namespace: str, spec: ClusterSpec, replicas: int) -> list[str]:
    """Patch the brokers' PVCs up to ``brokers.storage.size`` (never down)."""
    if not spec.brokers.storage.persistent:
        return []
    want = spec.brokers.storage.size
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


def roll_step(kube: Kube, body: Mapping[str, Any], spec: ClusterSpec, replicas: int, settings: OperatorSettings,
              security: SecurityPlan, client: admin.ControllerClient | None = None,
              external: Mapping[tuple[str, int], str | None] | None = None,
              children: Sequence[Mapping[str, Any]] = ()) -> rolling.RollStep:
    """One step of a rolling restart: delete at most one outdated broker pod (``external`` and
    ``security``'s certificate versions make each broker's own hash: ``revisions``), once
    ZooKeeper and the controller (their workloads among ``children``, as applied) have rolled."""
    name, namespace = body["metadata"]["name"], body["metadata"]["namespace"]
    listed = kube.list("v1", "Pod", namespace, _selector(builders.selector(name, "broker")))
    marked = set(manual.spread_cluster_request(kube, body, listed))   # odradek.dev/manual-rolling-update
    pods = [replace(v, manual=v.manual or v.name in marked) for v in map(rolling.PodView.from_pod, listed)]
    desired = builders.broker_revision(name, namespace, spec, security, replicas, external)
    if all(p.current(desired) for p in pods):
        return rolling.plan_roll(pods, desired, replicas, 0)
    first = dependencies_rolling(kube, name, namespace, spec, children)
    if first:   # the controller is not asked: its answer may be about to change
        return rolling.plan_roll(pods, desired, replicas, None, dependencies=first)
    urp, at_risk = manual.roll_safety(client or controller_client(kube, body, settings),
                                      int(spec.brokers.config.get(manual.MIN_ISR, "1")))
    step = rolling.plan_roll(pods, desired, replicas, urp, at_risk)
    if step.action == "restart":
        kube.delete("v1", "Pod", namespace, step.pod)
    return step


def dependencies_rolling(kube: Kube, name: str, namespace: str, spec: ClusterSpec,
                         children: Sequence[Mapping[str, Any]]) -> str | None:
    """What the managed ZooKeeper's or the controller's own roll still does (the first found,
    ``rolling.dependency_rolling``), from their workloads among ``children``; None when done."""
    n = builders.names(name)
    dependencies = {("StatefulSet", n["zookeeper"]): "zookeeper", ("Deployment", n["controller"]): "controller"}
    for child in children:
        component = dependencies.get((child["kind"], child["metadata"]["name"]))
        why = component and _dependency_rolling(kube, name, namespace, spec, child, component)
        if why:
            return why
    return None


def _dependency_rolling(kube: Kube, name: str, namespace: str, spec: ClusterSpec, child: Mapping[str, Any],
                        component: str, pods: Sequence[Mapping[str, Any]] | None = None) -> str | None:
    """``rolling.dependency_rolling`` of the ZooKeeper StatefulSet or the controller Deployment
    ``child`` (as applied), from its ``pods`` (listed when None); ZooKeeper must also have been
    Ready for the settle."""
    zk = component == "zookeeper"
    settle = rolling.zookeeper_settle_s(spec.brokers.config, zookeeper.TICK_MS) if zk else 0.0
    if pods is None:
        pods = kube.list("v1", "Pod", namespace, _selector(builders.selector(name, component)))
    return rolling.dependency_rolling("ZooKeeper" if zk else "the controller", child["spec"]["template"],
                                      child["spec"]["replicas"], pods, zk, settle)


HELD_BEHIND_ZOOKEEPER = ("controller", "gateway")


def hold_behind_zookeeper(kube: Kube, name: str, namespace: str, spec: ClusterSpec,
                          children: Sequence[dict]) -> str | None:
    """Pause the controller and gateway Deployments among ``children`` (``spec.paused``: a new
    template waits) while the managed ZooKeeper rolls, until it has settled, as Strimzi rolls
    ZooKeeper before the rest. A controller started while its only ZooKeeper server restarts
    cannot connect and exits, and every process starting beside ZooKeeper's JVM on a loaded
    node delays the brokers' return to the sessions it restored (CI's e2e renewal started all
    three at once, and two brokers left their ISRs). A hold starts when a ZooKeeper pod runs a
    previous template and lasts while one is paused, so a new cluster starts everything at once.
    Applied without ``paused`` they resume. Returns why they are held, or None."""
    n = builders.names(name)
    zk = next((c for c in children if (c["kind"], c["metadata"]["name"]) == ("StatefulSet", n["zookeeper"])), None)
    if zk is None:
        return None
    wanted = {n[component] for component in HELD_BEHIND_ZOOKEEPER}
    deployments = [c for c in children if c["kind"] == "Deployment" and c["metadata"]["name"] in wanted]
    live = {d["metadata"]["name"]: kube.get("apps/v1", "Deployment", namespace, d["metadata"]["name"])
            for d in deployments}
    pods = kube.list("v1", "Pod", namespace, _selector(builders.selector(name, "zookeeper")))
    holding = any(((obj or {}).get("spec") or {}).get("paused") for obj in live.values())
    why = (holding or rolling.outdated(zk["spec"]["template"], pods)) and \
        _dependency_rolling(kube, name, namespace, spec, zk, "zookeeper", pods)
    held = [d for d in deployments if live[d["metadata"]["name"]] is not None]
    if not why or not held:
        return None
    for deployment in held:
        deployment["spec"]["paused"] = True
    return f"{why} (holding {', '.join(d['metadata']['name'] for d in held)})"


def cluster_health(kube: Kube, body: Mapping[str, Any], spec: ClusterSpec, settings: OperatorSettings) -> ClusterHealth:
    """Read the children's status and the controller's health."""
    name, namespace = body["metadata"]["name"], body["metadata"]["namespace"]
    names = builders.names(name)

    def ready(kind: str, obj_name: str, field_name: str) -> int:
        obj = kube.get("apps/v1", kind, namespace, obj_name)
        return int(((obj or {}).get("status") or {}).get(field_name) or 0)

    zk_desired, gw_desired = spec.zookeeper.replicas, spec.gateway.replicas
    active, urp = None, None
    try:
        health = controller_client(kube, body, settings).health()
        active, urp = health.get("id"), health.get("under_replicated_partitions")
    except (admin.Unreachable, admin.AdminError, OSError):
        pass
    return ClusterHealth(
        brokers_desired=spec.brokers.replicas,
        brokers_ready=ready("StatefulSet", names["brokers"], "readyReplicas"),
        controllers_available=ready("Deployment", names["controller"], "availableReplicas"),
        zookeeper_desired=zk_desired,
        zookeeper_ready=ready("StatefulSet", names["zookeeper"], "readyReplicas") if zk_desired else 0,
        gateway_desired=gw_desired,
        gateway_available=ready("Deployment", names["gateway"], "availableReplicas") if gw_desired else 0,
        active_controller=active, under_replicated=urp,
        rolling=(body.get("status") or {}).get("rolling"),
        gateway_pending=gateway_users_pending((body.get("status") or {}).get("conditions")),
        gateway_rolled_out=not gw_desired or rolled_out(kube.get("apps/v1", "Deployment", namespace, names["gateway"])))


def rolled_out(deployment: Mapping[str, Any] | None) -> bool:
    """The Deployment's current spec is observed and no pod of an older one is left (as
    ``kubectl rollout status`` judges; availability is counted apart)."""
    if deployment is None:
        return False
    status = deployment.get("status") or {}
    pods, updated = status.get("replicas") or 0, status.get("updatedReplicas") or 0   # absent: 0
    return status.get("observedGeneration", 0) >= deployment["metadata"].get("generation", 0) and pods <= updated


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
               logger: logging.Logger, settings: OperatorSettings, status: Mapping[str, Any]) -> dict[str, Any]:
    """Make the controller's topic match the spec (one it created or adopted); the status fields."""
    configs = validation.validate_topic(name, spec)
    topic = validation.topic_name(name, spec)
    cluster = topic_cluster(kube, namespace, meta, spec)
    client = controller_client(kube, cluster, settings)
    current = topics.find(client.cluster(), topic)
    topics.check_ownership(topic, meta, status, current)
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
    change = None if plan.create else replicas_change.step(client, current, spec.get("replicas"),
                                                           status.get("replicasChange"))
    return {"topicName": topic, "topicId": current.get("topic_id"), "partitions": partitions,
            "replicas": rf, "cluster": cluster["metadata"]["name"], "observedGeneration": meta.get("generation"),
            "replicasChange": change}


def cluster_for_cleanup(kube: Kube, namespace: str, meta: Mapping[str, Any],
                        spec: Mapping[str, Any]) -> tuple[dict | None, str]:
    """The cluster a deleted resource is cleaned up in, or (None, why) when its finalizer must be
    released at once instead: the namespace is terminating (the controller's pods go with it),
    the cluster is gone or being deleted, or the resource never named one."""
    if _terminating(kube, namespace):
        return None, f"namespace {namespace} is terminating"
    try:
        return topic_cluster(kube, namespace, meta, spec), ""
    except (ClusterMissing, validation.SpecError) as e:
        return None, str(e)


def _terminating(kube: Kube, namespace: str) -> bool:
    """Whether ``namespace`` is being deleted. Under namespaced RBAC (the chart's
    ``watchNamespaces``) Namespaces are not readable: then not known here, and the cluster's own
    deletion (the namespace's deletes it too) releases the resource instead."""
    try:
        ns = kube.get("v1", "Namespace", None, namespace)
    except kube.ApiException as e:
        if e.status != 403:
            raise
        return False
    return ns is not None and (ns.get("status") or {}).get("phase") == "Terminating"


def release_or_delete_topic(kube: Kube, name: str, namespace: str, meta: Mapping[str, Any],
                            spec: Mapping[str, Any], logger: logging.Logger, settings: OperatorSettings,
                            status: Mapping[str, Any]) -> str:
    """On OdradekTopic deletion: delete the topic it created or adopted, or release (its cluster
    is gone, or the topic is not its own)."""
    try:
        topic = validation.topic_name(name, spec)
    except validation.SpecError as e:
        return f"{e}: releasing without deleting the topic"
    cluster, why = cluster_for_cleanup(kube, namespace, meta, spec)
    if cluster is None:
        return f"{why}: releasing without deleting the topic"
    client = controller_client(kube, cluster, settings)
    current = topics.find(client.cluster(), topic)
    if current is not None and not topics.owned(status, current):
        return f"topic {topic} was not created or adopted by this OdradekTopic: released without deleting it"
    try:
        client.delete_topic(topic)
    except admin.AdminError as e:
        if e.code != admin.UNKNOWN_TOPIC:
            raise
        return f"topic {topic} was already gone"
    return f"topic {topic} deleted"
