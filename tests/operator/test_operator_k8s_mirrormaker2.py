"""OdradekMirrorMaker2 against the real kube-apiserver, with the operator running as a process
(the shared ``operator`` fixture).

No kubelet: MirrorMaker never runs as a pod here, so the resource stays NotReady; what is checked
is every object it makes on a secured cluster (owner references, the mm2.properties of a
migration, the Deployment, the target user and its ACLs), its status, and that a spec the
operator cannot take fails for good. Then Apache Kafka 3.9's own MirrorMaker, as a process, on
exactly the mm2.properties the operator wrote for a SASL_SSL/SCRAM target (conftest's
``scram_dev_cluster``, denying what no ACL allows) and its OdradekUser's ACLs there, from the
open ``dev_cluster``: it logs in and mirrors a topic; the operator, logged in as that user with
the cluster's CA, reports the topic's lag in the status: 20 records before MirrorMaker runs, 0
once it has copied them. The migration itself (offsets translated)
runs in tests/compat/test_mirror_maker.py, on the migration file of docs/migration.md, which
tests/operator/test_operator_mirrormaker2.py finds key by key in what the operator writes."""

from __future__ import annotations

import base64
import subprocess
import uuid

import pytest
from confluent_kafka import Consumer, Producer

from bench import kafka_ecosystem
from odradek.dev.processes import candidate_port
from odradek.dev.waiting import wait_until
from odradek.operator import mirrormaker2, mirrormaker2_run
from tests.compat.test_mirror_maker import ecosystem
from tests.operator.test_operator_k8s_connect import CLUSTER, mount
from tests.operator.test_operator_k8s_users import secret_data
from tests.support.k8s import ready_check
from tests.support.tools import stop_process
from tests.operator.test_operator_mirrormaker2 import java_properties
from tests.support.k8s import condition

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(600)]

API = "/apis/odradek.dev/v1alpha1"


def apply_mirror_maker(k8s, namespace: str, name: str, spec: dict, annotations: dict | None = None) -> dict:
    return k8s.apply(k8s.cr_path(namespace, "odradekmirrormaker2s", name), {
        "apiVersion": "odradek.dev/v1alpha1", "kind": "OdradekMirrorMaker2",
        "metadata": {"name": name, "namespace": namespace, "labels": {"odradek.dev/cluster": "c"},
                     "annotations": annotations or {}}, "spec": spec})


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
    # Kafka's replication factors (2, the internal topics' 3) capped at the cluster's one broker
    assert {props[k] for k in mirrormaker2.REPLICATION_DEFAULTS} == {"1"}
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
    # no lag yet: MirrorMaker's user has no Secret to log in with, which the operator says
    lag = wait_until(lambda: condition(k8s.get(k8s.cr_path(namespace, "odradekmirrormaker2s", "m")), "LagChecked"),
                     30, "the lag check", 0.2)
    assert (lag["status"], lag["reason"]) == ("False", "CredentialsMissing")
    assert lag["message"] == f"Secret {namespace}/m-mirrormaker2 has no sasl.jaas.config (yet)"

    # an operator-owned key in spec.config: Failed with the reason, nothing re-applied
    path = k8s.cr_path(namespace, "odradekmirrormaker2s", "m")
    k8s.merge(path, {"spec": {"config": {"sync.topic.acls.enabled": True}}})
    failed = wait_until(lambda: (c := condition(k8s.get(path), "Ready")) and c["reason"] == "InvalidSpec" and c,
                        60, "the refusal", 0.2)
    assert "sync.topic.acls.enabled" in failed["message"] and k8s.get(path)["status"]["phase"] == "Failed"


def _topics(cluster) -> set[str]:
    return set(cluster.admin().list_topics(timeout=10).topics)


def _mirror(k8s, namespace: str, **wanted) -> dict | None:
    """The OdradekMirrorMaker2's ``status.mirrors[0]`` once it has the ``wanted`` values."""
    mirror = ((k8s.get(k8s.cr_path(namespace, "odradekmirrormaker2s", "m")) or {}).get("status") or {}).get(
        "mirrors", [{}])[0]
    return mirror if all(mirror.get(k) == v for k, v in wanted.items()) else None


def _local(properties: str, overrides: dict[str, str]) -> str:
    """mm2.properties with what differs for a process outside a pod (a key's last line wins)."""
    return properties + "".join(f"{k}={v}\n" for k, v in overrides.items())


def test_kafkas_own_mirror_maker_logs_in_to_a_secured_target_with_the_operators_config_and_user(
        k8s, operator, namespace, dev_cluster, scram_dev_cluster, tmp_path):
    ecosystem()
    st, uid = scram_dev_cluster.status(), uuid.uuid4().hex[:6]
    topic, source = f"mm-{uid}", dev_cluster.status()["bootstrap_servers"]
    before = (_topics(dev_cluster), _topics(scram_dev_cluster.cluster))
    dev_cluster.create_topic(topic)
    producer = Producer({"bootstrap.servers": source})
    for i in range(20):
        producer.produce(topic, value=f"r-{i}".encode())
    assert producer.flush(30) == 0
    # the cluster's CA is the dev cluster's (a user-supplied CA), which signed its SECURE listener
    for name, key, data in (("c-cluster-ca-cert", "ca.crt", scram_dev_cluster.ca.cert_pem),
                            ("c-cluster-ca", "ca.key", scram_dev_cluster.ca.key_pem)):
        k8s.apply(f"/api/v1/namespaces/{namespace}/secrets/{name}",
                  {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
                   "data": {key: base64.b64encode(data).decode()}})
    k8s.apply_cluster(namespace, "c", {"brokers": {"replicas": 1}, "controller": {"replicas": 1},
                                       "zookeeper": {"external": {"connect": st["zookeeper"]}},
                                       "listeners": CLUSTER["listeners"], "authorization": {"type": "simple"},
                                       "clusterCa": {"generateCertificateAuthority": False}},
                      {"odradek.dev/controller-url": st["controller_url"]})
    secure = scram_dev_cluster.endpoints["SECURE"][0]
    # the operator reaches the target where this host's MirrorMaker does (a trusted host: the
    # dev clusters' loopback); MirrorMaker commits its offsets every second, not Connect's 60
    apply_mirror_maker(k8s, namespace, "m", {"source": {"alias": "src", "bootstrapServers": source},
                                             "targetAlias": "dst", "topicsPattern": topic,
                                             "groupsPattern": f"{topic}-.*",
                                             "config": {"dst.offset.flush.interval.ms": 1000}},
                       {mirrormaker2_run.TARGET_BOOTSTRAP_ANNOTATION: secure})
    wait_until(ready_check(lambda: k8s.user(namespace, "m-mirrormaker2")), 60, "MirrorMaker's user", 0.2)
    # MirrorMaker not started: the operator, logged in as its user over SASL_SSL, finds the
    # topic's 20 records behind (no offsets committed yet)
    behind = wait_until(lambda: _mirror(k8s, namespace, lag=20), 60, "the lag before MirrorMaker runs", 0.2)
    assert behind["laggingTopics"] == [{"topic": topic, "lag": 20, "partitionsBehind": 1}]
    assert (behind["source"], behind["target"], behind["topics"], behind["partitions"]) == ("src", "dst", 1, 1)
    assert condition(k8s.get(k8s.cr_path(namespace, "odradekmirrormaker2s", "m")), "LagChecked")["status"] == "True"
    configmap = k8s.child(namespace, "ConfigMap", "m-mirrormaker2-config")
    root = tmp_path / "mounts"
    mount(root, mirrormaker2.CONFIG_DIR, {"config": configmap["data"],
                                          "user": secret_data(k8s, namespace, "m-mirrormaker2"),
                                          "cluster-ca": secret_data(k8s, namespace, "c-cluster-ca-cert")})
    (tmp_path / "mm2.properties").write_text(_local((root / "config" / mirrormaker2.CONFIG_FILE).read_text(), {
        "dst.bootstrap.servers": secure,
        "listeners": f"http://127.0.0.1:{candidate_port()}", "rest.advertised.host.name": "127.0.0.1"}))
    # the pod's logging (stdout, here a file) with the herders' file the readiness probe reads
    state_log = tmp_path / "herder.log"
    (tmp_path / "log4j.properties").write_text(
        configmap["data"][mirrormaker2.LOG4J_FILE].replace(mirrormaker2.STATE_LOG, str(state_log)))
    probe = [*mirrormaker2.readiness_probe()["exec"]["command"][:-1], str(state_log)]
    assert subprocess.run(probe, check=False, stderr=subprocess.DEVNULL).returncode != 0   # not started
    argv = kafka_ecosystem.java_argv(kafka_ecosystem.MIRROR_MAKER, str(tmp_path / "mm2.properties"),
                                     "--clusters", "dst", log4j=tmp_path / "log4j.properties")
    with open(tmp_path / "stdout", "wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    consumer = Consumer({"bootstrap.servers": st["bootstrap_servers"], "group.id": f"check-{uid}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "topic.metadata.refresh.interval.ms": 1000})
    values: list[str] = []
    try:
        consumer.subscribe([f"src.{topic}"])   # DefaultReplicationPolicy: the source alias in front

        def mirrored() -> bool:
            values.extend(m.value().decode() for m in consumer.consume(20, 0.5) if m.error() is None)
            return len(values) >= 20
        wait_until(mirrored, 180, f"the topic mirrored (log: {tmp_path / 'stdout'})", 0)
        assert values == [f"r-{i}" for i in range(20)]
        # mirroring: the probe finds its herder's lines (one process: the leader, which wrote the
        # connectors' configuration to the config topic, as Kafka's MirrorHerder says)
        assert subprocess.run(probe, check=False).returncode == 0
        assert "MirrorSourceConnector connector configured for src->dst." in state_log.read_text().splitlines()
        # the operator reads the offsets MirrorMaker committed on the target: caught up
        caught_up = wait_until(lambda: _mirror(k8s, namespace, lag=0), 60, "the lag at 0", 0.2)
        assert caught_up["laggingTopics"] == [] and caught_up["partitions"] == 1
        assert caught_up["partitionsBehind"] == caught_up["maxPartitionLag"] == 0
    finally:
        # no more lag checks against the shared clusters for the rest of the session
        k8s.delete(k8s.cr_path(namespace, "odradekmirrormaker2s", "m"))
        consumer.close()
        stop_process(proc, 60)
        # the shared clusters keep no topic of this test (MirrorMaker's own included)
        for cluster, had in ((dev_cluster, before[0]), (scram_dev_cluster.cluster, before[1])):
            if made := sorted(_topics(cluster) - had):
                admin = cluster.admin()   # kept until its futures resolve
                for future in admin.delete_topics(made, operation_timeout=30).values():
                    future.result(60)
