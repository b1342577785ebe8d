"""Kafka Connect and MirrorMaker 2 as pods on the suite's one cluster (issue 36), from the image
e2e/images/build.sh makes (``odradek/connect:<Kafka version>``, the operator's default).

- An OdradekConnect whose FileStream connectors come from ``spec.plugins``: the image loads no
  example connector (as Kafka's distribution), so its workers' plugins init container fetches
  ``org.apache.kafka:connect-file`` from a Maven repository in the cluster (``plugin-repo``: a
  pod of the Odradek image serving the compat suite's own jar, a ConfigMap laid out as Maven
  does, with its ``.sha1``; ``sha512sum`` pinned). The worker lists the connector classes, and
  an OdradekConnector's FileStreamSource connector moves a file's lines into a topic.
- An OdradekMirrorMaker2 whose source is a second cluster: Apache Kafka 3.9 itself, one KRaft
  node in a pod of the same image (``kafka-storage.sh format``, ``kafka-server-start.sh``),
  reached over SASL_PLAINTEXT with SCRAM-SHA-512 (the login in a Secret read through
  ``spec.source.secretConfig``), mirrored as docs/migration.md migrates: the
  ``IdentityReplicationPolicy`` (names kept) and a group's committed offset translated onto
  Odradek (``checkpoints.syncGroupOffsets``, ``offset.lag.max`` 0). The test host writes the
  records and the group's commit through a PLAINTEXT listener on a NodePort.

The target cluster is the chart's secured one (an internal SASL_SSL listener with SCRAM-SHA-512,
authorization on): both runtimes log in as the OdradekUsers the operator generates for them, with
their least-privilege ACLs. The plugins' init container runs the cluster's image, so the module
needs this release's (test_cluster.py's upgrade runs first in the suite's order). The runtimes'
JVMs start together; everything the module made is deleted at its end, before test_security.py."""

from __future__ import annotations

import base64
import hashlib
import json
import urllib.parse

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench import kafka_ecosystem
from odradek.client import GatewayClient
from odradek.dev.waiting import wait_until
from odradek.operator.spec import DEFAULT_CONNECT_IMAGE
from support import CLUSTER, IMAGE, NAMESPACE, diagnose, external_client, scram_login

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(900)]

API = "odradek.dev/v1alpha1"
CONNECT, CONNECTOR, MIRROR = "files", "lines", "mirror"
LINES_TOPIC = "connect-lines"
LINES = [f"line-{i}" for i in range(200)]
LINES_FILE = "/tmp/lines.txt"   # the worker's /tmp: an emptyDir (its root filesystem is read-only)
FILE_CONNECTORS = {"org.apache.kafka.connect.file.FileStreamSourceConnector",
                   "org.apache.kafka.connect.file.FileStreamSinkConnector"}
REPO = "plugin-repo"             # the Maven repository pod and Service
SOURCE = "kafka-src"             # Apache Kafka's pod, Service and login Secret
SOURCE_ALIAS, SOURCE_LOGIN, SOURCE_PASSWORD = "kafka", "mirror", "mirror-secret-1"
SOURCE_TOPIC, SOURCE_GROUP = "mm-in", "mm-readers"
READER = "mm-reader"             # an OdradekUser that reads the group's translated offset
MIRRORED = [f"mirrored-{i}" for i in range(500)]
# One KRaft node: its controller and inter-broker listeners on the pod's loopback, SOURCE for
# MirrorMaker (SCRAM over plaintext), HOST for the test host through the Service's NodePort.
SERVER_PROPERTIES = """process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:9093
controller.listener.names=CONTROLLER
inter.broker.listener.name=BROKER
listeners=CONTROLLER://127.0.0.1:9093,BROKER://127.0.0.1:9094,SOURCE://:9092,HOST://:9095
advertised.listeners=BROKER://127.0.0.1:9094,SOURCE://$(POD_IP):9092,HOST://$(HOST_IP):{node_port}
listener.security.protocol.map=CONTROLLER:PLAINTEXT,BROKER:PLAINTEXT,SOURCE:SASL_PLAINTEXT,HOST:PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.source.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
log.dirs=/tmp/kafka
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
"""
KAFKA_START = ('printf "%s\\n" "$SERVER_PROPERTIES" > /tmp/server.properties && '
               'kafka-storage.sh format --ignore-formatted -t "$CLUSTER_ID" -c /tmp/server.properties '
               '--add-scram "SCRAM-SHA-512=[name=$LOGIN,password=$PASSWORD]" && '
               'exec kafka-server-start.sh /tmp/server.properties')


def apply(kube, kind: str, name: str, spec: dict) -> None:
    apply_manifest(kube, {"apiVersion": API, "kind": kind, "metadata": {"name": name, "namespace": NAMESPACE},
                          "spec": spec})


def apply_manifest(kube, manifest: dict) -> None:
    kube.kubectl("apply", "-f", "-", input=json.dumps(manifest))


def ready(kube, kind: str, name: str) -> bool:
    conditions = ((kube.get(kind, name) or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def wait_ready(kube, kind: str, name: str, timeout: float) -> dict:
    try:
        wait_until(lambda: ready(kube, kind, name), timeout, f"{kind} {name} Ready", 3)
    except TimeoutError:
        print(f"--- {kind} {name} status\n{json.dumps(kube.get(kind, name).get('status'), indent=1)}")
        print(diagnose(kube))   # CI keeps only the log: the pods, events and logs say why
        raise
    return kube.get(kind, name)


def read_values(gw: GatewayClient, topic: str) -> list[str]:
    """Every value of ``topic`` (one partition) up to its high watermark."""
    offset, end = 0, gw.offsets(topic, 0)[1]
    out: list[str] = []
    while offset < end:
        batch, offset = gw.read_json(topic, 0, offset, end, max_bytes=4 << 20)
        out += [base64.b64decode(r["value"]).decode() for r in batch]
    return out


def replication_factors(gw: GatewayClient, topic: str) -> set[int]:
    return {len(p["replicas"]) for p in gw.partition_details(topic)}


def _acl(rtype: str, name: str, ops: list[str], pattern: str = "literal") -> dict:
    return {"resource": {"type": rtype, "name": name, "patternType": pattern}, "operations": ops}


def _pod(name: str, image: str, command: list[str], port: int, env: list[dict],
         volume: tuple[dict, str] | None = None) -> dict:
    """A pod (label ``app: <name>``, Ready once ``port`` accepts connections), ``volume``
    (its definition, its mount path) mounted."""
    container = {"name": name, "image": image, "command": command, "env": env,
                 "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 2}}
    spec: dict = {"containers": [container]}
    if volume:
        container["volumeMounts"] = [{"name": volume[0]["name"], "mountPath": volume[1]}]
        spec["volumes"] = [volume[0]]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": name}},
            "spec": spec}


def _service(name: str, ports: dict[str, int], kind: str = "ClusterIP") -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"type": kind, "selector": {"app": name},
                     "ports": [{"name": n, "port": p, "targetPort": p} for n, p in ports.items()]}}


def plugin_repository(kube) -> dict:
    """The compat suite's connect-file jar in a ConfigMap laid out as a Maven repository (the jar
    and its ``.sha1``), served over HTTP by a pod of the Odradek image; spec.plugins' entry."""
    jar = next((kafka_ecosystem.resolve() / "libs").glob("connect-file-*.jar"))
    version = jar.stem.removeprefix("connect-file-")
    path = f"org/apache/kafka/connect-file/{version}/{jar.name}"
    content = jar.read_bytes()
    apply_manifest(kube, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": REPO, "namespace": NAMESPACE},
                          "binaryData": {jar.name: base64.b64encode(content).decode()},
                          "data": {f"{jar.name}.sha1": hashlib.sha1(content).hexdigest()}})
    items = [{"key": jar.name, "path": path}, {"key": f"{jar.name}.sha1", "path": f"{path}.sha1"}]
    apply_manifest(kube, _pod(REPO, IMAGE, ["python", "-m", "http.server", "8080", "--directory", "/repo"], 8080, [],
                              ({"name": "repo", "configMap": {"name": REPO, "items": items}}, "/repo")))
    apply_manifest(kube, _service(REPO, {"http": 8080}))
    return {"name": "file-connectors", "artifacts": [
        {"maven": f"org.apache.kafka:connect-file:{version}", "sha512sum": hashlib.sha512(content).hexdigest()}]}


def _field(path: str) -> dict:
    return {"valueFrom": {"fieldRef": {"fieldPath": path}}}


def kafka_source(kube) -> int:
    """Apache Kafka's pod, its Service (SOURCE in the cluster, HOST on a NodePort) and
    MirrorMaker's login Secret; the NodePort."""
    login = (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{SOURCE_LOGIN}" '
             f'password="{SOURCE_PASSWORD}";')
    apply_manifest(kube, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SOURCE, "namespace": NAMESPACE},
                          "stringData": {"sasl.jaas.config": login}})
    apply_manifest(kube, _service(SOURCE, {"source": 9092, "host": 9095}, "NodePort"))
    node_port = next(p["nodePort"] for p in kube.get("service", SOURCE)["spec"]["ports"] if p["name"] == "host")
    env = [{"name": "POD_IP", **_field("status.podIP")}, {"name": "HOST_IP", **_field("status.hostIP")},
           {"name": "SERVER_PROPERTIES", "value": SERVER_PROPERTIES.format(node_port=node_port)},
           {"name": "CLUSTER_ID", "value": "b2RyYWRlay1lMmUtc3JjAA"}, {"name": "LOGIN", "value": SOURCE_LOGIN},
           {"name": "PASSWORD", "value": SOURCE_PASSWORD}, {"name": "KAFKA_HEAP_OPTS", "value": "-Xmx256m -Xms256m"}]
    apply_manifest(kube, _pod(SOURCE, DEFAULT_CONNECT_IMAGE, ["sh", "-c", KAFKA_START], 9092, env))
    return node_port


# librdkafka's synchronous commit hands these back as they are (not flagged retriable)
COORDINATOR_RETRIABLE = (KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE,
                         KafkaError.NOT_COORDINATOR, KafkaError.REQUEST_TIMED_OUT)


def fill_source(bootstrap: str) -> None:
    """The source's side before a cut-over: the topic, its records, and a group that consumed them
    all (its committed offset: the end)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def created() -> bool:
        try:
            admin.create_topics([NewTopic(SOURCE_TOPIC, 1, 1)])[SOURCE_TOPIC].result(30)
        except KafkaException as e:
            if e.args[0].name() != "TOPIC_ALREADY_EXISTS":
                raise
        return True
    wait_until(created, 180, f"{SOURCE_TOPIC} created on Apache Kafka at {bootstrap}", 2)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for value in MIRRORED:
        producer.produce(SOURCE_TOPIC, value.encode())
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": SOURCE_GROUP, "enable.auto.commit": False})

    def commit() -> bool:   # a fresh Kafka loads __consumer_offsets first: Kafka's retriable coordinator errors
        try:
            consumer.commit(offsets=[TopicPartition(SOURCE_TOPIC, 0, len(MIRRORED))], asynchronous=False)
        except KafkaException as e:
            if e.args[0].code() not in COORDINATOR_RETRIABLE:
                raise
            return False
        return True
    try:
        wait_until(commit, 120, f"{SOURCE_GROUP}'s offset committed on Apache Kafka at {bootstrap}", 2)
    finally:
        consumer.close()


def committed(settings: dict, topic: str, group: str) -> int:
    consumer = Consumer({**settings, "group.id": group, "enable.auto.commit": False})
    try:
        return consumer.committed([TopicPartition(topic, 0)], timeout=20)[0].offset
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def runtimes(kube, gateway):
    """Apache Kafka's pod and the plugin repository first, the OdradekConnect once the repository
    serves, the source's records and group, then the OdradekMirrorMaker2; everything the module
    made is deleted at its end."""
    node_port = kafka_source(kube)
    plugin = plugin_repository(kube)
    apply(kube, "OdradekTopic", LINES_TOPIC, {"cluster": CLUSTER, "partitions": 1, "replicas": 3})
    apply(kube, "OdradekUser", READER, {
        "cluster": CLUSTER, "authentication": {"type": "scram-sha-512"}, "authorization": {"type": "simple", "acls": [
            _acl("topic", SOURCE_TOPIC, ["Describe"]), _acl("group", SOURCE_GROUP, ["Describe"])]}})
    wait_until(lambda: ready_pod(kube, REPO), 180, "the plugin repository serving", 2)
    # The cluster's min.insync.replicas is 2 and its default replication factor 1: the runtimes'
    # internal topics work only because the operator gives them Kafka's replication factors
    # (capped at the brokers), not -1; nothing here sets one (test_*_replication_factors).
    apply(kube, "OdradekConnect", CONNECT, {
        "cluster": CLUSTER, "replicas": 1,
        "pluginRepository": f"http://{REPO}.{NAMESPACE}.svc:8080", "plugins": [plugin],
        "config": {"value.converter": "org.apache.kafka.connect.storage.StringConverter",
                   "offset.flush.interval.ms": 2000},
        "authorization": {"acls": [_acl("topic", LINES_TOPIC, ["Write", "Describe"])]}})
    bootstrap = f"{urllib.parse.urlsplit(gateway.url).hostname}:{node_port}"   # the node's address
    wait_until(lambda: ready_pod(kube, SOURCE), 300, "Apache Kafka's pod Ready", 2)
    fill_source(bootstrap)
    apply(kube, "OdradekMirrorMaker2", MIRROR, {
        "cluster": CLUSTER, "topicsPattern": SOURCE_TOPIC, "groupsPattern": SOURCE_GROUP,
        "replicationPolicy": "identity", "offsetSyncsTopicLocation": "target",
        "checkpoints": {"syncGroupOffsets": True, "intervalSeconds": 1, "syncGroupOffsetsIntervalSeconds": 1},
        # an offset sync per record: a drained group's offset translates exactly (docs/migration.md);
        # one partition for its herder's offsets and status (Kafka's 25 and 5): fewer replicas
        # for the brokers to carry through test_security.py's rolls
        "config": {"offset.lag.max": 0, "offset.storage.partitions": 1, "status.storage.partitions": 1},
        "source": {"alias": SOURCE_ALIAS, "bootstrapServers": f"{SOURCE}.{NAMESPACE}.svc:9092",
                   "config": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512"},
                   "secretName": SOURCE, "secretConfig": {"sasl.jaas.config": "sasl.jaas.config"}}})
    yield
    for kind, name in (("odradekconnector", CONNECTOR), ("odradekconnect", CONNECT),
                       ("odradekmirrormaker2", MIRROR), ("odradekuser", READER)):
        kube.kubectl("delete", kind, name, "-n", NAMESPACE, "--ignore-not-found", "--timeout=180s", timeout=200)
    kube.kubectl("delete", "pod", SOURCE, REPO, "-n", NAMESPACE, "--ignore-not-found", "--grace-period=1", "--wait=false")
    for kind, names in (("service", (SOURCE, REPO)), ("secret", (SOURCE,)), ("configmap", (REPO,))):
        kube.kubectl("delete", kind, *names, "-n", NAMESPACE, "--ignore-not-found", "--wait=false")
    topics = [LINES_TOPIC, *(f"{CONNECT}-connect-{s}" for s in ("configs", "offsets", "status"))]
    kube.kubectl("delete", "odradektopic", *topics, "-n", NAMESPACE, "--ignore-not-found", "--wait=false")


def ready_pod(kube, name: str) -> bool:
    conditions = (kube.get("pod", name).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def connector_plugins(kube, url: str) -> set[str]:
    """The worker's ``GET /connector-plugins``, asked from the operator's pod (the REST API's
    NetworkPolicy admits the workers and the operator)."""
    script = "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=30).read().decode())"
    out = kube.kubectl("exec", "-n", NAMESPACE, "deploy/odradek", "-c", "operator", "--", "python", "-c", script,
                       f"{url}/connector-plugins")
    return {p["class"] for p in json.loads(out)}


def test_connect_worker_pod_fetches_its_plugin_and_runs_a_file_source_connector_into_a_topic(kube, gateway, runtimes):
    connect = wait_ready(kube, "odradekconnect", CONNECT, 600)
    wait_ready(kube, "odradektopic", LINES_TOPIC, 60)
    assert connect["status"]["readyReplicas"] == 1 and connect["status"]["user"] == f"{CONNECT}-connect"
    pod = kube.get("pods", "-l", f"odradek.dev/connect={CONNECT}")["items"][0]
    assert pod["spec"]["containers"][0]["image"] == DEFAULT_CONNECT_IMAGE
    # the image has no FileStream connectors: the init container fetched them from the repository
    [init] = pod["status"]["initContainerStatuses"]
    assert init["name"] == "plugins" and init["state"]["terminated"]["exitCode"] == 0, init
    assert FILE_CONNECTORS <= connector_plugins(kube, connect["status"]["url"])
    kube.kubectl("exec", "-n", NAMESPACE, pod["metadata"]["name"], "--", "sh", "-c",
                 f"printf '%s\\n' {' '.join(LINES)} > {LINES_FILE}")
    apply(kube, "OdradekConnector", CONNECTOR, {
        "connect": CONNECT, "class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "config": {"file": LINES_FILE, "topic": LINES_TOPIC}})
    wait_ready(kube, "odradekconnector", CONNECTOR, 300)
    # Ready is the connector's state (as Strimzi's); its task is assigned after it, by a rebalance
    wait_until(lambda: [t["state"] for t in (kube.get("odradekconnector", CONNECTOR)["status"]
                                              .get("connectorStatus") or {}).get("tasks", [])] == ["RUNNING"],
               120, "the connector's task RUNNING", 3)
    with gateway.client(timeout=60) as gw:
        wait_until(lambda: len(read_values(gw, LINES_TOPIC)) >= len(LINES), 180, f"{len(LINES)} lines", 2)
        assert read_values(gw, LINES_TOPIC) == LINES
        # the storage topics: Kafka Connect's default replication factor 3 (the cluster has 3 brokers)
        assert {t: replication_factors(gw, t) for t in connect["status"]["topics"]} == dict.fromkeys(
            (f"{CONNECT}-configs", f"{CONNECT}-offsets", f"{CONNECT}-status"), {3})


def test_mirror_maker_pod_migrates_a_topic_and_a_group_from_apache_kafka(kube, gateway, runtimes, tmp_path):
    mirror = wait_ready(kube, "odradekmirrormaker2", MIRROR, 600)
    assert mirror["status"]["flow"] == f"{SOURCE_ALIAS}->{CLUSTER}"
    with gateway.client(timeout=60) as gw:   # IdentityReplicationPolicy: the topic keeps its name
        wait_until(lambda: SOURCE_TOPIC in gw.topics() and len(read_values(gw, SOURCE_TOPIC)) >= len(MIRRORED), 300,
                   f"{len(MIRRORED)} records mirrored into {SOURCE_TOPIC}", 3)
        assert read_values(gw, SOURCE_TOPIC) == MIRRORED
        # the group drained on Kafka resumes on Odradek where it stopped
        wait_ready(kube, "odradekuser", READER, 60)
        reader = scram_login(kube, READER, external_client(kube, tmp_path / "ca.crt"))
        wait_until(lambda: committed(reader, SOURCE_TOPIC, SOURCE_GROUP) == len(MIRRORED), 120,
                   f"{SOURCE_GROUP}'s offset translated onto Odradek", 2)
        # MirrorMaker's defaults: 2 for mirrored topics, 3 for its internal ones (3 brokers)
        # (offset syncs kept on the target: named for the other cluster, the source)
        internal = [f"mm2-{t}.{SOURCE_ALIAS}.internal" for t in ("configs", "offsets", "status", "offset-syncs")]
        internal += [f"{SOURCE_ALIAS}.checkpoints.internal", "heartbeats"]
        try:
            wait_until(lambda: set(internal) <= set(gw.topics()), 120, "MirrorMaker's internal topics", 3)
        except TimeoutError:
            raise AssertionError(f"missing: {sorted(set(internal) - set(gw.topics()))}") from None
        assert {t: replication_factors(gw, t) for t in [SOURCE_TOPIC, *internal]} == {
            SOURCE_TOPIC: {2}, **dict.fromkeys(internal, {3})}
