"""Admin APIs through stock clients: topic configs, partitions, deletion, cluster description,
auto-creation, LogAppendTime, and a replication factor above the broker count refused."""

import time

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic, ResourceType
from kafka import KafkaAdminClient
from kafka.errors import InvalidReplicationFactorError, TopicAlreadyExistsError
from kio.schema.errors import ErrorCode

from odradek.dev.waiting import wait_until


@pytest.fixture(scope="module")
def cluster(shared_cluster):
    """The package's shared dev cluster (tests/integration/conftest.py): this module only creates its own topics."""
    return shared_cluster


def _error(future) -> ErrorCode:
    """The Kafka error code a failed admin future carries."""
    with pytest.raises(KafkaException) as e:
        future.result(30)
    return ErrorCode(e.value.args[0].code())


def test_create_errors_are_kafkas(cluster):
    admin = cluster.admin()
    cluster.create_topic("dup", partitions=1)
    assert _error(admin.create_topics([NewTopic("dup", 1, 1)])["dup"]) == ErrorCode.topic_already_exists
    assert _error(admin.create_topics([NewTopic("rf4", 1, 4)])["rf4"]) == ErrorCode.invalid_replication_factor
    assert _error(admin.create_topics([NewTopic("bad/name", 1, 1)])["bad/name"]) == ErrorCode.invalid_topic_exception
    assert _error(admin.create_topics([NewTopic("zero", 0, 1)])["zero"]) == ErrorCode.invalid_partitions
    assert _error(admin.create_topics([NewTopic("cfg", 1, 1, config={"retention.ms": "soon"})])["cfg"]) \
        == ErrorCode.invalid_config


def test_kafka_python_admin_sees_the_same_errors(cluster):
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap.split(","))
    try:
        from kafka.admin import NewTopic as KNewTopic
        admin.create_topics([KNewTopic("kp-topic", 2, 1)])
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([KNewTopic("kp-topic", 2, 1)])
        with pytest.raises(InvalidReplicationFactorError):
            admin.create_topics([KNewTopic("kp-rf", 1, 4)])
    finally:
        admin.close()


def test_describe_and_alter_topic_configs(cluster):
    admin = cluster.admin()
    cluster.create_topic("configured", partitions=1, config={"retention.ms": "123456"})
    res = ConfigResource(ResourceType.TOPIC, "configured")
    configs = admin.describe_configs([res])[res].result(30)
    assert configs["retention.ms"].value == "123456"
    assert configs["segment.bytes"].value == "1073741824" and configs["segment.bytes"].is_default
    change = ConfigResource(ResourceType.TOPIC, "configured", incremental_configs=[
        ConfigEntry("retention.ms", "999", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    admin.incremental_alter_configs([change])[change].result(30)

    def altered():
        c = admin.describe_configs([res])[res].result(30)
        return c["retention.ms"].value == "999" and c["cleanup.policy"].value == "delete,compact"
    wait_until(altered, 30, "altered configs to show")
    bad = ConfigResource(ResourceType.TOPIC, "configured", incremental_configs=[
        ConfigEntry("no.such.key", "1", incremental_operation=AlterConfigOpType.SET)])
    assert _error(admin.incremental_alter_configs([bad])[bad]) == ErrorCode.invalid_config


def test_add_partitions_and_delete_topic(cluster):
    admin = cluster.admin()
    cluster.create_topic("growing", partitions=2)
    admin.create_partitions([NewPartitions("growing", 5)])["growing"].result(30)
    cluster.wait_for_leaders("growing", 5)
    assert _error(admin.create_partitions([NewPartitions("growing", 3)])["growing"]) == ErrorCode.invalid_partitions
    admin.delete_topics(["growing"])["growing"].result(30)
    wait_until(lambda: "growing" not in admin.list_topics(timeout=10).topics, 30, "the topic to disappear")
    assert _error(admin.delete_topics(["growing"])["growing"]) == ErrorCode.unknown_topic_or_partition
    leftovers = [d for b in cluster.brokers for d in (cluster.data_dir / f"broker-{b}").glob("growing-*")
                 if not d.name.endswith("-delete")]
    assert leftovers == []


def test_describe_cluster_lists_every_broker(cluster):
    admin = cluster.admin()  # the handle must outlive its futures
    desc = admin.describe_cluster().result(30)
    assert sorted(n.id for n in desc.nodes) == sorted(cluster.brokers)
    assert desc.controller.id == min(cluster.brokers) and desc.cluster_id


def test_auto_create_on_metadata_as_kafka_does(cluster):
    p = Producer({"bootstrap.servers": cluster.bootstrap})
    p.produce("auto-created", value=b"hello")
    assert p.flush(30) == 0
    assert len(cluster.wait_for_leaders("auto-created", 1)) == 1


def test_log_append_time_stamps_the_brokers_clock(cluster):
    cluster.create_topic("appended", partitions=1, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    p = Producer({"bootstrap.servers": cluster.bootstrap})
    p.produce("appended", value=b"v", timestamp=1_000_000_000_000)  # 2001: replaced by the broker
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "lat", "enable.auto.commit": False})
    c.assign([TopicPartition("appended", 0, 0)])
    msg = wait_until(lambda: c.poll(0.5), 30, "the record")
    c.close()
    kind, ts = msg.timestamp()
    assert kind == TIMESTAMP_LOG_APPEND_TIME and before - 1000 <= ts <= int(time.time() * 1000) + 1000
