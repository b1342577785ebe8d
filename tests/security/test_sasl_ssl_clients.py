"""Kafka's clients, unchanged, over SASL_SSL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and SSL with
a client certificate; SCRAM users made with AlterUserScramCredentials; replication between
brokers over the SASL_SSL inter-broker listener (RF 3, acks=all)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from tests.security.conftest import PLAIN_USERS, Secured

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PASSWORD = "s3cret-pw"
RECORDS = [f"record-{i}".encode() for i in range(20)]
TIMEOUT_S = 60


def _user(mechanism: str) -> tuple[str, str]:
    return ("paula", PLAIN_USERS["paula"]) if mechanism == "PLAIN" else (f"user-{mechanism.lower()}", PASSWORD)


@pytest.fixture(scope="module")
def scram_users(secured: Secured) -> None:
    """AlterUserScramCredentials through confluent-kafka's AdminClient (PLAINTEXT listener)."""
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    admin = secured.cluster.admin()
    upserts = [UserScramCredentialUpsertion(_user(m)[0], ScramCredentialInfo(getattr(ScramMechanism, m.replace("-", "_")),
                                                                             4096), PASSWORD.encode())
               for m in MECHANISMS[1:]]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(timeout=TIMEOUT_S)
    described = admin.describe_user_scram_credentials([u.user for u in upserts])
    for user, future in described.items():
        infos = future.result(timeout=TIMEOUT_S).scram_credential_infos
        assert [i.iterations for i in infos] == [4096], (user, infos)


def _topic(secured: Secured) -> str:
    name = f"sec-{uuid.uuid4().hex[:8]}"
    secured.cluster.create_topic(name, partitions=1, replication_factor=3)
    return name


def confluent_roundtrip(bootstrap: str, topic: str, conf: dict) -> list[bytes]:
    from confluent_kafka import Consumer, Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **conf})
    errors = []
    for value in RECORDS:
        producer.produce(topic, value, on_delivery=lambda err, _msg: err and errors.append(err))
    assert producer.flush(TIMEOUT_S) == 0 and not errors, errors
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                         **conf})
    consumer.subscribe([topic])
    got = []
    try:
        for _ in range(TIMEOUT_S * 2):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
            if len(got) >= len(RECORDS):
                break
    finally:
        consumer.close()
    return got


def kafka_python_roundtrip(bootstrap: str, topic: str, conf: dict) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all", **conf)
    for value in RECORDS:
        producer.send(topic, value)
    producer.flush(TIMEOUT_S)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap.split(","), auto_offset_reset="earliest",
                             group_id=f"g-{topic}", consumer_timeout_ms=TIMEOUT_S * 1000, **conf)
    got = []
    for msg in consumer:
        got.append(msg.value)
        if len(got) >= len(RECORDS):
            break
    consumer.close()
    return got


def aiokafka_roundtrip(bootstrap: str, topic: str, conf: dict) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", **conf)
        await producer.start()
        try:
            for value in RECORDS:
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                    group_id=f"g-{topic}", **conf)
        await consumer.start()
        got = []
        try:
            while len(got) < len(RECORDS):
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), TIMEOUT_S)
                got.extend(m.value for msgs in batch.values() for m in msgs)
        finally:
            await consumer.stop()
        return got
    return asyncio.run(run())


def client_conf(client: str, secured: Secured, mechanism: str) -> dict:
    user, password = _user(mechanism)
    if client == "confluent":
        return {"security.protocol": "SASL_SSL", "sasl.mechanisms": mechanism, "sasl.username": user,
                "sasl.password": password, "ssl.ca.location": secured.ca_file}
    if client == "kafka-python":
        return dict(security_protocol="SASL_SSL", sasl_mechanism=mechanism, sasl_plain_username=user,
                    sasl_plain_password=password, ssl_cafile=secured.ca_file)
    from aiokafka.helpers import create_ssl_context
    return dict(security_protocol="SASL_SSL", sasl_mechanism=mechanism, sasl_plain_username=user,
                sasl_plain_password=password, ssl_context=create_ssl_context(cafile=secured.ca_file))


ROUNDTRIPS = {"confluent": confluent_roundtrip, "kafka-python": kafka_python_roundtrip,
              "aiokafka": aiokafka_roundtrip}


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("client", ROUNDTRIPS)
def test_client_produces_and_consumes_over_sasl_ssl(secured: Secured, scram_users, client: str, mechanism: str):
    topic = _topic(secured)
    got = ROUNDTRIPS[client](secured.bootstrap("SECURE"), topic, client_conf(client, secured, mechanism))
    assert got == RECORDS


def test_metadata_answers_with_the_listener_of_the_connection(secured: Secured, scram_users):
    from confluent_kafka.admin import AdminClient
    conf = client_conf("confluent", secured, "SCRAM-SHA-512")
    md = AdminClient({"bootstrap.servers": secured.bootstrap("SECURE"), **conf}).list_topics(timeout=TIMEOUT_S)
    assert sorted(f"{b.host}:{b.port}" for b in md.brokers.values()) == sorted(secured.endpoints["SECURE"])


def test_ssl_client_certificate_gives_the_principal(secured: Secured):
    topic = _topic(secured)
    conf = {"security.protocol": "SSL", "ssl.ca.location": secured.ca_file,
            "ssl.certificate.location": secured.client_cert, "ssl.key.location": secured.client_cert}
    assert confluent_roundtrip(secured.bootstrap("MTLS"), topic, conf) == RECORDS
    logs = "".join(p.read_text() for p in (secured.cluster.data_dir / "logs").glob("broker-*.log"))
    assert "on MTLS authenticated as User:CN=alice,OU=eng,O=Example" in logs


def test_replication_over_the_sasl_ssl_inter_broker_listener(secured: Secured):
    """acks=all with min.insync.replicas=3 completes only if both followers fetch over INTERNAL."""
    from confluent_kafka.admin import NewTopic
    name = f"rep-{uuid.uuid4().hex[:8]}"
    admin = secured.cluster.admin()
    admin.create_topics([NewTopic(name, 1, 3, config={"min.insync.replicas": "3"})])[name].result(TIMEOUT_S)
    secured.cluster.wait_for_leaders(name, 1)
    got = confluent_roundtrip(secured.cluster.bootstrap, name, {"message.timeout.ms": 20000})
    assert got == RECORDS
