"""OdradekConnect, pure: its spec checked (``parse_connect``) and every object it owns, built
(``build_connect``), as Strimzi builds a KafkaConnect's.

A Connect cluster ``k`` of OdradekCluster ``c`` (docs/connect.md):

- ``k-connect-config`` ConfigMap: ``connect-distributed.properties``, Apache Kafka's worker
  configuration (``worker_properties``): ``bootstrap.servers`` at the cluster's bootstrap Service
  on the chosen listener; ``group.id`` and the config, offset and status topics; their
  replication factor (``storage_replication``: Kafka's default 3, capped at the cluster's brokers,
  unless ``spec.config`` sets it) and Kafka's partition counts (offsets 25, status 5); ``exactly.once.source.support``; on a secured listener
  the cluster CA as a PEM truststore and the user's credential read from its mounted Secret
  through Kafka's ``DirectoryConfigProvider`` (KIP-297/421: no secret in the ConfigMap), for the
  worker and, prefixed, for its connectors' producers, consumers and admin clients.
- ``k-connect`` Deployment of ``ConnectDistributed`` workers (``spec.image``: Apache Kafka's
  distribution at ``/opt/kafka``); each advertises its pod address for the REST API (workers
  forward requests to the leader there); a ConfigMap change rolls them (its hash on the template).
- ``k-connect-api`` Service: the REST API (8083), which the operator reconciles connectors through,
  and ``k-connect-network-policy`` admitting only the workers and the operator to it. With
  ``spec.restApi.authentication.type: basic``, Kafka's ``BasicAuthSecurityRestExtension`` on it:
  the ``k-connect-rest`` Secret holds the operator's login (generated once by ``connect_run``), a
  JAAS file in the ConfigMap points Kafka's ``PropertyFileLoginModule`` at its mounted users file.
- ``spec.plugins``: an init container fetching them into a volume on ``plugin.path`` (``connect_plugins``).
- The storage topics as OdradekTopics ``k-connect-configs``/``-offsets``/``-status`` (compacted;
  1, 25, 5 partitions, Kafka's defaults; the workers' replication factor), so that they exist
  with these settings before a worker could create them otherwise, and an OdradekUser ``k-connect`` when the listener authenticates,
  with least privilege (``user_acls``, what a real worker needs on a deny-by-default cluster:
  tests/operator/test_operator_k8s_connect.py): the group, the three topics, the transactional
  ids of exactly-once source, and the connectors' own ACLs (``spec.authorization.acls``).

No I/O: ``connect_run`` observes the cluster, calls these and applies what they return.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from odradek.operator import builders, certs, connect_plugins, network_policies, pod_security, topics, users
from odradek.operator.listeners import Listener
from odradek.operator.spec import DEFAULT_IMAGE, ClusterSpec, ConnectSpec, MirrorMaker2Spec, SpecError

REST_PORT = 8083
KAFKA_HOME = "/opt/kafka"
PLUGIN_PATH = f"{KAFKA_HOME}/plugins"
CONFIG_DIR = "/etc/odradek/connect"
CONFIG_FILE = "connect-distributed.properties"
CA_DIR = f"{CONFIG_DIR}/cluster-ca"
USER_DIR = f"{CONFIG_DIR}/user"
REST_USERS_DIR = f"{CONFIG_DIR}/rest-users"
REST_JAAS_FILE = "rest-jaas.conf"
REST_USERS_FILE = "users.properties"
REST_USERNAME = "odradek-operator"   # the operator's own login on the REST API (connectors.py)
BASIC_AUTH_EXTENSION = "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"
REST_AUTHENTICATIONS = ("none", "basic")
CONFIG_HASH_ANNOTATION = "odradek.dev/connect-config-hash"
CONNECT_LABEL = "odradek.dev/connect"
# Kafka's defaults for the storage topics' partitions (DistributedConfig)
CONFIG_PARTITIONS, OFFSET_PARTITIONS, STATUS_PARTITIONS = 1, 25, 5
# Kafka's default for their replication factor (DistributedConfig), which the operator caps at the
# brokers: the cluster's default.replication.factor (-1) may be 1, which min.insync.replicas 2 refuses
STORAGE_REPLICATION = 3
STORAGE_FACTOR_KEYS = {"configs": "config.storage.replication.factor",
                       "offsets": "offset.storage.replication.factor", "status": "status.storage.replication.factor"}
EOS_MODES = ("disabled", "preparing", "enabled")
# Worker settings the operator owns: refused in spec.config (as Strimzi's forbidden options)
OWNED_KEYS = ("bootstrap.servers", "group.id", "config.storage.topic", "offset.storage.topic",
              "status.storage.topic", "plugin.path", "exactly.once.source.support", "config.providers")
OWNED_PREFIXES = ("security.", "ssl.", "sasl.", "rest.", "listeners", "config.providers.")
CLIENT_PREFIXES = ("", "producer.", "consumer.", "admin.")   # the worker's and its connectors' clients


def names(connect: str) -> dict[str, str]:
    return {"workers": f"{connect}-connect", "api": f"{connect}-connect-api", "config": f"{connect}-connect-config",
            "user": f"{connect}-connect", "rest": f"{connect}-connect-rest"}


def labels(connect: str, cluster: str) -> dict[str, str]:
    return {**builders.labels(cluster, "connect"), "app.kubernetes.io/instance": connect, CONNECT_LABEL: connect}


def selector(connect: str) -> dict[str, str]:
    return {"app.kubernetes.io/instance": connect, "app.kubernetes.io/component": "connect"}


def _owned(key: str) -> bool:
    bare = next((key[len(p):] for p in CLIENT_PREFIXES[1:] if key.startswith(p)), key)
    return key in OWNED_KEYS or bare in OWNED_KEYS or any(bare.startswith(p) for p in OWNED_PREFIXES)


def parse_connect(name: str, spec: Mapping[str, Any]) -> ConnectSpec:
    """An OdradekConnect's ``spec`` with the defaults filled in; ``SpecError`` for what the schema cannot say."""
    config = {str(k): _setting(v) for k, v in (spec.get("config") or {}).items()}
    owned = sorted(k for k in config if _owned(k))
    if owned:
        raise SpecError(f"spec.config: {', '.join(owned)} are set by the operator")
    check_factors(config, STORAGE_FACTOR_KEYS.values())
    eos = spec.get("exactlyOnceSourceSupport", ConnectSpec.exactly_once_source_support)
    if eos not in EOS_MODES:
        raise SpecError(f"spec.exactlyOnceSourceSupport: {eos!r} is not one of {', '.join(EOS_MODES)}")
    group = spec.get("groupId") or name
    rest = (((spec.get("restApi") or {}).get("authentication") or {}).get("type")
            or ConnectSpec.rest_authentication)
    if rest not in REST_AUTHENTICATIONS:
        raise SpecError(f"spec.restApi.authentication.type: {rest!r} is not one of {', '.join(REST_AUTHENTICATIONS)}")
    return ConnectSpec(
        cluster=spec.get("cluster"), replicas=int(spec.get("replicas", ConnectSpec.replicas)),
        image=spec.get("image") or ConnectSpec.image, listener=spec.get("listener"), group_id=group,
        config_storage_topic=spec.get("configStorageTopic") or f"{group}-configs",
        offset_storage_topic=spec.get("offsetStorageTopic") or f"{group}-offsets",
        status_storage_topic=spec.get("statusStorageTopic") or f"{group}-status",
        exactly_once_source_support=eos, config=dict(sorted(config.items())),
        acls=tuple((spec.get("authorization") or {}).get("acls") or ()), resources=spec.get("resources"),
        jvm_heap=spec.get("jvmHeap") or ConnectSpec.jvm_heap, rest_authentication=rest,
        plugins=connect_plugins.parse_plugins(spec.get("plugins")),
        plugin_repository=connect_plugins.parse_repository(spec.get("pluginRepository")))


def check_factors(config: Mapping[str, str], keys: Any) -> None:
    """``SpecError`` unless each replication factor ``config`` sets is Kafka's -1 or a positive integer."""
    for key in keys:
        value = config.get(key)
        if value is not None and not (value.lstrip("-").isdigit() and (int(value) == -1 or int(value) >= 1)):
            raise SpecError(f"spec.config: {key} must be -1 (the brokers' default) or at least 1, not {value!r}")


def replication_factor(config: Mapping[str, str], key: str, default: int, brokers: int) -> str:
    """``key``'s replication factor: the user's (``config``), else Kafka's ``default`` capped at
    the cluster's ``brokers`` (as Strimzi's defaults, a factor above them could not be placed)."""
    return config.get(key, str(max(1, min(default, brokers))))


def storage_replication(spec: ConnectSpec, brokers: int) -> dict[str, str]:
    """The storage topics' replication factors, by key (``STORAGE_FACTOR_KEYS``)."""
    return {key: replication_factor(spec.config, key, STORAGE_REPLICATION, brokers)
            for key in STORAGE_FACTOR_KEYS.values()}


def _setting(value: Any) -> str:
    if isinstance(value, bool):   # YAML true -> Kafka's "true"
        return str(value).lower()
    return str(value)


@dataclass(frozen=True)
class ClusterAccess:
    """How the workers reach the OdradekCluster: its name, the listener (None: the plain 9092
    listener of a cluster without ``spec.listeners``), its bootstrap address and its brokers
    (``spec.brokers.replicas``: the cap on internal topics' replication factors)."""
    cluster: str
    listener: Listener | None
    bootstrap: str
    brokers: int

    @property
    def authentication(self) -> str | None:
        return self.listener.authentication if self.listener else None

    @property
    def tls(self) -> bool:
        return bool(self.listener and self.listener.tls)


def cluster_access(cluster: str, namespace: str, cluster_spec: ClusterSpec,
                   spec: ConnectSpec | MirrorMaker2Spec) -> ClusterAccess:
    """The listener ``spec.listener`` names (default the cluster's first internal one)."""
    if not cluster_spec.listeners:
        if spec.listener:
            raise SpecError(f"spec.listener: OdradekCluster {cluster} has no spec.listeners (one plain listener)")
        return ClusterAccess(cluster, None, builders.bootstrap_servers(cluster, namespace),
                             cluster_spec.brokers.replicas)
    internal = [li for li in cluster_spec.listeners if not li.external]
    chosen = next((li for li in cluster_spec.listeners if li.name == spec.listener), None) if spec.listener else (
        internal[0] if internal else None)
    if chosen is None or chosen.external:
        raise SpecError(f"spec.listener: OdradekCluster {cluster} has no internal listener "
                        f"{spec.listener or ''}".rstrip() + f" (internal: {', '.join(li.name for li in internal)})")
    bootstrap = f"{builders.names(cluster)['bootstrap']}.{namespace}.svc:{chosen.port}"
    return ClusterAccess(cluster, chosen, bootstrap, cluster_spec.brokers.replicas)


def client_security(access: ClusterAccess, user_dir: str = USER_DIR, ca_dir: str = CA_DIR) -> dict[str, str]:
    """The client security settings (unprefixed) for the chosen listener, the user's Secret and
    the cluster CA mounted at ``user_dir`` and ``ca_dir`` (OdradekMirrorMaker2 mounts its own)."""
    if access.listener is None:
        return {}
    out = {"security.protocol": access.listener.protocol}
    def secret(key: str) -> str:   # the user's Secret, mounted, read by DirectoryConfigProvider
        return "${dir:" + user_dir + ":" + key + "}"
    if access.tls:
        out |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": f"{ca_dir}/ca.crt"}
    if access.authentication == "scram-sha-512":
        out |= {"sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": secret("sasl.jaas.config")}
    elif access.authentication == "tls":
        out |= {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": secret("user.crt"),
                "ssl.keystore.key": secret("user.key")}
    return out


def worker_properties(spec: ConnectSpec, access: ClusterAccess) -> dict[str, str]:
    """The worker configuration (``connect-distributed.properties``, without the per-pod
    ``rest.advertised.host.name`` the container appends)."""
    out = {"bootstrap.servers": access.bootstrap, "group.id": spec.group_id,
           "config.storage.topic": spec.config_storage_topic, "offset.storage.topic": spec.offset_storage_topic,
           "status.storage.topic": spec.status_storage_topic,
           **storage_replication(spec, access.brokers), "offset.storage.partitions": str(OFFSET_PARTITIONS),
           "status.storage.partitions": str(STATUS_PARTITIONS),
           "exactly.once.source.support": spec.exactly_once_source_support,
           "key.converter": "org.apache.kafka.connect.json.JsonConverter",
           "value.converter": "org.apache.kafka.connect.json.JsonConverter",
           "listeners": f"http://:{REST_PORT}", "rest.advertised.port": str(REST_PORT),
           "plugin.path": f"{PLUGIN_PATH},{connect_plugins.PLUGINS_DIR}" if spec.plugins else PLUGIN_PATH,
           **spec.config}
    if spec.rest_authentication == "basic":
        out["rest.extension.classes"] = BASIC_AUTH_EXTENSION
    security = client_security(access)
    if access.authentication:
        out |= {"config.providers": "dir",
                "config.providers.dir.class": "org.apache.kafka.common.config.provider.DirectoryConfigProvider"}
    for prefix in CLIENT_PREFIXES:
        out |= {prefix + k: v for k, v in security.items()}
    return dict(sorted(out.items()))


def properties_text(settings: Mapping[str, str]) -> str:
    """A Java properties file (``\\``, ``=``, ``:`` and leading blanks escaped in keys; values as Kafka reads them)."""
    def escape(s: str, key: bool) -> str:
        s = s.replace("\\", "\\\\").replace("\n", "\\n")
        return s.replace("=", "\\=").replace(":", "\\:").replace(" ", "\\ ") if key else s
    return "".join(f"{escape(k, True)}={escape(v, False)}\n" for k, v in settings.items())


def rest_jaas_text() -> str:
    """The JAAS file Kafka's ``BasicAuthSecurityRestExtension`` reads (its ``KafkaConnect`` entry):
    the users and passwords in the REST Secret's ``users.properties``, mounted."""
    return ("KafkaConnect {\n  org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required\n"
            f'  file="{REST_USERS_DIR}/{REST_USERS_FILE}";\n}};\n')


def build_rest_secret(connect: str, namespace: str, cluster: str, password: str) -> dict:
    """The REST API's credentials: the operator's login (``username``, ``password``; the one users
    take too) and the ``users.properties`` the workers check logins against."""
    data = {"username": REST_USERNAME, "password": password, REST_USERS_FILE: f"{REST_USERNAME}={password}\n"}
    return users.build_secret(names(connect)["rest"], namespace, cluster, data, labels(connect, cluster))


# -- OdradekTopics and OdradekUser -------------------------------------------------------------

def build_topics(connect: str, namespace: str, spec: ConnectSpec, access: ClusterAccess) -> list[dict]:
    """The storage topics as OdradekTopics, with the workers' replication factors (none for a
    user's ``-1``: the controller's default, as the workers' then). Not owned by the OdradekConnect (``connect_run``): deleting it keeps the connectors'
    offsets and configs, as Strimzi keeps a KafkaConnect's topics; delete the OdradekTopics to drop them."""
    out, cluster, factors = [], access.cluster, storage_replication(spec, access.brokers)
    for suffix, topic, partitions in (("configs", spec.config_storage_topic, CONFIG_PARTITIONS),
                                      ("offsets", spec.offset_storage_topic, OFFSET_PARTITIONS),
                                      ("status", spec.status_storage_topic, STATUS_PARTITIONS)):
        factor = int(factors[STORAGE_FACTOR_KEYS[suffix]])
        out.append({"apiVersion": f"{builders.GROUP}/{builders.VERSION}", "kind": "OdradekTopic",
                    "metadata": {"name": f"{connect}-connect-{suffix}", "namespace": namespace,
                                 "labels": labels(connect, cluster),
                                 # a worker may have made it first (an open cluster), with these settings
                                 "annotations": {topics.ADOPT_ANNOTATION: "true"}},
                    "spec": {"cluster": cluster, "topicName": topic, "partitions": partitions,
                             **({"replicas": factor} if factor > 0 else {}),
                             "config": {"cleanup.policy": "compact"}}})
    return out


def user_acls(spec: ConnectSpec) -> list[dict]:
    """The workers' ACLs, least privilege (Kafka's documented Connect ACLs, KIP-618's for
    exactly-once source): the group; the storage topics (Read, Write, Describe, Create: a worker
    checks and creates them; DescribeConfigs: it checks their cleanup policy); with exactly-once
    source the leader's transactional id ``connect-cluster-<group>`` (it writes the config topic
    in transactions) and the tasks' ``<group>-<connector>-<task>`` (Write, Describe: the leader
    fences them through the admin client); then the connectors' own. No IdempotentWrite: since
    Kafka 2.8 (KIP-679) Write on a topic allows an idempotent producer, as Odradek's brokers do."""
    topic_ops = ["Read", "Write", "Describe", "Create", "DescribeConfigs"]
    acls = [{"resource": {"type": "group", "name": spec.group_id}, "operations": ["Read", "Describe"]}]
    acls += [{"resource": {"type": "topic", "name": t}, "operations": topic_ops}
             for t in (spec.config_storage_topic, spec.offset_storage_topic, spec.status_storage_topic)]
    if spec.exactly_once_source_support != "disabled":
        acls += [{"resource": {"type": "transactionalId", "name": f"connect-cluster-{spec.group_id}"},
                  "operations": ["Write", "Describe"]},
                 {"resource": {"type": "transactionalId", "name": f"{spec.group_id}-", "patternType": "prefix"},
                  "operations": ["Write", "Describe"]}]
    return acls + [copy.deepcopy(dict(a)) for a in spec.acls]


def build_user(connect: str, namespace: str, spec: ConnectSpec, access: ClusterAccess) -> list[dict]:
    """The workers' OdradekUser, when the listener authenticates (none on an open listener)."""
    if not access.authentication:
        return []
    return [{"apiVersion": f"{builders.GROUP}/{builders.VERSION}", "kind": "OdradekUser",
             "metadata": {"name": names(connect)["user"], "namespace": namespace,
                          "labels": labels(connect, access.cluster)},
             "spec": {"cluster": access.cluster, "authentication": {"type": access.authentication},
                      "authorization": {"type": "simple", "acls": user_acls(spec)}}}]


# -- the workers ------------------------------------------------------------------------------

def _volumes(connect: str, access: ClusterAccess) -> tuple[list[dict], list[dict]]:
    mounts = [{"name": "config", "mountPath": CONFIG_DIR + "/worker", "readOnly": True}]
    volumes = [{"name": "config", "configMap": {"name": names(connect)["config"]}}]
    if access.tls:
        mounts.append({"name": "cluster-ca", "mountPath": CA_DIR, "readOnly": True})
        ca_secret = certs.secret_names(access.cluster)["cluster_ca_cert"]
        volumes.append({"name": "cluster-ca", "secret": {"secretName": ca_secret}})
    if access.authentication:
        mounts.append({"name": "user", "mountPath": USER_DIR, "readOnly": True})
        volumes.append({"name": "user", "secret": {"secretName": names(connect)["user"]}})
    return mounts, volumes


def _rest_and_plugins(connect: str, spec: ConnectSpec, tools_image: str) -> tuple[list, list, list, list]:
    """What basic authentication on the REST API and ``spec.plugins`` add to the workers' pod:
    mounts, volumes, environment, init containers."""
    mounts, volumes, env, init = [], [], [], []
    if spec.rest_authentication == "basic":
        mounts.append({"name": "rest-users", "mountPath": REST_USERS_DIR, "readOnly": True})
        volumes.append({"name": "rest-users", "secret": {"secretName": names(connect)["rest"]}})
        env.append({"name": "KAFKA_OPTS",
                    "value": f"-Djava.security.auth.login.config={CONFIG_DIR}/worker/{REST_JAAS_FILE}"})
    if spec.plugins:
        mounts.append({"name": connect_plugins.VOLUME["name"], "mountPath": connect_plugins.PLUGINS_DIR,
                       "readOnly": True})
        volumes.append(dict(connect_plugins.VOLUME))
        init.append(connect_plugins.init_container(spec.plugins, spec.plugin_repository, tools_image))
    return mounts, volumes, env, init


def build_deployment(connect: str, namespace: str, spec: ConnectSpec, access: ClusterAccess,
                     properties: str, tools_image: str = DEFAULT_IMAGE) -> dict:
    """The workers: ``connect-distributed.sh`` on the ConfigMap's file plus this pod's REST
    address (the shell appends ``rest.advertised.host.name=$POD_IP``: the file is read-only)."""
    worker = f"/tmp/{CONFIG_FILE}"
    script = (f'cat {CONFIG_DIR}/worker/{CONFIG_FILE} > {worker} && '
              f'echo "rest.advertised.host.name=$POD_IP" >> {worker} && '
              f'exec {KAFKA_HOME}/bin/connect-distributed.sh {worker}')
    mounts, volumes = _volumes(connect, access)
    more_mounts, more_volumes, env, init = _rest_and_plugins(connect, spec, tools_image)
    # a TCP probe: with basic authentication every HTTP path but the internal ones answers 401
    probe = {"tcpSocket": {"port": REST_PORT}} if spec.rest_authentication == "basic" else \
        {"httpGet": {"path": "/", "port": REST_PORT}}
    return jvm_deployment(names(connect)["workers"], namespace, spec, "connect", script, probe,
                          mounts + more_mounts, volumes + more_volumes, properties, labels(connect, access.cluster),
                          selector(connect), REST_PORT, env=env, init_containers=init)


def jvm_deployment(name: str, namespace: str, spec: ConnectSpec | MirrorMaker2Spec, component: str, script: str,
                   probe: dict, mounts: list[dict], volumes: list[dict], properties: str, pod_labels: dict,
                   pod_selector: dict, port: int, env: Sequence[dict] = (),
                   init_containers: Sequence[dict] = (), readiness: dict | None = None) -> dict:
    """A Deployment of one Kafka JVM (``spec``'s image, heap, resources, replicas) running
    ``script``, alive while ``probe`` (an httpGet or tcpSocket action on ``port``) answers and
    ready when ``readiness`` (default ``probe``) does; the hash of its ``properties`` file on the
    template rolls it when the file changes. OdradekConnect's workers and OdradekMirrorMaker2's processes."""
    container = {
        "name": component, "image": spec.image, "command": ["sh", "-c", script],
        "ports": [{"name": "rest", "containerPort": port}],
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "KAFKA_HEAP_OPTS", "value": f"-Xms{spec.jvm_heap} -Xmx{spec.jvm_heap}"},
                {"name": "LOG_DIR", "value": "/tmp/logs"}, *env],
        "readinessProbe": {**(readiness or probe), "periodSeconds": 10, "timeoutSeconds": builders.HTTP_PROBE_TIMEOUT_S,
                           "failureThreshold": 3},
        "livenessProbe": {**probe, "initialDelaySeconds": 60, "periodSeconds": 10,
                          "timeoutSeconds": builders.HTTP_PROBE_TIMEOUT_S, "failureThreshold": 6},
        "volumeMounts": mounts}
    if spec.resources:
        container["resources"] = copy.deepcopy(dict(spec.resources))
    pod: dict[str, Any] = {"containers": [container], "volumes": volumes}
    if init_containers:
        pod["initContainers"] = [copy.deepcopy(c) for c in init_containers]
    pod_security.harden(pod, component)
    digest = hashlib.sha256(properties.encode()).hexdigest()[:16]
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "labels": pod_labels},
            "spec": {"replicas": spec.replicas, "selector": {"matchLabels": pod_selector},
                     "template": {"metadata": {"labels": pod_labels,
                                               "annotations": {CONFIG_HASH_ANNOTATION: digest}},
                                  "spec": pod}}}


def build_network_policy(connect: str, namespace: str, cluster: str) -> dict:
    """The REST API (without authentication unless ``restApi`` asks for it) admits only the workers
    (they forward requests to the leader) and the operator, as Strimzi's KafkaConnect policy."""
    peers = [{"podSelector": {"matchLabels": selector(connect)}},
             {"podSelector": {"matchLabels": dict(network_policies.OPERATOR_LABELS)}, "namespaceSelector": {}}]
    return {"apiVersion": network_policies.API_VERSION, "kind": "NetworkPolicy",
            "metadata": {"name": f"{connect}-connect-network-policy", "namespace": namespace,
                         "labels": labels(connect, cluster)},
            "spec": {"podSelector": {"matchLabels": selector(connect)}, "policyTypes": ["Ingress"],
                     "ingress": [{"ports": [{"protocol": "TCP", "port": REST_PORT}], "from": peers}]}}


def rest_url(connect: str, namespace: str) -> str:
    return f"http://{names(connect)['api']}.{namespace}.svc:{REST_PORT}"


def build_connect(connect: str, namespace: str, spec: ConnectSpec, access: ClusterAccess,
                  rest_password: str | None = None, tools_image: str = DEFAULT_IMAGE) -> list[dict]:
    """Every object the OdradekConnect owns, in apply order: topics, user and the REST API's
    Secret first (the workers need them), then the ConfigMap, the Service and the Deployment.
    ``rest_password``: the REST Secret's (kept once generated; required with basic authentication);
    ``tools_image``: the Odradek image, for the plugins' init container."""
    properties = properties_text(worker_properties(spec, access))
    meta = {"namespace": namespace, "labels": labels(connect, access.cluster)}
    files = {CONFIG_FILE: properties}
    rest: list[dict] = []
    if spec.rest_authentication == "basic":
        if not rest_password:
            raise ValueError("basic authentication on the REST API needs its password")
        files[REST_JAAS_FILE] = rest_jaas_text()
        rest.append(build_rest_secret(connect, namespace, access.cluster, rest_password))
    return [*build_topics(connect, namespace, spec, access), *build_user(connect, namespace, spec, access),
            *rest, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": names(connect)["config"], **meta},
                    "data": files},
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": names(connect)["api"], **meta},
             "spec": {"selector": selector(connect), "ports": [{"name": "rest", "port": REST_PORT}]}},
            build_network_policy(connect, namespace, access.cluster),
            build_deployment(connect, namespace, spec, access, properties, tools_image)]
