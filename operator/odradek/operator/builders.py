"""Pure builders of every Kubernetes object an OdradekCluster owns.

Each ``build_*`` takes the cluster's name, namespace and ``spec.ClusterSpec`` (parsed once by
``validation.parse_cluster``) and, for the controller, broker and gateway pods, the
``security.SecurityPlan`` (``principals.security_plan``: certificates, probes, settings), and
returns the manifest dict that is applied, as it is applied (server-side apply);
``build_children`` returns them all in apply order. No I/O and no pass over their output
afterwards: the unit tests call these directly. Owner references are added by the handler
(``kopf.adopt``).

Names (cluster ``c``):
- ``c-config`` ConfigMap: ZooKeeper connect string, cluster name, ``broker.properties``;
- ``c-zookeeper`` StatefulSet + ``c-zookeeper-headless`` / ``c-zookeeper`` Services and the
  ``c-zookeeper-config`` ConfigMap (managed mode; TLS only: ``zookeeper``);
- ``c-controller`` Deployment + ``c-controller`` headless Service (the operator finds the
  active instance by asking each endpoint's health route, ``control_plane.HEALTH``);
- ``c-brokers`` StatefulSet + ``c-brokers`` headless Service (stable per-broker DNS names,
  which each broker advertises) + ``c-bootstrap`` Service + ``c-brokers`` PodDisruptionBudget;
- ``c-gateway`` Deployment + Service, only when ``gateway.replicas`` > 0 (HTTPS, tokens required:
  ``gateway_security``), and the ``c-gateway-pods`` headless Service naming each gateway pod (the
  schema registry's replicas forward writes to their primary's pod: ``gateway_security``);
- with ``rack.topologyKey``: ``c-brokers`` ServiceAccount (the brokers' init container reads
  its Node as it) and the cluster-scoped ClusterRoleBinding ``odradek-rack-<namespace>-c`` of
  it to the chart's ``nodes get`` ClusterRole (``build_rack_binding``, not owned: a cluster-scoped
  object cannot have a namespaced owner, so the operator deletes it).

Broker ids are the StatefulSet ordinals (label ``apps.kubernetes.io/pod-index``).
"""

from __future__ import annotations

import copy
import json
import shlex
from typing import Any, Mapping

from odradek.cluster import control_plane
from odradek.config.broker import small_cluster_settings
from odradek.operator import listeners as listener_specs
from odradek.operator import gateway_security, pod_security, revisions, tiered_storage, zookeeper
from odradek.operator.security import PodSecurity, SecurityPlan
from odradek.operator.spec import ClusterSpec

GROUP = "odradek.dev"
VERSION = "v1alpha1"
KAFKA_PORT = 9092
BROKER_INTERNAL_PORT = 9093
CONTROLLER_PORT = 8080
GATEWAY_PORT = 8000
REGISTRY_URL_ENV = "ODRADEK_GATEWAY_SCHEMA_REGISTRY_URL"   # the gateway's --schema-registry-url as its env var
METRICS_PORT = 9404  # brokers' and controllers' /metrics (Strimzi's JMX-exporter port; the chart's PodMonitor)
ZK_CLIENT_PORT = zookeeper.CLIENT_PORT   # TLS (secureClientPort): the managed ensemble has no plaintext port
RACK_DIR = "/etc/odradek/rack"
DATA_DIR = "/var/lib/odradek/data"
CONFIG_HASH_ANNOTATION = revisions.CONFIG_HASH_ANNOTATION
PAUSE_ANNOTATION = "odradek.dev/pause-reconciliation"
CLUSTER_LABEL = "odradek.dev/cluster"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
PROBE_PERIOD_S, PROBE_TIMEOUT_S, PROBE_FAILURES = 10, 8, 3   # Strimzi's period, threshold; an exec probe starts Python
# An HTTP probe's answer may take this long (Strimzi's timeoutSeconds; Kubernetes' default is 1 s):
# a gateway encoding a large read on a loaded node missed three 1 s liveness probes in a row
# and was restarted in the middle of a client's reads (the e2e roll test).
HTTP_PROBE_TIMEOUT_S = 5
GATEWAY_START_S = 120   # how long a gateway may take to answer its first liveness probe


# -- names and labels ---------------------------------------------------------------------

def names(cluster: str) -> dict[str, str]:
    return {
        "config": f"{cluster}-config",
        "zookeeper": f"{cluster}-zookeeper",
        "zookeeper_headless": f"{cluster}-zookeeper-headless",
        "controller": f"{cluster}-controller",
        "brokers": f"{cluster}-brokers",
        "bootstrap": f"{cluster}-bootstrap",
        "gateway": f"{cluster}-gateway",
        "gateway_pods": f"{cluster}-gateway-pods",
    }


def labels(cluster: str, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "odradek",
        "app.kubernetes.io/instance": cluster,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": "odradek-operator",
        CLUSTER_LABEL: cluster,
    }


def selector(cluster: str, component: str) -> dict[str, str]:
    return {"app.kubernetes.io/instance": cluster, "app.kubernetes.io/component": component}


def _meta(name: str, namespace: str, cluster: str, component: str) -> dict:
    return {"name": name, "namespace": namespace, "labels": labels(cluster, component)}


# -- addresses ----------------------------------------------------------------------------

def zookeeper_connect(cluster: str, namespace: str, spec: ClusterSpec) -> str:
    if spec.zookeeper.external_connect is not None:
        return spec.zookeeper.external_connect
    return f"{names(cluster)['zookeeper']}.{namespace}.svc:{ZK_CLIENT_PORT}"


def bootstrap_servers(cluster: str, namespace: str, spec: ClusterSpec | None = None) -> str:
    """The bootstrap Service at the first listener of ``spec.listeners`` (9092 without them)."""
    listeners = spec.listeners if spec is not None else ()
    return f"{names(cluster)['bootstrap']}.{namespace}.svc:{listeners[0].port if listeners else KAFKA_PORT}"


def broker_host(cluster: str, namespace: str, ordinal: int) -> str:
    n = names(cluster)
    return f"{n['brokers']}-{ordinal}.{n['brokers']}.{namespace}.svc"


def broker_address(cluster: str, namespace: str, ordinal: int) -> str:
    """The stable DNS name broker ``ordinal`` advertises (through the headless Service)."""
    n = names(cluster)
    return f"{n['brokers']}-{ordinal}.{n['brokers']}.{namespace}.svc:{KAFKA_PORT}"


def gateway_address(cluster: str, namespace: str) -> str:
    """The gateway's Service URL (HTTPS: ``gateway_security``), what it advertises in ``base_uri``."""
    return f"https://{names(cluster)['gateway']}.{namespace}.svc:{GATEWAY_PORT}"


# -- the pieces ---------------------------------------------------------------------------

def config_hash(cluster: str, namespace: str, spec: ClusterSpec,
                external: Mapping[tuple[str, int], str | None] | None = None, certificates: str = "",
                tiered_credentials: str = "") -> str:
    """What a restart of every broker must pick up (``revisions.config_hash``); with every load
    balancer's address and the version of every broker's certificate, the hash from before
    the per-broker split."""
    return revisions.config_hash(zookeeper_connect(cluster, namespace, spec), spec, external, certificates,
                                 tiered_credentials)


def broker_revision(cluster: str, namespace: str, spec: ClusterSpec, security: SecurityPlan, replicas: int,
                    external: Mapping[tuple[str, int], str | None] | None = None) -> revisions.Revision:
    """The shared hash and each broker's own (``revisions``: adding broker N restarts no other)."""
    return revisions.desired(zookeeper_connect(cluster, namespace, spec), spec, replicas, external,
                             security.broker_pod_certificates, security.broker_certificates,
                             security.tiered_credentials)


def build_config_map(cluster: str, namespace: str, spec: ClusterSpec,
                     external: Mapping[tuple[str, int], str | None] | None = None, replicas: int | None = None) -> dict:
    props = "".join(f"{k}={v}\n" for k, v in spec.brokers.config.items())
    data = {"zookeeper.connect": zookeeper_connect(cluster, namespace, spec),
            "cluster": cluster,
            "bootstrap.servers": bootstrap_servers(cluster, namespace, spec),
            "broker.properties": props}
    listeners = spec.listeners
    if any(li.external for li in listeners):
        count = spec.brokers.replicas if replicas is None else replicas
        fallback = {(li.name, i): f"{svc}.{namespace}.svc:{li.port}" for li in listeners if li.external
                    for i, svc in enumerate(listener_specs.service_names(cluster, li, count)[1])}
        data[listener_specs.ADVERTISED_TABLE] = listener_specs.advertised_table(
            {i: broker_host(cluster, namespace, i) for i in range(count)}, listeners, external or {}, fallback)
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": _meta(names(cluster)["config"], namespace, cluster, "config"),
        "data": data,
    }


def _config_env(cluster: str) -> list[dict]:
    ref = names(cluster)["config"]
    return [
        {"name": "ODRADEK_ZOOKEEPER", "valueFrom": {"configMapKeyRef": {"name": ref, "key": "zookeeper.connect"}}},
        {"name": "ODRADEK_CLUSTER", "valueFrom": {"configMapKeyRef": {"name": ref, "key": "cluster"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ]


def _pod_template(cluster: str, component: str, spec: ClusterSpec, pod_spec: dict,
                  annotations: Mapping[str, str] | None = None) -> dict:
    """A pod template, hardened (``pod_security``), with ``spec.template.pod`` overrides merged
    in (labels, annotations, scheduling fields, security context, image pull secrets)."""
    override = spec.pod_template
    meta_o = override.get("metadata") or {}
    meta = {"labels": {**(meta_o.get("labels") or {}), **labels(cluster, component)},
            "annotations": {**(meta_o.get("annotations") or {}), **(annotations or {})}}
    if not meta["annotations"]:
        del meta["annotations"]
    pod = copy.deepcopy(pod_spec)
    pod_security.harden(pod, component)
    for key in ("nodeSelector", "tolerations", "affinity", "priorityClassName", "securityContext",
                "imagePullSecrets", "topologySpreadConstraints", "serviceAccountName"):
        if key in override:
            pod[key] = copy.deepcopy(override[key])
    return {"metadata": meta, "spec": pod}


def readiness_probe(handler: Mapping[str, Any]) -> dict:
    """A control plane's readiness probe: ``handler`` (``httpGet``; ``principals``' ``exec``) and timings."""
    return {**copy.deepcopy(dict(handler)), "periodSeconds": PROBE_PERIOD_S, "timeoutSeconds": PROBE_TIMEOUT_S,
            "failureThreshold": PROBE_FAILURES}


def _http_probe(port: int, route: control_plane.Route) -> dict:   # a control plane without mutual TLS
    return readiness_probe({"httpGet": {"path": route.path(), "port": port}})


def _container(name: str, spec: ClusterSpec, args: list[str], ports: list[dict],
               resources: Mapping[str, Any] | None, env: list[dict], probe: Mapping[str, Any]) -> dict:
    c = {"name": name, "image": spec.image, "imagePullPolicy": spec.image_pull_policy,
         "args": args, "ports": ports, "env": env, "readinessProbe": copy.deepcopy(dict(probe)),
         "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                             "capabilities": {"drop": ["ALL"]}}}
    if resources:
        c["resources"] = copy.deepcopy(dict(resources))
    return c


def build_zookeeper(cluster: str, namespace: str, spec: ClusterSpec,
                    security: PodSecurity = PodSecurity()) -> list[dict]:
    """The managed ensemble (official ``zookeeper`` image): its ``zoo.cfg`` ConfigMap (TLS only,
    ``zookeeper.zoo_cfg``), headless + client Services and a StatefulSet whose pods take
    ``myid`` = ordinal + 1 and ``security``'s certificates. Empty in external mode."""
    managed = spec.zookeeper.managed
    if managed is None:
        return []
    replicas, storage = managed.replicas, managed.storage
    n = names(cluster)
    config = zookeeper.build_config_map(cluster, namespace, replicas, labels(cluster, "zookeeper"))
    ports = [{"name": "client", "port": ZK_CLIENT_PORT}, {"name": "peer", "port": zookeeper.PEER_PORT},
             {"name": "election", "port": zookeeper.ELECTION_PORT}]
    headless = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": _meta(n["zookeeper_headless"], namespace, cluster, "zookeeper"),
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                 "selector": selector(cluster, "zookeeper"), "ports": ports},
    }
    # Not-ready addresses too: a restarted server restores its clients' sessions and expires
    # those not back within their timeout (the brokers' 18 s), counted from its start. Behind
    # readiness, a client got through only after the probe passed and the Service's endpoints
    # and kube-proxy caught up: on a loaded node the single-server ensemble's roll expired every
    # broker's session (CI's e2e certificate renewal). A server not serving yet refuses.
    client = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": _meta(n["zookeeper"], namespace, cluster, "zookeeper"),
        "spec": {"selector": selector(cluster, "zookeeper"), "ports": ports[:1], "publishNotReadyAddresses": True},
    }
    cfg = f"{zookeeper.CONFIG_DIR}/{zookeeper.CONFIG_FILE}"   # by path: the entrypoint's own zoo.cfg is not used
    container = {
        "name": "zookeeper", "image": managed.image,
        "command": ["bash", "-c", 'export ZOO_MY_ID=$(( ${HOSTNAME##*-} + 1 )); '
                                  f'exec /docker-entrypoint.sh zkServer.sh start-foreground {cfg}'],
        "ports": [{"name": p["name"], "containerPort": p["port"]} for p in ports],
        "readinessProbe": {"tcpSocket": {"port": ZK_CLIENT_PORT}, "periodSeconds": 5},
        "volumeMounts": [{"name": "data", "mountPath": zookeeper.DATA_DIR},
                         {"name": "datalog", "mountPath": "/datalog"},   # the image's log directory: scratch
                         {"name": "config", "mountPath": zookeeper.CONFIG_DIR, "readOnly": True}],
    }
    if managed.resources:
        container["resources"] = copy.deepcopy(dict(managed.resources))
    claim = {"metadata": {"name": "data"},
             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage.size}}}}
    if storage.storage_class:
        claim["spec"]["storageClassName"] = storage.storage_class
    pod = {"containers": [container],
           "volumes": [{"name": "datalog", "emptyDir": {}},
                       {"name": "config", "configMap": {"name": zookeeper.config_map_name(cluster)}}],
           "securityContext": {"fsGroup": 1000}}
    _secure(pod, container, security)
    annotations = {CONFIG_HASH_ANNOTATION: zookeeper.config_hash(config), **security.annotations}
    sts = {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": _meta(n["zookeeper"], namespace, cluster, "zookeeper"),
        "spec": {"replicas": replicas, "serviceName": n["zookeeper_headless"],
                 "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": selector(cluster, "zookeeper")},
                 "template": _pod_template(cluster, "zookeeper", spec, pod, annotations),
                 "volumeClaimTemplates": [claim]},
    }
    return [config, headless, client, sts]


def _secure(pod: dict, container: dict, security: PodSecurity) -> None:
    """Give the pod being built its component's security (``security.PodSecurity``): the Secret
    volumes and mounts after its own, the settings and arguments after its own."""
    if security.volumes:
        pod["volumes"] = [*pod.get("volumes", []), *copy.deepcopy(list(security.volumes))]
        container["volumeMounts"] = [*container.get("volumeMounts", []), *copy.deepcopy(list(security.mounts))]
    args = [*(a for key, value in security.settings.items() for a in ("--config", f"{key}={value}")), *security.args]
    if args:   # ZooKeeper's container has none (its settings are in zoo.cfg)
        container["args"] = [*container.get("args", []), *args]


def build_controller(cluster: str, namespace: str, spec: ClusterSpec, security: SecurityPlan) -> list[dict]:
    """The controller Deployment (one active, the others stand by) and its headless Service.

    It advertises its DNS name, which the shell makes from ``$POD_IP``
    (``SecurityPlan.controller_advertised_url``): the container runs ``sh -c``, its other
    arguments quoted as they are (the kubelet expands their ``$(VAR)`` references first)."""
    n = names(cluster)
    args = ["controller", "--zookeeper", "$(ODRADEK_ZOOKEEPER)", "--cluster", "$(ODRADEK_CLUSTER)",
            "--listen", f"0.0.0.0:{CONTROLLER_PORT}", "--id", "$(POD_NAME)", "--metrics-port", str(METRICS_PORT)]
    container = _container("controller", spec, args, [{"name": "http", "containerPort": CONTROLLER_PORT},
                                                      {"name": "metrics", "containerPort": METRICS_PORT}],
                           spec.controller.resources, _config_env(cluster),
                           security.controller.probe or _http_probe(CONTROLLER_PORT, control_plane.HEALTH))
    pod = {"containers": [container], "securityContext": {"runAsNonRoot": True}}
    _secure(pod, container, security.controller)
    url = security.controller_advertised_url
    container["command"] = ["sh", "-c", f"exec odradek {shlex.join(container.pop('args'))} --advertised-url \"{url}\""]
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": _meta(n["controller"], namespace, cluster, "controller"),
        "spec": {"replicas": spec.controller.replicas,
                 "selector": {"matchLabels": selector(cluster, "controller")},
                 "template": _pod_template(cluster, "controller", spec, pod, security.controller.annotations)},
    }
    service = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": _meta(n["controller"], namespace, cluster, "controller"),
        "spec": {"clusterIP": "None", "selector": selector(cluster, "controller"),
                 "ports": [{"name": "http", "port": CONTROLLER_PORT}]},
    }
    return [service, deployment]


def _broker_pod(cluster: str, spec: ClusterSpec, security: SecurityPlan) -> dict[str, Any]:
    """The brokers' pod spec: the broker container (its id is the pod ordinal), the init
    containers of external listeners and racks, its data volume unless persistent, its security."""
    host = f"$(POD_NAME).{names(cluster)['brokers']}.$(POD_NAMESPACE).svc"
    args = ["broker", "--id", "$(BROKER_ID)", "--data-dir", DATA_DIR,
            "--zookeeper", "$(ODRADEK_ZOOKEEPER)", "--cluster", "$(ODRADEK_CLUSTER)",
            *listener_specs.broker_args(spec, host, security.broker_tls),
            "--internal-listen", f"0.0.0.0:{BROKER_INTERNAL_PORT}",
            "--internal-advertised", f"{host}:{BROKER_INTERNAL_PORT}",
            "--config", f"metrics.port={METRICS_PORT}"]
    config = {**small_cluster_settings(spec.brokers.replicas, spec.brokers.config), **spec.brokers.config}
    for key, value in config.items():
        args += ["--config", f"{key}={value}"]
    env = [{"name": "BROKER_ID", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{POD_INDEX_LABEL}']"}}},
           *_config_env(cluster)]
    ports = [*({"name": p["name"], "containerPort": p["port"]} for p in listener_specs.kafka_ports(spec.listeners)),
             {"name": "internal", "containerPort": BROKER_INTERNAL_PORT},
             {"name": "metrics", "containerPort": METRICS_PORT}]
    container = _container("broker", spec, args, ports, spec.brokers.resources, env,
                           security.broker.probe or _http_probe(BROKER_INTERNAL_PORT, control_plane.READY))
    container["volumeMounts"] = [{"name": "data", "mountPath": DATA_DIR}]
    pod: dict[str, Any] = {"containers": [container], "terminationGracePeriodSeconds": 120,
                           "securityContext": {"runAsNonRoot": True, "fsGroup": 10001}}
    if any(li.external for li in spec.listeners):
        listener_specs.add_advertise_init(pod, container, names(cluster)["config"])
    rack_key = spec.rack_topology_key
    if rack_key:
        _add_rack_init(cluster, spec, pod, container, rack_key)
        pod["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": rack_key, "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": selector(cluster, "broker")}}]
    if not spec.brokers.storage.persistent:
        pod["volumes"] = [*pod.get("volumes", []), {"name": "data", "emptyDir": {}}]
    tiered_storage.add_to_broker(cluster, spec, pod, container)   # spec.tieredStorage: keys, credentials file
    _secure(pod, container, security.broker)
    return pod


def build_brokers(cluster: str, namespace: str, spec: ClusterSpec, security: SecurityPlan, replicas: int | None = None,
                  external: Mapping[tuple[str, int], str | None] | None = None) -> list[dict]:
    """Headless and bootstrap Services, the PodDisruptionBudget (``brokers.pdb``) and the brokers' StatefulSet.

    ``replicas`` overrides ``brokers.replicas`` (a refused scale-down keeps the current count).
    Updates use ``OnDelete``: the operator restarts pods one at a time (``rolling``).
    ``external``: the external listeners' addresses (``listeners.external_address``); with each
    broker's certificate version (``security``) they make its own hash (``revisions``)."""
    n, storage = names(cluster), spec.brokers.storage
    count = spec.brokers.replicas if replicas is None else replicas
    revision = broker_revision(cluster, namespace, spec, security, count, external)
    sts_spec: dict[str, Any] = {
        "replicas": count, "serviceName": n["brokers"],
        "podManagementPolicy": "Parallel", "updateStrategy": {"type": "OnDelete"},
        "selector": {"matchLabels": selector(cluster, "broker")},
        "template": _pod_template(cluster, "broker", spec, _broker_pod(cluster, spec, security),
                                  {**security.broker.annotations, **revision.annotations()}),
    }
    if storage.persistent:
        claim = {"metadata": {"name": "data", "labels": labels(cluster, "broker")},
                 "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage.size}}}}
        if storage.storage_class:
            claim["spec"]["storageClassName"] = storage.storage_class
        sts_spec["volumeClaimTemplates"] = [claim]
        policy = "Delete" if storage.delete_claim else "Retain"
        sts_spec["persistentVolumeClaimRetentionPolicy"] = {"whenDeleted": policy, "whenScaled": policy}
    kafka_ports = listener_specs.kafka_ports(spec.listeners)
    return [
        {"apiVersion": "v1", "kind": "Service",
         "metadata": _meta(n["brokers"], namespace, cluster, "broker"),
         "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                  "selector": selector(cluster, "broker"),
                  "ports": kafka_ports + [{"name": "internal", "port": BROKER_INTERNAL_PORT}]}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": _meta(n["bootstrap"], namespace, cluster, "broker"),
         "spec": {"selector": selector(cluster, "broker"), "ports": kafka_ports}},
        *([{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": _meta(n["brokers"], namespace, cluster, "broker"),
            "spec": {"maxUnavailable": spec.brokers.pdb.max_unavailable,
                     "selector": {"matchLabels": selector(cluster, "broker")}}}] if spec.brokers.pdb.enabled else []),
        {"apiVersion": "apps/v1", "kind": "StatefulSet",
         "metadata": _meta(n["brokers"], namespace, cluster, "broker"), "spec": sts_spec},
    ]


def _add_rack_init(cluster: str, spec: ClusterSpec, pod: dict, broker: dict, topology_key: str) -> None:
    """An init container writes the node's ``topology_key`` label to a shared emptyDir; the
    broker reads it with ``--rack-file`` (no downward API exists for node labels)."""
    rack_file = f"{RACK_DIR}/rack"
    init = _container("rack", spec, ["operator", "rack", "--node", "$(NODE_NAME)", "--topology-key", topology_key,
                                     "--output", rack_file], [], None,
                      [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}], {})
    del init["ports"], init["readinessProbe"]  # init containers take neither
    mount = {"name": "rack", "mountPath": RACK_DIR}
    init["volumeMounts"] = [mount]
    broker["volumeMounts"].append({**mount, "readOnly": True})
    broker["args"] += ["--rack-file", rack_file]
    pod["initContainers"] = [*pod.get("initContainers", []), init]
    pod["serviceAccountName"] = names(cluster)["brokers"]
    pod["automountServiceAccountToken"] = True
    pod["volumes"] = [*pod.get("volumes", []), {"name": "rack", "emptyDir": {}}]


def build_broker_account(cluster: str, namespace: str, spec: ClusterSpec) -> list[dict]:
    """The brokers' ServiceAccount, only with rack awareness (otherwise they need no API access)."""
    if not spec.rack_topology_key:
        return []
    return [{"apiVersion": "v1", "kind": "ServiceAccount",
             "metadata": _meta(names(cluster)["brokers"], namespace, cluster, "broker")}]


def rack_binding_name(cluster: str, namespace: str) -> str:
    return f"odradek-rack-{namespace}-{cluster}"


def build_rack_binding(cluster: str, namespace: str, cluster_role: str) -> dict:
    """Binds the brokers' ServiceAccount to ``cluster_role`` (the chart's ``nodes get`` role)."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": rack_binding_name(cluster, namespace),
                         "labels": {**labels(cluster, "broker"), "odradek.dev/namespace": namespace}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
            "subjects": [{"kind": "ServiceAccount", "name": names(cluster)["brokers"], "namespace": namespace}]}


def build_gateway(cluster: str, namespace: str, spec: ClusterSpec, security: SecurityPlan) -> list[dict]:
    """The HTTP gateway's Deployment and Service; empty when ``gateway.replicas`` is 0/absent."""
    gw = spec.gateway
    if gw.replicas <= 0:
        return []
    n = names(cluster)
    # With spec.listeners the gateway uses the replication listener, as the brokers do.
    bootstrap = (f"{n['bootstrap']}.{namespace}.svc:{listener_specs.REPLICATION_PORT}"
                 if spec.listeners else bootstrap_servers(cluster, namespace))
    args = ["gateway", "--bootstrap-servers", bootstrap,
            "--host", "0.0.0.0", "--port", str(GATEWAY_PORT),
            *gateway_security.args(cluster, namespace),
            # the console's throughput and partition sizes: each broker's metrics port, at the
            # host Metadata advertises for it (the gateway fills in {host})
            "--broker-metrics-urls", f"http://{{host}}:{METRICS_PORT}/metrics"]
    if listener_specs.secured(spec.listeners):
        # mutual TLS on the replication listener: each mapped user's certificate (gateway_security),
        # the gateway's own (the --kafka-ssl-* files of SecurityPlan.gateway) is no super user
        args += ["--kafka-security-protocol", "SSL"]
    readiness = {"httpGet": {"path": "/readyz", "port": GATEWAY_PORT}, "periodSeconds": 5,
                 "timeoutSeconds": HTTP_PROBE_TIMEOUT_S}
    container = _container("gateway", spec, args, [{"name": "http", "containerPort": GATEWAY_PORT}],
                           gw.resources, _config_env(cluster), readiness)
    container["livenessProbe"] = {"httpGet": {"path": "/healthz", "port": GATEWAY_PORT}, "periodSeconds": 10,
                                  "timeoutSeconds": HTTP_PROBE_TIMEOUT_S, "failureThreshold": 3}
    # liveness only once it has started (a startup probe): on a loaded node a gateway's start
    # (Python's imports) may outlast three failed liveness probes from its 10th second
    container["startupProbe"] = {**copy.deepcopy(container["livenessProbe"]), "periodSeconds": 5,
                                 "failureThreshold": GATEWAY_START_S // 5}
    pod: dict[str, Any] = {"containers": [container], "securityContext": {"runAsNonRoot": True}}
    gateway_security.secure_pod(cluster, spec, pod, container, security.gateway_users)
    _secure(pod, container, security.gateway)
    # the schema registry's own URL needs the pod's address, which only the shell can spell; an
    # env var, not --schema-registry-url: an image from before the registry ignores it (upgrades)
    container["command"] = ["sh", "-c", f'export {REGISTRY_URL_ENV}="{gateway_security.registry_url_word(cluster)}"; '
                                        'exec odradek "$@"', "odradek"]
    return [
        {"apiVersion": "v1", "kind": "Service",
         "metadata": _meta(n["gateway"], namespace, cluster, "gateway"),
         # a client stays on one replica: its consumer instances live there (base_uri is this Service)
         "spec": {"type": gw.service_type, "selector": selector(cluster, "gateway"), "sessionAffinity": "ClientIP",
                  "ports": [{"name": "http", "port": GATEWAY_PORT}]}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": _meta(n["gateway_pods"], namespace, cluster, "gateway"),
         # DNS names per pod (<ip-dashed>.<c>-gateway-pods.<ns>.svc), ready or not: a primary
         # that is starting still takes forwarded writes
         "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": selector(cluster, "gateway"),
                  "ports": [{"name": "http", "port": GATEWAY_PORT}]}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": _meta(n["gateway"], namespace, cluster, "gateway"),
         "spec": {"replicas": gw.replicas, "selector": {"matchLabels": selector(cluster, "gateway")},
                  "template": _pod_template(cluster, "gateway", spec, pod, security.gateway.annotations)}},
    ]


def build_listener_services(cluster: str, namespace: str, spec: ClusterSpec,
                            broker_replicas: int | None = None) -> list[dict]:
    """The external listeners' Services (applied first: the brokers advertise their node ports
    and load balancers' addresses)."""
    count = spec.brokers.replicas if broker_replicas is None else broker_replicas
    return listener_specs.build_external_services(cluster, namespace, spec.listeners, count,
                                                  labels(cluster, "broker"), selector(cluster, "broker"))


def build_children(cluster: str, namespace: str, spec: ClusterSpec, security: SecurityPlan,
                   broker_replicas: int | None = None,
                   external: Mapping[tuple[str, int], str | None] | None = None) -> list[dict]:
    """Every child but the listeners' Services, in apply order (config, ZooKeeper, controller,
    brokers, gateway), as they are applied."""
    return [build_config_map(cluster, namespace, spec, external, broker_replicas),
            *build_zookeeper(cluster, namespace, spec, security.zookeeper),
            *build_controller(cluster, namespace, spec, security),
            *build_broker_account(cluster, namespace, spec),
            *build_brokers(cluster, namespace, spec, security, broker_replicas, external),
            *build_gateway(cluster, namespace, spec, security)]


def pvc_names(cluster: str, replicas: int) -> list[str]:
    """The brokers' claims: ``data-<cluster>-brokers-<ordinal>``."""
    return [f"data-{names(cluster)['brokers']}-{i}" for i in range(replicas)]
