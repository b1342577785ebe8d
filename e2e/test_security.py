"""Issue 18's acceptance on the suite's one cluster, which has the chart's secure defaults (an
internal SASL_SSL listener, authorization on) plus the external NodePort SASL_SSL listener of
values-e2e.yaml: OdradekUsers; a client on the test host reaching the brokers through the
NodePort listener with only the user's Secret and the CA Secret; ACL refusals; certificate
renewal while producing with acks=all. (The gateway and spark-submit tests of test_cluster.py
run against the same secured cluster.) In file order, after test_cluster.py."""

from __future__ import annotations

import datetime
import json
import threading
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from odradek.certs import CertificateAuthority
from odradek.dev.waiting import wait_until
from support import BROKERS, CLUSTER, NAMESPACE, cluster_ready, external_client, pods_ready, scram_login

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(1800)]

TOPIC, FORBIDDEN, GROUP = "secure-orders", "secure-other", "secure-readers"
ALICE, BOB = "alice", "bob"          # alice: ACLs on TOPIC and GROUP; bob: none


def apply(kube, manifest: dict) -> None:
    kube.kubectl("apply", "-f", "-", input=json.dumps(manifest))


def ready(kube, kind: str, name: str) -> bool:
    conditions = (kube.get(kind, name).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def apply_user(kube, name: str, acls: list[dict]) -> None:
    spec = {"cluster": CLUSTER, "authentication": {"type": "scram-sha-512"}}
    if acls:
        spec["authorization"] = {"type": "simple", "acls": acls}
    apply(kube, {"apiVersion": "odradek.dev/v1alpha1", "kind": "OdradekUser",
                 "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec})


@pytest.fixture(scope="module")
def external(kube, release, tmp_path_factory) -> dict:
    """A client's settings from status.listeners and the CA Secret it names: nothing else."""
    return external_client(kube, tmp_path_factory.mktemp("ca") / "ca.crt")


@pytest.fixture(scope="module")
def users(kube, external) -> dict[str, dict]:
    """Topics and users made with resources; each user's client settings from its Secret."""
    for topic in (TOPIC, FORBIDDEN):
        apply(kube, {"apiVersion": "odradek.dev/v1alpha1", "kind": "OdradekTopic",
                     "metadata": {"name": topic, "namespace": NAMESPACE},
                     "spec": {"cluster": CLUSTER, "partitions": 3, "replicas": 3}})
    apply_user(kube, ALICE, [
        {"resource": {"type": "topic", "name": TOPIC, "patternType": "literal"},
         "operations": ["Read", "Write", "Describe"]},
        {"resource": {"type": "group", "name": GROUP, "patternType": "literal"}, "operations": ["Read"]}])
    apply_user(kube, BOB, [])
    out = {}
    for name in (ALICE, BOB):
        wait_until(lambda: ready(kube, "odradekuser", name), 180, f"OdradekUser {name} Ready", 2)
        out[name] = scram_login(kube, name, external)
    for topic in (TOPIC, FORBIDDEN):
        wait_until(lambda: ready(kube, "odradektopic", topic), 180, f"OdradekTopic {topic} Ready", 2)
    return out


def produce(config: dict, topic: str, values: list[str]) -> tuple[list[str], list[KafkaError]]:
    """(acknowledged values, delivery errors) with acks=all."""
    acked, errors = [], []

    def report(err, msg):
        (errors.append(err) if err else acked.append(msg.value().decode()))
    producer = Producer({"message.timeout.ms": 30000, **config, "acks": "all"})
    for value in values:
        producer.produce(topic, value.encode(), on_delivery=report)
        producer.poll(0)
    producer.flush(60)
    return acked, errors


def read_all(config: dict, topic: str, expected: int, timeout: float = 120) -> list[str]:
    """Every record of the topic from the start (assigned partitions, nothing committed)."""
    consumer = Consumer({**config, "group.id": GROUP, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
    out: list[str] = []

    def more() -> bool:
        for msg in consumer.consume(500, 1.0):
            if msg.error() is None:
                out.append(msg.value().decode())
            elif msg.error().code() != KafkaError._PARTITION_EOF:
                raise AssertionError(msg.error())
        return len(out) >= expected
    try:
        wait_until(more, timeout, f"{expected} records of {topic}", 0)
    finally:
        consumer.close()
    return out


def test_user_produces_and_consumes_through_the_nodeport_listener(users):
    values = [f"v{i}" for i in range(1000)]
    acked, errors = produce(users[ALICE], TOPIC, values)
    assert not errors and sorted(acked) == sorted(values), errors[:3]
    assert sorted(read_all(users[ALICE], TOPIC, 1000)) == sorted(values)


def test_the_same_user_is_refused_on_another_topic(users):
    acked, errors = produce(users[ALICE], FORBIDDEN, ["nope"])
    assert not acked and [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED], errors


def test_a_user_without_acls_is_refused(users):
    acked, errors = produce(users[BOB], TOPIC, ["nope"])
    assert not acked and [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED], errors


class Writer(threading.Thread):
    """alice producing numbered values with acks=all until stopped; remembers what was acknowledged."""

    def __init__(self, config: dict):
        super().__init__(daemon=True)
        self.producer = Producer({**config, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
        self.acked: list[str] = []
        self.failed = 0
        self.stop = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():  # ~2,000 records/s
            for _ in range(100):
                self.producer.produce(TOPIC, f"renew-{n}".encode(), on_delivery=self.report)
                n += 1
            self.producer.poll(0.05)
        self.producer.flush(120)

    def report(self, err, msg) -> None:
        if err is None:
            self.acked.append(msg.value().decode())
        else:
            self.failed += 1


def test_certificate_renewal_rolls_brokers_one_at_a_time_losing_no_acked_record(kube, users):
    """The renewal rolls ZooKeeper, then the controller and the gateway, then the brokers one at a
    time. Only the brokers' roll restarts brokers: there at most one is not ready at a time. The
    suite's ZooKeeper is one server: if its restart, on a loaded node, outlasts the brokers'
    session timeout they register again and re-join the ISRs (as Kafka's brokers do), so
    before their roll the brokers' readiness is printed and only required never to reach 0."""
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods_ready(kube, BROKERS)}
    assert len(before) == 3
    seen_ready: dict[str, list[int]] = {"before their roll": [], "in their roll": []}
    watching = threading.Event()

    def watch() -> None:
        phase = "before their roll"
        while not watching.is_set():
            pods = kube.get("pods", "-l", BROKERS)["items"]
            if len(pods) < 3 or any(p["metadata"].get("deletionTimestamp") or p["metadata"]["uid"] not in
                                    before.values() for p in pods):
                phase = "in their roll"
            seen_ready[phase].append(sum(p["metadata"].get("deletionTimestamp") is None and any(
                c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
                for p in pods))
            watching.wait(1)

    watcher, writer = threading.Thread(target=watch, daemon=True), Writer(users[ALICE])
    watcher.start()
    writer.start()
    wait_until(lambda: len(writer.acked) >= 1000, 120, "produce running", 0.5)
    # Renewal forced: every certificate now has less than renewalDays left.
    kube.kubectl("patch", "odradekcluster", CLUSTER, "-n", NAMESPACE, "--type", "merge", "-p", json.dumps(
        {"spec": {"clusterCa": {"validityDays": 800, "renewalDays": 799}}}))

    def rolled() -> bool:
        now = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods_ready(kube, BROKERS)}
        return len(now) == 3 and all(now[n] != uid for n, uid in before.items()) and cluster_ready(kube)
    wait_until(rolled, 1200, "every broker restarted with renewed certificates", 3)
    watching.set()
    watcher.join(30)
    acked_after = len(writer.acked)
    wait_until(lambda: len(writer.acked) >= acked_after + 500, 120, "produce after the roll", 0.5)
    writer.stop.set()
    writer.join(180)
    print(f"brokers ready: {seen_ready}")
    assert seen_ready["in their roll"] and min(seen_ready["in their roll"]) >= 2, \
        f"more than one broker down at once in their roll: {seen_ready}"
    assert min(seen_ready["before their roll"]) >= 1, f"every broker down while ZooKeeper rolled: {seen_ready}"
    stored = set(read_all(users[ALICE], TOPIC, 1000 + len(writer.acked), timeout=300))
    lost = [v for v in writer.acked if v not in stored]
    print(f"renewal: acknowledged {len(writer.acked)}, failed {writer.failed}, lost {len(lost)}")
    assert not lost, lost[:10]


def test_clients_need_the_ca(users, tmp_path):
    """Without the CA Secret's certificate the TLS handshake fails (librdkafka's own trust store
    does not know the cluster CA): the CA really is what the client needs."""
    other = tmp_path / "other.crt"
    other.write_bytes(CertificateAuthority.create(f"other-{uuid.uuid4().hex[:6]}", "x",
                                                  datetime.timedelta(days=1)).cert_pem)
    acked, errors = produce({**users[ALICE], "ssl.ca.location": str(other), "message.timeout.ms": 8000}, TOPIC, ["x"])
    assert not acked and errors
