"""OdradekMirrorMaker2 against the real kube-apiserver, with the operator running as a process
(the shared ``operator`` fixture).

No kubelet: MirrorMaker never runs here, so the resource stays NotReady; what is checked is
every object it makes on a secured cluster (owner references, the mm2.properties of a migration,
the Deployment, the target user and its ACLs), its status, and that a spec the operator cannot
take fails for good. Then Apache Kafka 3.9's own MirrorMaker 2 (the compat suite's jars) runs
the mm2.properties the operator wrote (only the target's bootstrap address and the internal REST
listener changed for a process outside a pod), from a one-node Apache Kafka into the shared dev
cluster an OdradekCluster names: the topic's records arrive and a group's committed offsets are
translated, as in tests/compat/test_mirror_maker.py."""

from __future__ import annotations

import subprocess
import uuid

import pytest
from confluent_kafka.admin import AdminClient

from bench import apache_kafka, kafka_ecosystem
from odradek.dev.processes import candidate_port
from odradek.dev.waiting import wait_until
from tests.compat.test_mirror_maker import (CONSUMED, LOG4J, PARTITIONS, committed, ecosystem, high_watermarks,
                                            on_kafka, records)
from tests.operator.test_operator_k8s_connect import CLUSTER
from tests.operator.test_operator_mirrormaker2 import java_properties
from tests.support.k8s import condition
from tests.support.kafka_tools import require_kafka
from tests.support.tools import stop_process

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(600)]

API = "/apis/odradek.dev/v1alpha1"


def apply_mirror_maker(k8s, namespace: str, name: str, spec: dict) -> dict:
    return k8s.apply(k8s.cr_path(namespace, "odradekmirrormaker2s", name), {
        "apiVersion": "odradek.dev/v1alpha1", "kind": "OdradekMirrorMaker2",
        "metadata": {"name": name, "namespace": namespace, "labels": {"odradek.dev/cluster": "c"}}, "spec": spec})


def test_mirror_maker_on_a_secured_cluster_gets_its_config_deployment_and_least_privileged_user(
        k8s, operator, namespace):
    k8s.apply_cluster(namespace, "c", CLUSTER)
    cr = apply_mirror_maker(k8s, namespace, "m", {
        "source": {"alias": "kafka", "bootstrapServers": "kafka-0.example:9092", "secretName": "kafka-creds",
                   "config": {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"},
                   "secretConfig": {"sasl.jaas.config": "jaas"}},
        "targetAlias": "odradek", "topicsPattern": "orders.*", "groupsPattern": "orders-.*",
        "replicationPolicy": "identity", "checkpoints": {"syncGroupOffsets": True}})
    owned = {kind: wait_until(lambda kind=kind, path=path: k8s.get(path.format(ns=namespace)), 60, kind, 0.2)
             for kind, path in (
                 ("Deployment", "/apis/apps/v1/namespaces/{ns}/deployments/m-mirrormaker2"),
                 ("ConfigMap", "/api/v1/namespaces/{ns}/configmaps/m-mirrormaker2-config"),
                 ("OdradekUser", API + "/namespaces/{ns}/odradekusers/m-mirrormaker2"))}
    for kind, obj in owned.items():
        assert [(r["kind"], r["name"], r["uid"], r.get("controller")) for r in obj["metadata"]["ownerReferences"]] \
            == [("OdradekMirrorMaker2", "m", cr["metadata"]["uid"], True)], kind
    props = java_properties(owned["ConfigMap"]["data"]["mm2.properties"])
    assert props["odradek.bootstrap.servers"] == f"c-bootstrap.{namespace}.svc:9092"
    assert props["odradek.security.protocol"] == "SASL_SSL" and props["kafka->odradek.topics"] == "orders.*"
    assert props["replication.policy.class"] == "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
    assert props["sync.group.offsets.enabled"] == "true"
    assert props["kafka.sasl.jaas.config"] == "${dir:/etc/odradek/mm2/source:jaas}"
    pod = owned["Deployment"]["spec"]["template"]["spec"]
    assert pod["containers"][0]["command"][-1].endswith("--clusters odradek")
    assert {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v} == {
        "c-cluster-ca-cert", "m-mirrormaker2", "kafka-creds"}
    user = owned["OdradekUser"]["spec"]
    assert user["cluster"] == "c" and user["authentication"] == {"type": "scram-sha-512"}
    acls = {(a["resource"]["type"], a["resource"]["name"], a["resource"].get("patternType", "literal"))
            for a in user["authorization"]["acls"]}
    assert {("topic", "orders", "prefix"), ("group", "orders-", "prefix"), ("group", "kafka-mm2", "literal"),
            ("topic", "kafka.checkpoints.internal", "literal")} <= acls
    assert not any(name == "*" for _, name, _ in acls)

    def reported():
        st = (k8s.get(k8s.cr_path(namespace, "odradekmirrormaker2s", "m")) or {}).get("status") or {}
        return st if condition({"status": st}, "Ready") and st.get("readyReplicas") is not None else None
    status = wait_until(reported, 60, "the OdradekMirrorMaker2's status", 0.2)
    ready = condition({"status": status}, "Ready")
    assert ready["status"] == "False" and ready["reason"] == "ChildrenNotReady"
    assert ready["message"].startswith("MirrorMaker 0/1 ready") and "OdradekUser m-mirrormaker2 not Ready" in ready["message"]
    assert (status["flow"], status["user"], status["replicationPolicy"]) == ("kafka->odradek", "m-mirrormaker2",
                                                                           "identity")
    assert status["sourceBootstrapServers"] == "kafka-0.example:9092"

    # an operator-owned key in spec.config: Failed with the reason, nothing re-applied
    path = k8s.cr_path(namespace, "odradekmirrormaker2s", "m")
    k8s.merge(path, {"spec": {"config": {"sync.topic.acls.enabled": True}}})
    failed = wait_until(lambda: (c := condition(k8s.get(path), "Ready")) and c["reason"] == "InvalidSpec" and c,
                        60, "the refusal", 0.2)
    assert "sync.topic.acls.enabled" in failed["message"] and k8s.get(path)["status"]["phase"] == "Failed"


def _mm2_file(properties: str, target: str, target_bootstrap: str, port: int) -> str:
    """The operator's mm2.properties with what differs outside a pod: the dev cluster's bootstrap
    (not its Service), a loopback internal REST listener."""
    here = {f"{target}.bootstrap.servers": target_bootstrap, "listeners": f"http://127.0.0.1:{port}",
            "rest.advertised.host.name": "127.0.0.1"}
    lines = [line for line in properties.splitlines() if line.split("=", 1)[0] not in here]
    return "\n".join([*lines, *(f"{k}={v}" for k, v in here.items()), ""])


@pytest.fixture
def apache_kafka_source(tmp_path):
    """A one-node Apache Kafka 3.9 (KRaft): the source, stopped by PID."""
    require_kafka()
    cluster = apache_kafka.KafkaCluster(tmp_path / "kafka", nodes=1).start()
    try:
        yield cluster.bootstrap
    finally:
        assert not cluster.stop(), "Kafka had to be killed"


def test_kafkas_mirror_maker_runs_the_operators_config_from_apache_kafka_into_odradek(
        k8s, operator, namespace, dev_cluster, apache_kafka_source, tmp_path):
    ecosystem()
    st, port, tag = dev_cluster.status(), candidate_port(), uuid.uuid4().hex[:6]
    source, topic, group = f"kafka{tag}", f"mm-{tag}", f"mm-group-{tag}"
    k8s.apply_cluster(namespace, "dev", {"brokers": {"replicas": 1}, "controller": {"replicas": 1},
                                         "zookeeper": {"external": {"connect": st["zookeeper"]}}},
                      {"odradek.dev/controller-url": st["controller_url"]})
    k8s.apply(k8s.cr_path(namespace, "odradekmirrormaker2s", "m"), {
        "apiVersion": "odradek.dev/v1alpha1", "kind": "OdradekMirrorMaker2",
        "metadata": {"name": "m", "namespace": namespace, "labels": {"odradek.dev/cluster": "dev"}},
        "spec": {"source": {"alias": source, "bootstrapServers": apache_kafka_source},
                 "topicsPattern": f"{topic}.*", "groupsPattern": f"{group}.*", "replicationPolicy": "identity",
                 "checkpoints": {"syncGroupOffsets": True, "intervalSeconds": 1, "syncGroupOffsetsIntervalSeconds": 1},
                 # docs/migration.md's exact translation, and the compat suite's 1-second intervals
                 "config": {"offset.lag.max": 0, "dev.offset.flush.interval.ms": 1000,
                            "plugin.discovery": "service_load",
                            **{f"{k}.interval.seconds": 1 for k in ("refresh.topics", "refresh.groups",
                                                                     "emit.heartbeats", "sync.topic.configs")}}}})
    config = wait_until(lambda: k8s.child(namespace, "ConfigMap", "m-mirrormaker2-config"), 60, "mm2.properties", 0.2)
    (tmp_path / "mm2.properties").write_text(
        _mm2_file(config["data"]["mm2.properties"], "dev", st["bootstrap_servers"], port))
    (tmp_path / "log4j.properties").write_text(LOG4J.format(log=tmp_path / "mm2.log"))
    on_kafka(apache_kafka_source, topic, group)
    argv = kafka_ecosystem.java_argv(kafka_ecosystem.MIRROR_MAKER, str(tmp_path / "mm2.properties"),
                                     "--clusters", "dev", log4j=tmp_path / "log4j.properties")
    with open(tmp_path / "stdout", "wb") as out:
        mm2 = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    log = f"(log: {tmp_path / 'mm2.log'})"
    try:
        wait_until(lambda: high_watermarks(st["bootstrap_servers"], topic) == [CONSUMED] * PARTITIONS, 240,
                   f"MirrorMaker copying {topic} into the dev cluster {log}", 1)
        assert records(st["bootstrap_servers"], topic) == records(apache_kafka_source, topic)
        wait_until(lambda: committed(st["bootstrap_servers"], topic, group) == [CONSUMED] * PARTITIONS, 120,
                   f"the group's offsets translated {log}", 1)
    finally:
        stop_process(mm2, 60)
        admin = AdminClient({"bootstrap.servers": st["bootstrap_servers"]})   # the shared dev cluster keeps nothing
        made = [t for t in admin.list_topics(timeout=30).topics if t == topic or source in t or t == "heartbeats"]
        for future in admin.delete_topics(made).values():
            future.result(60)
        admin.delete_consumer_groups([group, f"{source}-mm2"])
