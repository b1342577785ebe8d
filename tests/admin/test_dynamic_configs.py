"""Dynamic broker configs (Kafka's ZooKeeper mode): the cluster-wide default and a broker's own
config, described with Kafka's sources, applied live (retention deletes segments without a
restart), surviving a restart; BROKER_LOGGER levels; a topic config read back at once."""

from __future__ import annotations

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType

from odradek.dev.waiting import wait_until
from tests.support.kafka_wire import WireClient

BROKER_LOGGER = 8


def _describe(admin, res):
    return admin.describe_configs([res])[res].result(60)


def _alter(admin, res):
    admin.incremental_alter_configs([res])[res].result(60)


def incremental_wire(cluster, rtype: int, name: str, *changes: tuple[str, str | None]):
    """IncrementalAlterConfigs over the wire, for what librdkafka refuses (the cluster default,
    resource name ""; BROKER_LOGGER): value None deletes; returns (error code, message)."""
    from kio.schema.incremental_alter_configs.v1 import request as r
    set_, delete = AlterConfigOpType.SET.value, AlterConfigOpType.DELETE.value
    body = r.IncrementalAlterConfigsRequest(resources=(r.AlterConfigsResource(
        resource_type=rtype, resource_name=name, configs=tuple(
            r.AlterableConfig(name=n, config_operation=set_ if v is not None else delete, value=v)
            for n, v in changes)),), validate_only=False)
    with WireClient(_address(cluster, name)) as client:
        answer = client.request(44, 1, body).responses[0]
    return answer.error_code, answer.error_message


def describe_wire(cluster, rtype: int, name: str) -> dict[str, str | None]:
    from kio.schema.describe_configs.v4 import request as r
    body = r.DescribeConfigsRequest(resources=(r.DescribeConfigsResource(
        resource_type=rtype, resource_name=name, configuration_keys=None),), include_synonyms=False,
        include_documentation=False)
    with WireClient(_address(cluster, name)) as client:
        result = client.request(32, 4, body).results[0]
    assert result.error_code == 0, result.error_message
    return {c.name: c.value for c in result.configs}


def _address(cluster, name: str) -> str:
    """The broker a resource names (its own resources are answered by it alone), else any."""
    return cluster.brokers[int(name)] if name.isdigit() else cluster.bootstrap.split(",")[0]


def alter_default(cluster, name: str, value: str | None):
    return incremental_wire(cluster, ResourceType.BROKER.value, "", (name, value))


def _earliest(cluster, topic: str) -> int:
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "earliest-probe"})
    try:
        low, _ = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return low
    finally:
        c.close()


def test_cluster_default_retention_applies_live(cluster):
    admin = cluster.admin()
    topic = "dyn-retention"
    cluster.create_topic(topic, partitions=1, config={"segment.bytes": "1024"})
    p = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0})
    for i in range(200):
        p.produce(topic, b"x" * 100, partition=0)
        p.flush(10) if i % 20 == 0 else None
    p.flush(30)
    assert _earliest(cluster, topic) == 0
    assert alter_default(cluster, "log.retention.ms", "1000")[0] == 0
    wait_until(lambda: _earliest(cluster, topic) > 0, 30, "old segments deleted by the new default retention")
    for broker in cluster.brokers:
        described = _describe(admin, ConfigResource(ResourceType.BROKER, str(broker)))
        entry = described["log.retention.ms"]
        assert entry.value == "1000" and entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        assert not entry.is_read_only
    topic_view = _describe(admin, ConfigResource(ResourceType.TOPIC, topic))["retention.ms"]
    assert topic_view.value == "1000" and topic_view.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert alter_default(cluster, "log.retention.ms", None)[0] == 0
    assert describe_wire(cluster, ResourceType.BROKER.value, str(min(cluster.brokers)))["log.retention.ms"] is None


def test_cluster_default_min_insync_replicas_applies_to_acks_all(cluster):
    topic = "dyn-min-isr"
    cluster.create_topic(topic, partitions=1)  # RF 1

    def produce() -> int:
        errors = []
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": False,
                      "retries": 0, "message.timeout.ms": 10000})
        p.produce(topic, b"v", partition=0, on_delivery=lambda err, _msg: errors.append(err))
        p.flush(30)
        return errors[0].code() if errors[0] is not None else 0
    # the other broker applies it on the change notification, a moment later
    assert alter_default(cluster, "min.insync.replicas", "2")[0] == 0
    wait_until(lambda: produce() == 19, 30, "acks=all refused with NOT_ENOUGH_REPLICAS")
    assert alter_default(cluster, "min.insync.replicas", None)[0] == 0
    wait_until(lambda: produce() == 0, 30, "acks=all accepted again")


def test_cluster_default_timestamp_difference_applies_live(cluster):
    """Kafka 3.9: log.message.timestamp.difference.max.ms stands for the before/after limits left
    at their default; a topic describes the limit so derived."""
    topic = "dyn-timestamps"
    cluster.create_topic(topic, partitions=1)

    def produce(timestamp: int) -> int:
        errors = []
        p = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": False, "retries": 0})
        p.produce(topic, b"v", partition=0, timestamp=timestamp, on_delivery=lambda err, _msg: errors.append(err))
        p.flush(30)
        return errors[0].code() if errors[0] is not None else 0
    assert produce(1_000) == 0
    assert alter_default(cluster, "log.message.timestamp.difference.max.ms", "3600000")[0] == 0
    try:
        wait_until(lambda: produce(1_000) == 32, 30, "an old record refused with INVALID_TIMESTAMP")
        before = _describe(cluster.admin(), ConfigResource(ResourceType.TOPIC, topic))["message.timestamp.before.max.ms"]
        assert (before.value, before.source) == ("3600000", ConfigSource.DEFAULT_CONFIG.value)
    finally:
        assert alter_default(cluster, "log.message.timestamp.difference.max.ms", None)[0] == 0
    wait_until(lambda: produce(1_000) == 0, 30, "old records accepted again")


def test_per_broker_config_and_kafkas_errors(cluster):
    admin = cluster.admin()
    broker = str(max(cluster.brokers))
    _alter(admin, ConfigResource(ResourceType.BROKER, broker, incremental_configs=[
        ConfigEntry("max.connections.per.ip", "500", incremental_operation=AlterConfigOpType.SET)]))
    entry = _describe(admin, ConfigResource(ResourceType.BROKER, broker))["max.connections.per.ip"]
    assert (entry.value, entry.source) == ("500", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    static = ConfigResource(ResourceType.BROKER, broker, incremental_configs=[
        ConfigEntry("auto.create.topics.enable", "false", incremental_operation=AlterConfigOpType.SET)])
    error = admin.incremental_alter_configs([static])[static].exception(60)
    assert error is not None and "Cannot update these configs dynamically" in str(error)


def legacy_alter(cluster, broker: str, configs: dict[str, str]):
    """AlterConfigs v1 over the wire (kafka-python's alter_configs keeps the other dynamic keys
    itself, as Kafka's tool does); returns (error code, message)."""
    from kio.schema.alter_configs.v1 import request as r
    body = r.AlterConfigsRequest(resources=(r.AlterConfigsResource(
        resource_type=ResourceType.BROKER.value, resource_name=broker,
        configs=tuple(r.AlterableConfig(name=n, value=v) for n, v in configs.items())),), validate_only=False)
    with WireClient(_address(cluster, broker)) as client:
        answer = client.request(33, 1, body).responses[0]
    return answer.error_code, answer.error_message


def test_legacy_alter_configs_replaces_the_whole_dynamic_config(cluster):
    """AlterConfigs v0-2: the resource's dynamic config becomes the given set, nothing else."""
    broker = str(min(cluster.brokers))
    assert legacy_alter(cluster, broker, {"log.segment.bytes": "2097152", "max.connections": "1000"})[0] == 0
    assert legacy_alter(cluster, broker, {"log.segment.bytes": "4194304"})[0] == 0
    described = _describe(cluster.admin(), ConfigResource(ResourceType.BROKER, broker))
    assert described["log.segment.bytes"].value == "4194304"
    assert described["max.connections"].source == ConfigSource.DEFAULT_CONFIG.value
    code, message = legacy_alter(cluster, broker, {"zookeeper.session.timeout.ms": "1000"})
    assert code == 42 and "Cannot update these configs dynamically" in message  # INVALID_REQUEST
    assert legacy_alter(cluster, broker, {})[0] == 0


def test_topic_config_read_back_at_once(cluster):
    """After IncrementalAlterConfigs, DescribeConfigs answers the new value (no stale read)."""
    admin = cluster.admin()
    topic = "dyn-read-your-write"
    cluster.create_topic(topic, partitions=1)
    res = ConfigResource(ResourceType.TOPIC, topic)
    for i in range(5):
        value = str(100_000 + i)
        _alter(admin, ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
            ConfigEntry("retention.ms", value, incremental_operation=AlterConfigOpType.SET)]))
        assert _describe(admin, res)["retention.ms"].value == value


def test_broker_logger_levels(cluster):
    """BROKER_LOGGER (8): the broker's loggers described and set live, Kafka's errors."""
    broker = str(min(cluster.brokers))
    before = describe_wire(cluster, BROKER_LOGGER, broker)
    assert before["root"] in ("INFO", "WARN", "DEBUG")
    name = "odradek.broker.server"
    assert incremental_wire(cluster, BROKER_LOGGER, broker, (name, "TRACE")) == (0, None)
    assert describe_wire(cluster, BROKER_LOGGER, broker)[name] == "TRACE"
    code, message = incremental_wire(cluster, BROKER_LOGGER, broker, (name, "LOUD"))
    assert code == 40 and "not a supported log level" in message  # INVALID_CONFIG
    assert incremental_wire(cluster, BROKER_LOGGER, broker, ("root", None))[0] == 42  # INVALID_REQUEST
    assert incremental_wire(cluster, BROKER_LOGGER, broker, (name, None)) == (0, None)
    assert describe_wire(cluster, BROKER_LOGGER, broker)[name] == before["root"]


def test_dynamic_configs_survive_a_restart(cluster):
    """Read again from ZooKeeper at start-up (last in the module: the restart disturbs clients)."""
    assert alter_default(cluster, "log.retention.ms", "1000")[0] == 0
    victim = min(cluster.brokers)
    cluster.run("kill", str(victim))
    cluster.run("start", str(victim))
    wait_until(lambda: describe_wire(cluster, ResourceType.BROKER.value, str(victim))["log.retention.ms"] == "1000",
               30, "the dynamic default read again at start-up")
