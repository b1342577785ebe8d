"""Acceptance: stock Kafka clients produce and consume through Odradek unchanged.

For each client (confluent-kafka / librdkafka, kafka-python, aiokafka) and for acks=1 and
acks=0: a 6-partition topic, 50,000 keyed records with headers and explicit CreateTime
timestamps, read back with assign + seek-to-beginning (consumer groups are not served yet).
``verify`` (conftest) checks byte-identical keys/values/headers/timestamps, exactly-once
delivery, dense offsets, produce order per partition and per key, a stable key -> partition
mapping that agrees with the producer's acknowledgements, and the count. Producers run with
retries disabled, so a reordering or a duplicate can only come from the broker (Kafka keeps
the order of requests on a connection). With acks=0 Kafka may lose records only on a
failure; nothing fails here, so nothing may be lost.
"""

from __future__ import annotations

import pytest

RECORDS = 50_000
PARTITIONS = 6

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def cluster(shared_cluster):
    """The package's shared dev cluster (tests/integration/conftest.py): this module only creates its own topics."""
    return shared_cluster


@pytest.fixture(scope="module")
def records(dataset):
    return dataset.make(RECORDS, seed=42)


def _topic(cluster, client: str, acks: int) -> str:
    name = f"acceptance-{client}-acks{acks}"
    cluster.create_topic(name, partitions=PARTITIONS)
    return name


@pytest.mark.parametrize("acks", [1, 0])
@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python", "aiokafka"])
def test_client_round_trip(cluster, dataset, clients, records, client, acks):
    produce, consume = {
        "confluent-kafka": (clients.confluent_produce, clients.confluent_consume),
        "kafka-python": (clients.kafka_python_produce, clients.kafka_python_consume),
        "aiokafka": (clients.aiokafka_produce, clients.aiokafka_consume),
    }[client]
    topic = _topic(cluster, client, acks)
    delivered = produce(cluster.bootstrap, topic, records, acks=acks)
    got, high = consume(cluster.bootstrap, topic, PARTITIONS, RECORDS)
    dataset.verify(records, got, delivered)
    assert high == RECORDS, f"high watermarks sum to {high}, produced {RECORDS}"
