"""DeleteRecords, DescribeLogDirs, DescribeProducers and include_authorized_operations through
stock clients (confluent-kafka's AdminClient) and, where they have no call for it, the wire."""

from __future__ import annotations

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AclOperation

from odradek.dev.waiting import wait_until
from tests.support.kafka_wire import WireClient


def _produce(cluster, topic: str, n: int, **config) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5, **config})
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), key=f"k{i}".encode(), partition=0)
    assert p.flush(30) == 0


def _error_code(future) -> int:
    try:
        future.result(60)
    except KafkaException as e:
        return e.args[0].code()
    return 0


def test_delete_records_then_a_consumer_starts_at_the_new_start(cluster):
    """RF 2: the leader moves its log start, the follower follows, the answer's low watermark
    is the smallest of the two; a consumer from the beginning reads from there."""
    admin = cluster.admin()
    topic = "delete-records"
    cluster.create_topic(topic, partitions=1, replication_factor=2)
    _produce(cluster, topic, 100)
    tp = TopicPartition(topic, 0, 40)
    deleted = admin.delete_records([tp])[tp].result(60)
    assert deleted.low_watermark == 40  # the low watermark
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "after-delete", "auto.offset.reset": "earliest"})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (40, 100)
        c.assign([TopicPartition(topic, 0)])
        first = wait_until(lambda: c.poll(1.0), 30, "a record after the deleted ones")
        assert (first.offset(), first.value()) == (40, b"v40")
    finally:
        c.close()
    past = TopicPartition(topic, 0, 101)
    assert _error_code(admin.delete_records([past])[past]) == 1  # OFFSET_OUT_OF_RANGE above the HW
    everything = TopicPartition(topic, 0, -1)  # up to the high watermark
    assert admin.delete_records([everything])[everything].result(60).low_watermark == 100


def test_delete_records_refused_on_a_compacted_topic(cluster):
    admin = cluster.admin()
    topic = "delete-records-compacted"
    cluster.create_topic(topic, partitions=1, config={"cleanup.policy": "compact"})
    _produce(cluster, topic, 10)
    tp = TopicPartition(topic, 0, 5)
    assert _error_code(admin.delete_records([tp])[tp]) == 44  # POLICY_VIOLATION


def _log_dirs(address: str, topics=None):
    from kio.schema.describe_log_dirs.v4 import request as r
    with WireClient(address) as client:
        return client.request(35, 4, r.DescribeLogDirsRequest(topics=topics))


def test_describe_log_dirs_sizes_and_lag(cluster):
    topic = "log-dirs"
    cluster.create_topic(topic, partitions=1, replication_factor=2)
    _produce(cluster, topic, 50)
    from kio.schema.describe_log_dirs.v4 import request as r
    for broker, address in cluster.brokers.items():
        answer = _log_dirs(address, (r.DescribableLogDirTopic(topic=topic, partitions=(0,)),))
        assert answer.error_code == 0
        (result,) = answer.results
        assert result.error_code == 0 and result.log_dir.endswith(f"broker-{broker}")
        assert 0 < result.usable_bytes <= result.total_bytes
        (described,) = result.topics
        (part,) = described.partitions
        assert described.name == topic and part.partition_index == 0 and not part.is_future_key
        wait_until(lambda: _log_dirs(address, (r.DescribableLogDirTopic(topic=topic, partitions=(0,)),))
                   .results[0].topics[0].partitions[0].partition_size > 0, 30, f"broker {broker}'s copy")
        assert part.offset_lag == 0


def test_describe_producers(cluster):
    topic = "producers"
    cluster.create_topic(topic, partitions=1)
    _produce(cluster, topic, 10, **{"enable.idempotence": True})
    from kio.schema.describe_producers.v0 import request as r
    leader = cluster.leader_address(topic, 0)
    with WireClient(leader) as client:
        answer = client.request(61, 0, r.DescribeProducersRequest(topics=(r.TopicRequest(name=topic,
                                                                                        partition_indexes=(0, 3)),)))
    ok, missing = answer.topics[0].partitions
    assert ok.error_code == 0 and missing.error_code == 3
    (producer,) = ok.active_producers
    assert producer.producer_id >= 0 and producer.producer_epoch >= 0 and producer.last_sequence == 9
    assert producer.last_timestamp > 0 and producer.current_txn_start_offset == -1  # no open transaction


def test_authorized_operations_without_an_authorizer_are_all_supported(cluster):
    admin = cluster.admin()
    topic = "authorized-ops"
    cluster.create_topic(topic, partitions=1)
    described = admin.describe_topics(__import__("confluent_kafka").TopicCollection([topic]),
                                      include_authorized_operations=True)[topic].result(60)
    assert set(described.authorized_operations) == {
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE, AclOperation.DELETE,
        AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    cluster_ops = admin.describe_cluster(include_authorized_operations=True).result(60).authorized_operations
    assert AclOperation.CLUSTER_ACTION in cluster_ops and AclOperation.IDEMPOTENT_WRITE in cluster_ops
