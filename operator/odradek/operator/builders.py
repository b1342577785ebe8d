"""Pure builders of every Kubernetes object an OdradekCluster owns.

Each ``build_*`` takes the cluster's name, namespace and spec (the CR's ``spec`` as a dict,
defaults already applied by the API server's schema) and returns a manifest dict ready for
server-side apply; ``build_children`` returns them all in apply order. No I/O: the unit tests
call these directly. Owner references are added by the handler (``kopf.adopt``).

Names (cluster ``c``):
- ``c-config`` ConfigMap: ZooKeeper connect string, cluster name, ``broker.properties``;
- ``c-zookeeper`` StatefulSet + ``c-zookeeper-headless`` / ``c-zookeeper`` Services (managed mode);
- ``c-controller`` Deployment + ``c-controller`` headless Service (the operator finds the
  active instance by asking each endpoint's health route, ``control_plane.HEALTH``);
- ``c-brokers`` StatefulSet + ``c-brokers`` headless Service (stable per-broker DNS names,
  which each broker advertises) + ``c-bootstrap`` Service + ``c-brokers`` PodDisruptionBudget;
- ``c-gateway`` Deployment + Service, only when ``gateway.replicas`` > 0;
- with ``rack.topologyKey``: ``c-brokers`` ServiceAccount (the brokers' init container reads
  its Node as it) and the cluster-scoped ClusterRoleBinding ``odradek-rack-<namespace>-c`` of
  it to the chart's ``nodes get`` ClusterRole (``build_rack_binding``, not owned: a cluster-scoped
  object cannot have a namespaced owner, so the operator deletes it).

Broker ids are the StatefulSet ordinals (label ``apps.kubernetes.io/pod-index``).
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any, Mapping

from odradek.cluster import control_plane
from odradek.operator import listeners as listener_specs

GROUP = "odradek.dev"
VERSION = "v1alpha1"
DEFAULT_IMAGE = "ghcr.io/odradek/odradek:0.1.0"
DEFAULT_ZOOKEEPER_IMAGE = "zookeeper:3.8"
KAFKA_PORT = 9092
BROKER_INTERNAL_PORT = 9093
CONTROLLER_PORT = 8080
GATEWAY_PORT = 8000
METRICS_PORT = 9404  # brokers' and controllers' /metrics (Strimzi's JMX-exporter port; the chart's PodMonitor)
ZK_CLIENT_PORT = 2181
GATEWAY_AUTH_DIR = "/etc/odradek/gateway-auth"
RACK_DIR = "/etc/odradek/rack"
DATA_DIR = "/var/lib/odradek/data"
CONFIG_HASH_ANNOTATION = "odradek.dev/config-hash"
PAUSE_ANNOTATION = "odradek.dev/pause-reconciliation"
CLUSTER_LABEL = "odradek.dev/cluster"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


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

def zookeeper_connect(cluster: str, namespace: str, spec: Mapping[str, Any]) -> str:
    external = (spec.get("zookeeper") or {}).get("external")
    if external is not None:
        return external["connect"]
    return f"{names(cluster)['zookeeper']}.{namespace}.svc:{ZK_CLIENT_PORT}"


def bootstrap_servers(cluster: str, namespace: str, spec: Mapping[str, Any] | None = None) -> str:
    """The bootstrap Service at the first listener of ``spec.listeners`` (9092 without them)."""
    listeners = listener_specs.parse(spec or {})
    return f"{names(cluster)['bootstrap']}.{namespace}.svc:{listeners[0].port if listeners else KAFKA_PORT}"


def broker_host(cluster: str, namespace: str, ordinal: int) -> str:
    n = names(cluster)
    return f"{n['brokers']}-{ordinal}.{n['brokers']}.{namespace}.svc"


def broker_address(cluster: str, namespace: str, ordinal: int) -> str:
    """The stable DNS name broker ``ordinal`` advertises (through the headless Service)."""
    n = names(cluster)
    return f"{n['brokers']}-{ordinal}.{n['brokers']}.{namespace}.svc:{KAFKA_PORT}"


def gateway_address(cluster: str, namespace: str) -> str:
    return f"http://{names(cluster)['gateway']}.{namespace}.svc:{GATEWAY_PORT}"


# -- the pieces ---------------------------------------------------------------------------

def broker_settings(spec: Mapping[str, Any]) -> dict[str, str]:
    """``brokers.config`` as sorted strings (the broker's ``--config KEY=VALUE`` arguments)."""
    config = (spec.get("brokers") or {}).get("config") or {}
    return {str(k): (("true" if v else "false") if isinstance(v, bool) else str(v))
            for k, v in sorted(config.items())}


def config_hash(cluster: str, namespace: str, spec: Mapping[str, Any],
                external: Mapping[tuple[str, int], str | None] | None = None, certificates: str = "") -> str:
    """What a broker restart must pick up: settings, image, ZooKeeper, resources, listeners
    and authorization, load balancers' addresses (node ports stay once allocated), and the
    version of the brokers' certificates (``certs.CertificatePlan.versions``)."""
    brokers = spec.get("brokers") or {}
    material = {"config": broker_settings(spec), "image": spec.get("image", DEFAULT_IMAGE),
                "zookeeper": zookeeper_connect(cluster, namespace, spec),
                "resources": brokers.get("resources") or {}, "rack": spec.get("rack") or {},
                "template": spec.get("template") or {}}
    for key in ("listeners", "authorization"):  # only when set: older clusters keep their hash
        if spec.get(key) is not None:
            material[key] = spec[key]
    hosts = sorted(a for a in (external or {}).values() if a and listener_specs.HOST_IP not in a)
    if hosts:
        material["loadBalancers"] = hosts
    if certificates:
        material["certificates"] = certificates
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]


def build_config_map(cluster: str, namespace: str, spec: Mapping[str, Any],
                     external: Mapping[tuple[str, int], str | None] | None = None, replicas: int | None = None) -> dict:
    props = "".join(f"{k}={v}\n" for k, v in broker_settings(spec).items())
    data = {"zookeeper.connect": zookeeper_connect(cluster, namespace, spec),
            "cluster": cluster,
            "bootstrap.servers": bootstrap_servers(cluster, namespace, spec),
            "broker.properties": props}
    listeners = listener_specs.parse(spec)
    if any(li.external for li in listeners):
        count = int((spec.get("brokers") or {}).get("replicas", 3) if replicas is None else replicas)
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


def _pod_template(cluster: str, component: str, spec: Mapping[str, Any], pod_spec: dict,
                  annotations: Mapping[str, str] | None = None) -> dict:
    """A pod template with ``spec.template.pod`` overrides merged in (labels, annotations,
    scheduling fields, security context, image pull secrets)."""
    override = (spec.get("template") or {}).get("pod") or {}
    meta_o = override.get("metadata") or {}
    meta = {"labels": {**(meta_o.get("labels") or {}), **labels(cluster, component)},
            "annotations": {**(meta_o.get("annotations") or {}), **(annotations or {})}}
    if not meta["annotations"]:
        del meta["annotations"]
    pod = copy.deepcopy(pod_spec)
    for key in ("nodeSelector", "tolerations", "affinity", "priorityClassName", "securityContext",
                "imagePullSecrets", "topologySpreadConstraints", "serviceAccountName"):
        if key in override:
            pod[key] = copy.deepcopy(override[key])
    return {"metadata": meta, "spec": pod}


def _container(name: str, spec: Mapping[str, Any], args: list[str], ports: list[dict],
               resources: Mapping[str, Any] | None, env: list[dict], probe: dict) -> dict:
    c = {"name": name, "image": spec.get("image", DEFAULT_IMAGE),
         "imagePullPolicy": spec.get("imagePullPolicy", "IfNotPresent"),
         "args": args, "ports": ports, "env": env, "readinessProbe": probe,
         "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                             "capabilities": {"drop": ["ALL"]}}}
    if resources:
        c["resources"] = copy.deepcopy(dict(resources))
    return c


def build_zookeeper(cluster: str, namespace: str, spec: Mapping[str, Any]) -> list[dict]:
    """The managed ensemble (official ``zookeeper`` image): headless + client Services and a
    StatefulSet whose pods take ``myid`` = ordinal + 1. Empty in external mode."""
    zk = spec.get("zookeeper") or {}
    if zk.get("external") is not None:
        return []
    managed = zk.get("managed") or {}
    replicas = int(managed.get("replicas", 3))
    storage = managed.get("storage") or {}
    n = names(cluster)
    servers = " ".join(
        f"server.{i + 1}={n['zookeeper']}-{i}.{n['zookeeper_headless']}.{namespace}.svc:2888:3888;{ZK_CLIENT_PORT}"
        for i in range(replicas))
    ports = [{"name": "client", "port": ZK_CLIENT_PORT}, {"name": "peer", "port": 2888},
             {"name": "election", "port": 3888}]
    headless = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": _meta(n["zookeeper_headless"], namespace, cluster, "zookeeper"),
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                 "selector": selector(cluster, "zookeeper"), "ports": ports},
    }
    client = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": _meta(n["zookeeper"], namespace, cluster, "zookeeper"),
        "spec": {"selector": selector(cluster, "zookeeper"), "ports": ports[:1]},
    }
    container = {
        "name": "zookeeper", "image": managed.get("image", DEFAULT_ZOOKEEPER_IMAGE),
        "command": ["bash", "-c",
                    'export ZOO_MY_ID=$(( ${HOSTNAME##*-} + 1 )); exec /docker-entrypoint.sh zkServer.sh start-foreground'],
        "env": [{"name": "ZOO_SERVERS", "value": servers},
                {"name": "ZOO_STANDALONE_ENABLED", "value": "false" if replicas > 1 else "true"},
                {"name": "ZOO_ADMINSERVER_ENABLED", "value": "false"},
                {"name": "ZOO_4LW_COMMANDS_WHITELIST", "value": "srvr,ruok,stat,mntr"}],
        "ports": [{"name": p["name"], "containerPort": p["port"]} for p in ports],
        "readinessProbe": {"tcpSocket": {"port": ZK_CLIENT_PORT}, "periodSeconds": 5},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "datalog", "mountPath": "/datalog"}],
    }
    if managed.get("resources"):
        container["resources"] = copy.deepcopy(managed["resources"])
    claim = {"metadata": {"name": "data"},
             "spec": {"accessModes": ["ReadWriteOnce"],
                      "resources": {"requests": {"storage": storage.get("size", "5Gi")}}}}
    if storage.get("class"):
        claim["spec"]["storageClassName"] = storage["class"]
    pod = {"containers": [container], "volumes": [{"name": "datalog", "emptyDir": {}}],
           "securityContext": {"fsGroup": 1000}}
    sts = {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": _meta(n["zookeeper"], namespace, cluster, "zookeeper"),
        "spec": {"replicas": replicas, "serviceName": n["zookeeper_headless"],
                 "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": selector(cluster, "zookeeper")},
                 "template": _pod_template(cluster, "zookeeper", spec, pod),
                 "volumeClaimTemplates": [claim]},
    }
    return [headless, client, sts]


def build_controller(cluster: str, namespace: str, spec: Mapping[str, Any]) -> list[dict]:
    """The controller Deployment (one active, the others stand by) and its headless Service."""
    ctl = spec.get("controller") or {}
    n = names(cluster)
    args = ["controller", "--zookeeper", "$(ODRADEK_ZOOKEEPER)", "--cluster", "$(ODRADEK_CLUSTER)",
            "--listen", f"0.0.0.0:{CONTROLLER_PORT}", "--advertised-url", f"http://$(POD_IP):{CONTROLLER_PORT}",
            "--id", "$(POD_NAME)", "--metrics-port", str(METRICS_PORT)]
    probe = {"httpGet": {"path": control_plane.HEALTH.path(), "port": CONTROLLER_PORT}, "periodSeconds": 5}
    container = _container("controller", spec, args, [{"name": "http", "containerPort": CONTROLLER_PORT},
                                                      {"name": "metrics", "containerPort": METRICS_PORT}],
                           ctl.get("resources"), _config_env(cluster), probe)
    pod = {"containers": [container], "securityContext": {"runAsNonRoot": True}}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": _meta(n["controller"], namespace, cluster, "controller"),
        "spec": {"replicas": int(ctl.get("replicas", 2)),
                 "selector": {"matchLabels": selector(cluster, "controller")},
                 "template": _pod_template(cluster, "controller", spec, pod)},
    }
    service = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": _meta(n["controller"], namespace, cluster, "controller"),
        "spec": {"clusterIP": "None", "selector": selector(cluster, "controller"),
                 "ports": [{"name": "http", "port": CONTROLLER_PORT}]},
    }
    return [service, deployment]


def build_brokers(cluster: str, namespace: str, spec: Mapping[str, Any], replicas: int | None = None,
                  external: Mapping[tuple[str, int], str | None] | None = None,
                  tls: listener_specs.BrokerTls | None = None, certificates: str = "") -> list[dict]:
    """Headless and bootstrap Services, the PodDisruptionBudget and the brokers' StatefulSet.

    ``replicas`` overrides ``brokers.replicas`` (a refused scale-down keeps the current count).
    Updates use ``OnDelete``: the operator restarts pods one at a time (``rolling``).
    ``external``: the external listeners' addresses (``listeners.external_address``);
    ``certificates``: the brokers' certificate version, part of the config hash."""
    brokers = spec.get("brokers") or {}
    n = names(cluster)
    count = int(brokers.get("replicas", 3) if replicas is None else replicas)
    storage = brokers.get("storage") or {}
    persistent = storage.get("type", "persistent-claim") == "persistent-claim"
    host = f"$(POD_NAME).{n['brokers']}.$(POD_NAMESPACE).svc"
    args = ["broker", "--id", "$(BROKER_ID)", "--data-dir", DATA_DIR,
            "--zookeeper", "$(ODRADEK_ZOOKEEPER)", "--cluster", "$(ODRADEK_CLUSTER)",
            *listener_specs.broker_args(spec, host, tls),
            "--internal-listen", f"0.0.0.0:{BROKER_INTERNAL_PORT}",
            "--internal-advertised", f"{host}:{BROKER_INTERNAL_PORT}",
            "--config", f"metrics.port={METRICS_PORT}"]
    for key, value in broker_settings(spec).items():
        args += ["--config", f"{key}={value}"]
    env = [{"name": "BROKER_ID", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{POD_INDEX_LABEL}']"}}},
           *_config_env(cluster)]
    probe = {"httpGet": {"path": control_plane.STATUS.path(), "port": BROKER_INTERNAL_PORT}, "periodSeconds": 5}
    ports = listener_specs.kafka_ports(spec)
    container = _container("broker", spec, args,
                           [*({"name": p["name"], "containerPort": p["port"]} for p in ports),
                            {"name": "internal", "containerPort": BROKER_INTERNAL_PORT},
                            {"name": "metrics", "containerPort": METRICS_PORT}],
                           brokers.get("resources"), env, probe)
    container["volumeMounts"] = [{"name": "data", "mountPath": DATA_DIR}]
    pod: dict[str, Any] = {"containers": [container], "terminationGracePeriodSeconds": 120,
                           "securityContext": {"runAsNonRoot": True, "fsGroup": 10001}}
    if any(li.external for li in listener_specs.parse(spec)):
        listener_specs.add_advertise_init(pod, container, names(cluster)["config"])
    rack_key = rack_topology_key(spec)
    if rack_key:
        _add_rack_init(cluster, spec, pod, container, rack_key)
        pod["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": rack_key, "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": selector(cluster, "broker")}}]
    if not persistent:
        pod["volumes"] = [*pod.get("volumes", []), {"name": "data", "emptyDir": {}}]
    sts_spec: dict[str, Any] = {
        "replicas": count, "serviceName": n["brokers"], "podManagementPolicy": "Parallel",
        "updateStrategy": {"type": "OnDelete"},
        "selector": {"matchLabels": selector(cluster, "broker")},
        "template": _pod_template(cluster, "broker", spec, pod,
                                  {CONFIG_HASH_ANNOTATION: config_hash(cluster, namespace, spec, external,
                                                                       certificates)}),
    }
    if persistent:
        claim = {"metadata": {"name": "data", "labels": labels(cluster, "broker")},
                 "spec": {"accessModes": ["ReadWriteOnce"],
                          "resources": {"requests": {"storage": storage.get("size", "10Gi")}}}}
        if storage.get("class"):
            claim["spec"]["storageClassName"] = storage["class"]
        sts_spec["volumeClaimTemplates"] = [claim]
        policy = "Delete" if storage.get("deleteClaim") else "Retain"
        sts_spec["persistentVolumeClaimRetentionPolicy"] = {"whenDeleted": policy, "whenScaled": policy}
    kafka_port = ports
    return [
        {"apiVersion": "v1", "kind": "Service",
         "metadata": _meta(n["brokers"], namespace, cluster, "broker"),
         "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                  "selector": selector(cluster, "broker"),
                  "ports": kafka_port + [{"name": "internal", "port": BROKER_INTERNAL_PORT}]}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": _meta(n["bootstrap"], namespace, cluster, "broker"),
         "spec": {"selector": selector(cluster, "broker"), "ports": kafka_port}},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
         "metadata": _meta(n["brokers"], namespace, cluster, "broker"),
         "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector(cluster, "broker")}}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet",
         "metadata": _meta(n["brokers"], namespace, cluster, "broker"), "spec": sts_spec},
    ]


def rack_topology_key(spec: Mapping[str, Any]) -> str | None:
    return (spec.get("rack") or {}).get("topologyKey") or None


def _add_rack_init(cluster: str, spec: Mapping[str, Any], pod: dict, broker: dict, topology_key: str) -> None:
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


def build_broker_account(cluster: str, namespace: str, spec: Mapping[str, Any]) -> list[dict]:
    """The brokers' ServiceAccount, only with rack awareness (otherwise they need no API access)."""
    if not rack_topology_key(spec):
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


def build_gateway(cluster: str, namespace: str, spec: Mapping[str, Any]) -> list[dict]:
    """The HTTP gateway's Deployment and Service; empty when ``gateway.replicas`` is 0/absent."""
    gw = spec.get("gateway") or {}
    replicas = int(gw.get("replicas", 0))
    if replicas <= 0:
        return []
    n = names(cluster)
    # Each replica advertises its own pod IP: consumer instances live in one replica, and
    # their base_uri must lead back to it (the CLI is fixed in docs/gateway.md).
    # With spec.listeners the gateway uses the replication listener, as the brokers do.
    bootstrap = (f"{n['bootstrap']}.{namespace}.svc:{listener_specs.REPLICATION_PORT}"
                 if listener_specs.parse(spec) else bootstrap_servers(cluster, namespace))
    args = ["gateway", "--bootstrap-servers", bootstrap,
            "--host", "0.0.0.0", "--port", str(GATEWAY_PORT),
            "--advertised-url", f"http://$(POD_IP):{GATEWAY_PORT}",
            # the console's throughput and partition sizes: each broker's metrics port, at the
            # host Metadata advertises for it (the gateway fills in {host})
            "--broker-metrics-urls", f"http://{{host}}:{METRICS_PORT}/metrics"]
    if gw.get("authSecret"):
        args += ["--auth-file", f"{GATEWAY_AUTH_DIR}/credentials"]
    if listener_specs.secured(listener_specs.parse(spec)):
        # mutual TLS on the replication listener with its certificate (principals.secure_children
        # adds the --kafka-ssl-* files): the gateway's principal, a super user
        args += ["--kafka-security-protocol", "SSL"]
    readiness = {"httpGet": {"path": "/readyz", "port": GATEWAY_PORT}, "periodSeconds": 5}
    container = _container("gateway", spec, args, [{"name": "http", "containerPort": GATEWAY_PORT}],
                           gw.get("resources"), _config_env(cluster), readiness)
    container["livenessProbe"] = {"httpGet": {"path": "/healthz", "port": GATEWAY_PORT},
                                  "periodSeconds": 10, "failureThreshold": 3}
    pod: dict[str, Any] = {"containers": [container], "securityContext": {"runAsNonRoot": True}}
    if gw.get("authSecret"):
        # A mounted Secret (not subPath) so a rotated Secret reaches the gateway, which
        # re-reads the file when it changes.
        container["volumeMounts"] = [{"name": "auth", "mountPath": GATEWAY_AUTH_DIR, "readOnly": True}]
        pod["volumes"] = [{"name": "auth", "secret": {"secretName": gw["authSecret"]}}]
    return [
        {"apiVersion": "v1", "kind": "Service",
         "metadata": _meta(n["gateway"], namespace, cluster, "gateway"),
         "spec": {"type": gw.get("serviceType", "ClusterIP"), "selector": selector(cluster, "gateway"),
                  "ports": [{"name": "http", "port": GATEWAY_PORT}]}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": _meta(n["gateway"], namespace, cluster, "gateway"),
         "spec": {"replicas": replicas, "selector": {"matchLabels": selector(cluster, "gateway")},
                  "template": _pod_template(cluster, "gateway", spec, pod)}},
    ]


def build_listener_services(cluster: str, namespace: str, spec: Mapping[str, Any],
                            broker_replicas: int | None = None) -> list[dict]:
    """The external listeners' Services (applied first: the brokers advertise their node ports
    and load balancers' addresses)."""
    count = int((spec.get("brokers") or {}).get("replicas", 3) if broker_replicas is None else broker_replicas)
    return listener_specs.build_external_services(cluster, namespace, listener_specs.parse(spec), count,
                                                  labels(cluster, "broker"), selector(cluster, "broker"))


def build_children(cluster: str, namespace: str, spec: Mapping[str, Any],
                   broker_replicas: int | None = None,
                   external: Mapping[tuple[str, int], str | None] | None = None,
                   tls: listener_specs.BrokerTls | None = None, certificates: str = "") -> list[dict]:
    """Every child but the listeners' Services, in apply order (config, ZooKeeper, controller,
    brokers, gateway)."""
    return [build_config_map(cluster, namespace, spec, external, broker_replicas),
            *build_zookeeper(cluster, namespace, spec),
            *build_controller(cluster, namespace, spec),
            *build_broker_account(cluster, namespace, spec),
            *build_brokers(cluster, namespace, spec, broker_replicas, external, tls, certificates),
            *build_gateway(cluster, namespace, spec)]


def keep_immutable(desired: dict, existing: Mapping[str, Any] | None) -> dict:
    """A StatefulSet's ``volumeClaimTemplates`` cannot change after creation: keep the live
    ones (storage growth is applied to the PVCs themselves)."""
    if not existing or desired.get("kind") != "StatefulSet":
        return desired
    out = copy.deepcopy(desired)
    live = (existing.get("spec") or {}).get("volumeClaimTemplates")
    if live is not None and "volumeClaimTemplates" in out["spec"]:
        out["spec"]["volumeClaimTemplates"] = [
            {"metadata": {k: v for k, v in t["metadata"].items() if k in ("name", "labels")},
             "spec": {k: v for k, v in t["spec"].items() if k in ("accessModes", "resources", "storageClassName")}}
            for t in live]
    return out


def pvc_names(cluster: str, replicas: int) -> list[str]:
    """The brokers' claims: ``data-<cluster>-brokers-<ordinal>``."""
    return [f"data-{names(cluster)['brokers']}-{i}" for i in range(replicas)]
