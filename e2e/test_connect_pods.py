"""Kafka Connect and MirrorMaker 2 as pods on the suite's one cluster (issue 36), from the image
e2e/images/build.sh makes (``odradek/connect:<Kafka version>``, the operator's default): an
OdradekConnect whose worker runs a FileStreamSource connector declared as an OdradekConnector,
its records arriving in the topic; an OdradekMirrorMaker2 mirroring a topic.

The cluster is the chart's secured one (an internal SASL_SSL listener with SCRAM-SHA-512,
authorization on), so both runtimes log in as the OdradekUsers the operator generates for them,
with their least-privilege ACLs. MirrorMaker's source is the same cluster under another alias
(``src``): the default replication policy writes ``src.<topic>``, so source and copy are
distinct topics; the source side logs in as an OdradekUser of its own, its password read from
that user's Secret (``spec.source.secretName``/``secretConfig``). Both runtimes start together
(the JVMs' start overlaps) and are deleted at the end of the module, before test_security.py."""

from __future__ import annotations

import base64
import json

import pytest

from odradek.client import GatewayClient
from odradek.dev.waiting import wait_until
from odradek.operator.spec import DEFAULT_CONNECT_IMAGE
from support import CLUSTER, NAMESPACE, diagnose

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(900)]

API = "odradek.dev/v1alpha1"
CONNECT, CONNECTOR, MIRROR = "files", "lines", "mirror"
LINES_TOPIC, SOURCE_TOPIC, SOURCE_USER = "connect-lines", "mm-in", "mm-source"
LINES = [f"line-{i}" for i in range(200)]
MIRRORED = [f"mirrored-{i}" for i in range(500)]
LINES_FILE = "/tmp/lines.txt"   # the worker's /tmp: an emptyDir (its root filesystem is read-only)


def apply(kube, kind: str, name: str, spec: dict) -> None:
    kube.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": API, "kind": kind, "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}))


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


@pytest.fixture(scope="module")
def runtimes(kube, gateway):
    """The topics, the source's user, records in the source topic, then the OdradekConnect and
    the OdradekMirrorMaker2 at once; everything the module made is deleted at its end."""
    for topic in (LINES_TOPIC, SOURCE_TOPIC):
        apply(kube, "OdradekTopic", topic, {"cluster": CLUSTER, "partitions": 1, "replicas": 3})
    # MirrorMaker reads the source topic and its configuration; its offset syncs stay on the target
    apply(kube, "OdradekUser", SOURCE_USER, {
        "cluster": CLUSTER, "authentication": {"type": "scram-sha-512"},
        "authorization": {"type": "simple", "acls": [
            _acl("topic", SOURCE_TOPIC, ["Read", "Describe", "DescribeConfigs"]),
            _acl("group", "src", ["Read", "Describe"], "prefix")]}})
    for kind, name in (("odradektopic", LINES_TOPIC), ("odradektopic", SOURCE_TOPIC), ("odradekuser", SOURCE_USER)):
        wait_ready(kube, kind, name, 180)
    with gateway.client(timeout=120) as gw:
        results = gw.produce(SOURCE_TOPIC, [{"value": v.encode()} for v in MIRRORED])
        assert all(r.offset is not None for r in results), [r for r in results if r.offset is None][:3]
    # The cluster's min.insync.replicas is 2 and its default replication factor 1: the runtimes'
    # internal topics work only because the operator gives them Kafka's replication factors
    # (capped at the brokers), not -1; nothing here sets one (test_*_replication_factors).
    apply(kube, "OdradekConnect", CONNECT, {
        "cluster": CLUSTER, "replicas": 1,
        "config": {"value.converter": "org.apache.kafka.connect.storage.StringConverter",
                   "offset.flush.interval.ms": 2000},
        "authorization": {"acls": [_acl("topic", LINES_TOPIC, ["Write", "Describe"])]}})
    apply(kube, "OdradekMirrorMaker2", MIRROR, {
        "cluster": CLUSTER, "topicsPattern": SOURCE_TOPIC, "groupsPattern": "src-.*",
        "offsetSyncsTopicLocation": "target",
        # one partition for its herder's offsets and status (Kafka's 25 and 5): fewer replicas
        # for the brokers to carry through test_security.py's rolls
        "config": {"offset.storage.partitions": 1, "status.storage.partitions": 1},
        "source": {"alias": "src", "bootstrapServers": f"{CLUSTER}-bootstrap.{NAMESPACE}.svc:9092",
                   # the same cluster: its CA is the one the target's side mounts
                   "config": {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                              "ssl.truststore.type": "PEM",
                              "ssl.truststore.location": "/etc/odradek/mm2/cluster-ca/ca.crt"},
                   "secretName": SOURCE_USER, "secretConfig": {"sasl.jaas.config": "sasl.jaas.config"}}})
    yield
    for kind, name in (("odradekconnector", CONNECTOR), ("odradekconnect", CONNECT),
                       ("odradekmirrormaker2", MIRROR), ("odradekuser", SOURCE_USER)):
        kube.kubectl("delete", kind, name, "-n", NAMESPACE, "--ignore-not-found", "--timeout=180s", timeout=200)
    topics = [LINES_TOPIC, SOURCE_TOPIC, *(f"{CONNECT}-connect-{s}" for s in ("configs", "offsets", "status"))]
    kube.kubectl("delete", "odradektopic", *topics, "-n", NAMESPACE, "--ignore-not-found", "--wait=false")


def test_connect_worker_pod_runs_a_file_source_connector_into_a_topic(kube, gateway, runtimes):
    connect = wait_ready(kube, "odradekconnect", CONNECT, 600)
    assert connect["status"]["readyReplicas"] == 1 and connect["status"]["user"] == f"{CONNECT}-connect"
    pod = kube.get("pods", "-l", f"odradek.dev/connect={CONNECT}")["items"][0]
    assert pod["spec"]["containers"][0]["image"] == DEFAULT_CONNECT_IMAGE
    kube.kubectl("exec", "-n", NAMESPACE, pod["metadata"]["name"], "--", "sh", "-c",
                 f"printf '%s\\n' {' '.join(LINES)} > {LINES_FILE}")
    apply(kube, "OdradekConnector", CONNECTOR, {
        "connect": CONNECT, "class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "config": {"file": LINES_FILE, "topic": LINES_TOPIC}})
    connector = wait_ready(kube, "odradekconnector", CONNECTOR, 300)
    assert [t["state"] for t in connector["status"]["connectorStatus"]["tasks"]] == ["RUNNING"]
    with gateway.client(timeout=60) as gw:
        wait_until(lambda: len(read_values(gw, LINES_TOPIC)) >= len(LINES), 180, f"{len(LINES)} lines", 2)
        assert read_values(gw, LINES_TOPIC) == LINES
        # the storage topics: Kafka Connect's default replication factor 3 (the cluster has 3 brokers)
        assert {t: replication_factors(gw, t) for t in connect["status"]["topics"]} == dict.fromkeys(
            (f"{CONNECT}-configs", f"{CONNECT}-offsets", f"{CONNECT}-status"), {3})


def test_mirror_maker_pod_mirrors_a_topic_under_the_source_alias(kube, gateway, runtimes):
    mirror = wait_ready(kube, "odradekmirrormaker2", MIRROR, 600)
    assert mirror["status"]["flow"] == f"src->{CLUSTER}"
    copy = f"src.{SOURCE_TOPIC}"   # DefaultReplicationPolicy: <source alias>.<topic>
    with gateway.client(timeout=60) as gw:
        wait_until(lambda: copy in gw.topics() and len(read_values(gw, copy)) >= len(MIRRORED), 300,
                   f"{len(MIRRORED)} records mirrored into {copy}", 3)
        assert read_values(gw, copy) == MIRRORED
        # MirrorMaker's defaults: 2 for mirrored topics, 3 for its internal ones (3 brokers)
        # (offset syncs kept on the target: named for the other cluster, the source)
        internal = ["mm2-configs.src.internal", "mm2-offsets.src.internal", "mm2-status.src.internal",
                    "mm2-offset-syncs.src.internal", "heartbeats"]
        try:
            wait_until(lambda: set(internal) <= set(gw.topics()), 120, "MirrorMaker's internal topics", 3)
        except TimeoutError:
            raise AssertionError(f"missing: {sorted(set(internal) - set(gw.topics()))}") from None
        assert {t: replication_factors(gw, t) for t in [copy, *internal]} == {
            copy: {2}, **dict.fromkeys(internal, {3})}
