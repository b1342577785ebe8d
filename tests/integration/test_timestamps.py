"""Record timestamps checked as Kafka 3.9 checks them (LogValidator.validateTimestamp): a topic's
message.timestamp.before.max.ms / after.max.ms refuse a record stamped too far from the broker's
clock with INVALID_TIMESTAMP (32) and nothing written, changed live by AlterConfigs and
IncrementalAlterConfigs; a LogAppendTime topic takes any timestamp. Real clients are the oracles."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType

from odradek.dev.waiting import wait_until

HOUR = 3_600_000
LONG_MAX = str(2**63 - 1)


@pytest.fixture(scope="module")
def cluster(shared_cluster):
    """The package's shared dev cluster (tests/integration/conftest.py): this module only creates its own topics."""
    return shared_cluster


def _now() -> int:
    return int(time.time() * 1000)


def _confluent_produce(cluster, topic: str, *timestamps: int) -> list[int]:
    """Each record's error code (0: written), sent in one batch."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 100, "retries": 0,
                         "enable.idempotence": False})
    codes: list[int] = []
    for ts in timestamps:
        producer.produce(topic, b"v", partition=0, timestamp=ts,
                         on_delivery=lambda err, _m: codes.append(err.code() if err else 0))
    assert producer.flush(30) == 0
    return codes


def _log_end(cluster, topic: str) -> int:
    reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"{topic}-probe"})
    try:
        return reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        reader.close()


def _alter(cluster, topic: str, **configs: str) -> None:
    admin = cluster.admin()
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    admin.incremental_alter_configs([res])[res].result(60)


def test_records_beyond_the_limits_are_refused_by_each_client_and_nothing_is_written(cluster):
    """librdkafka fails the batch's records with the code; kafka-python (Produce v9, record errors,
    KIP-467) gives the late record Kafka's message and the others a generic one."""
    from kafka import KafkaProducer
    from kafka.errors import InvalidTimestampError
    topic = "ts-limits"
    cluster.create_topic(topic, partitions=1, replication_factor=3,
                         config={"message.timestamp.before.max.ms": str(HOUR)})
    now = _now()
    assert _confluent_produce(cluster, topic, now - HOUR // 2, now + 10 * HOUR) == [0, 0]
    assert _confluent_produce(cluster, topic, now, now - 2 * HOUR) == [KafkaError.INVALID_TIMESTAMP] * 2
    assert _log_end(cluster, topic) == 2
    other = KafkaProducer(bootstrap_servers=cluster.bootstrap, retries=0, enable_idempotence=False, linger_ms=200)
    try:
        futures = [other.send(topic, value=b"v", partition=0, timestamp_ms=ts) for ts in (now, now - 2 * HOUR)]
        other.flush(30)
    finally:
        other.close()
    late = futures[1].exception
    assert isinstance(late, InvalidTimestampError), late
    assert f"Timestamp {now - 2 * HOUR} of message with offset 1 is out of range" in str(late), late
    assert "part of a batch which had one more more invalid records" in str(futures[0].exception)
    assert _log_end(cluster, topic) == 2
    # after.max.ms, set live: a record from the future is refused once the leader has it
    _alter(cluster, topic, message_timestamp_after_max_ms="60000")
    wait_until(lambda: _confluent_produce(cluster, topic, _now() + HOUR) == [KafkaError.INVALID_TIMESTAMP], 30,
               "a record an hour ahead refused under after.max.ms")
    end = _log_end(cluster, topic)      # records sent before the leader had the change were taken
    assert _confluent_produce(cluster, topic, _now() + HOUR, _now() + 1_000) == [KafkaError.INVALID_TIMESTAMP] * 2
    assert _log_end(cluster, topic) == end
    assert _confluent_produce(cluster, topic, _now() + 1_000) == [0]
    assert _log_end(cluster, topic) == end + 1


def test_difference_max_ms_set_live_bounds_both_sides_and_log_append_time_takes_anything(cluster):
    topic = "ts-difference"
    cluster.create_topic(topic, partitions=1)
    assert _confluent_produce(cluster, topic, 1_000) == [0]
    legacy = ConfigResource(ResourceType.TOPIC, topic, set_config={"message.timestamp.difference.max.ms": "60000"})
    admin = cluster.admin()
    admin.alter_configs([legacy])[legacy].result(60)      # AlterConfigs, as kafka-configs sent it before 2.3
    wait_until(lambda: _confluent_produce(cluster, topic, 1_000) == [KafkaError.INVALID_TIMESTAMP], 30,
               "an old record refused under difference.max.ms")
    assert _confluent_produce(cluster, topic, _now() + HOUR) == [KafkaError.INVALID_TIMESTAMP]
    described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    entries = next(iter(described.values())).result(60)
    difference = entries["message.timestamp.difference.max.ms"]
    assert (difference.value, difference.source) == ("60000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert [(s.name, s.value) for s in difference.synonyms.values()] == [
        ("message.timestamp.difference.max.ms", "60000"), ("log.message.timestamp.difference.max.ms", LONG_MAX)]
    before = entries["message.timestamp.before.max.ms"]
    assert (before.value, before.source) == (LONG_MAX, ConfigSource.DEFAULT_CONFIG.value)
    end = _log_end(cluster, topic)
    _alter(cluster, topic, message_timestamp_type="LogAppendTime")
    wait_until(lambda: _confluent_produce(cluster, topic, 1_000) == [0], 30, "LogAppendTime takes any timestamp")
    assert _confluent_produce(cluster, topic, _now() + HOUR) == [0]
    assert _log_end(cluster, topic) == end + 2
