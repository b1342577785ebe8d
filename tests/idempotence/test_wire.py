"""Idempotent producer on a dev cluster: InitProducerId, the produce error codes on the wire,
dedupe across a broker restart, and real clients with idempotence on (confluent-kafka,
kafka-python's default, aiokafka)."""

import datetime

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from odradek.records import Record, build_batch
from tests.support.clients import aiokafka_produce, confluent_consume, confluent_produce, kafka_python_produce
from tests.support.kafka_wire import WireClient
from tests.support.records import make_records, verify

PRODUCE, INIT_PRODUCER_ID, API_VERSIONS = 0, 22, 18


def init_producer_id(client: WireClient, transactional_id: str | None = None, timeout_ms: int = 60_000):
    return client.request(INIT_PRODUCER_ID, 4, InitProducerIdRequest(
        transactional_id=transactional_id, transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
        producer_id=-1, producer_epoch=-1))


def produce(client: WireClient, topic: str, value: bytes, *, pid: int, epoch: int, seq: int):
    records = bytes(build_batch([Record(value, b"k")], producer_id=pid, producer_epoch=epoch, base_sequence=seq))
    request = ProduceRequest(transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=20),
                             topic_data=(TopicProduceData(name=topic, partition_data=(
                                 PartitionProduceData(index=0, records=records),)),))
    return client.request(PRODUCE, 9, request).responses[0].partition_responses[0]


@pytest.fixture(scope="module")
def topic(cluster):
    cluster.create_topic("idem-wire", partitions=1, replication_factor=3)
    cluster.wait_for_leaders("idem-wire", 1)
    return "idem-wire"


def test_api_versions_advertises_init_producer_id_0_to_5(cluster):
    from kio.schema.api_versions.v3.request import ApiVersionsRequest
    with WireClient(cluster.bootstrap.split(",")[0]) as c:
        keys = c.request(API_VERSIONS, 3, ApiVersionsRequest(client_software_name="t",
                                                             client_software_version="1")).api_keys
    assert [(k.min_version, k.max_version) for k in keys if k.api_key == INIT_PRODUCER_ID] == [(0, 5)]


def test_init_producer_id_hands_out_distinct_ids_at_epoch_0(cluster):
    ids = set()
    for address in cluster.brokers.values():
        with WireClient(address) as c:
            for _ in range(3):
                r = init_producer_id(c)
                assert (r.error_code, r.producer_epoch) == (ErrorCode.none, 0)
                ids.add(r.producer_id)
    assert len(ids) == 3 * len(cluster.brokers)
    assert_ids_in_reserved_blocks(cluster, ids)


def assert_ids_in_reserved_blocks(cluster, ids):
    """Every broker's ids come from its own block of 1000 reserved in ZooKeeper /producer_id_block."""
    import json

    from kazoo.client import KazooClient

    from odradek.cluster import paths
    status = cluster.status()
    zk = KazooClient(hosts=status["zookeeper"] + paths.chroot(status["cluster"]))
    zk.start(timeout=30)
    try:
        block = json.loads(zk.get(paths.PRODUCER_ID_BLOCK)[0])
    finally:
        zk.stop()
        zk.close()
    assert block["version"] == 1 and int(block["block_end"]) - int(block["block_start"]) == 999
    assert max(ids) <= int(block["block_end"])
    assert len({i // 1000 for i in ids}) == len(cluster.brokers)  # one block per broker


def test_transactional_id_goes_to_the_transaction_coordinator(cluster):
    """No ``__transaction_state`` yet (no FindCoordinator for a transactional id): no broker
    coordinates the id, as Kafka answers (tests/transactions cover the coordinator)."""
    with WireClient(cluster.bootstrap.split(",")[0]) as c:
        r = init_producer_id(c, "tx-1")
    assert (r.error_code, r.producer_id) == (ErrorCode.not_coordinator, -1)


def test_produce_error_codes(cluster, topic):
    with WireClient(cluster.leader_address(topic, 0)) as c:
        pid = init_producer_id(c).producer_id
        first = produce(c, topic, b"a", pid=pid, epoch=0, seq=0)
        assert first.error_code == ErrorCode.none
        retry = produce(c, topic, b"a", pid=pid, epoch=0, seq=0)
        assert (retry.error_code, retry.base_offset) == (ErrorCode.none, first.base_offset)
        assert produce(c, topic, b"c", pid=pid, epoch=0, seq=5).error_code == ErrorCode.out_of_order_sequence_number
        assert produce(c, topic, b"b", pid=pid, epoch=1, seq=0).error_code == ErrorCode.none
        assert produce(c, topic, b"x", pid=pid, epoch=0, seq=1).error_code == ErrorCode.invalid_producer_epoch
        assert produce(c, topic, b"c", pid=pid, epoch=1, seq=1).base_offset == first.base_offset + 2


@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka"])
def test_idempotent_clients_produce_exactly_once(cluster, client):
    name = f"idem-{client}"
    cluster.create_topic(name, partitions=3, replication_factor=3)
    cluster.wait_for_leaders(name, 3)
    sent = make_records(3000)
    if client == "confluent":
        delivered = confluent_produce(cluster.bootstrap, name, sent, **{"enable.idempotence": True, "retries": 5})
    elif client == "kafka-python":
        # the helper turns off what kafka-python 3 turns on by default
        delivered = kafka_python_produce(cluster.bootstrap, name, sent, enable_idempotence=True, retries=5)
    else:
        delivered = aiokafka_produce(cluster.bootstrap, name, sent, enable_idempotence=True)
    got, _ = confluent_consume(cluster.bootstrap, name, 3, len(sent))
    verify(sent, got, delivered)


# last: the restarts would leave the next test's cluster partly up
def test_dedupe_survives_restart_of_every_broker(cluster, topic):
    with WireClient(cluster.leader_address(topic, 0)) as c:
        pid = init_producer_id(c).producer_id
        original = produce(c, topic, b"before-restart", pid=pid, epoch=0, seq=0)
    assert original.error_code == ErrorCode.none
    for broker_id in cluster.brokers:
        cluster.run("kill", str(broker_id), "--graceful")
        cluster.run("start", str(broker_id))
    cluster.wait_for_leaders(topic, 1)
    cluster.refresh()
    assert list(cluster.data_dir.glob(f"broker-*/{topic}-0/*.snapshot")), "graceful shutdown writes snapshots"
    with WireClient(cluster.leader_address(topic, 0)) as c:
        retry = produce(c, topic, b"before-restart", pid=pid, epoch=0, seq=0)
        assert (retry.error_code, retry.base_offset) == (ErrorCode.none, original.base_offset)
        assert produce(c, topic, b"gap", pid=pid, epoch=0, seq=2).error_code == ErrorCode.out_of_order_sequence_number
