"""Writes a hostile tenant must not be able to make (issue 30, items 2 and 5), replayed
against the shared ``odradek dev up --security sasl_ssl`` cluster (``dev_secured``) with
hand-built requests (the project's own codecs over SASL_SSL, SCRAM-SHA-512):

- garbage produced to partition 0 of ``__consumer_offsets`` and ``__transaction_state``, as the
  super user: INVALID_TOPIC_EXCEPTION (no message, as Kafka 3.9); a group hashed to that
  partition still commits and fetches after its coordinator moved (the leader killed and back);
- a transactional batch without a transactional.id: TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
  nothing written, the last stable offset not pinned;
- a transactional batch for a partition not added to the transaction: Kafka 3.9's
  INVALID_TXN_STATE "Partition was not added to the transaction" (KIP-890 part 1), from every
  leader, whether the coordinator is on the same broker or another; once added, appended.
"""

from __future__ import annotations

import asyncio
import datetime
import ssl
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from kio.static.constants import EntityType

from odradek.broker.group.config import partition_for
from odradek.broker.replication.client import KafkaClient
from odradek.broker.replication.connector import ClientSecurity
from odradek.dev.harness import Cluster
from odradek.errors import ErrorCode as E
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make
from odradek.records import Record, build_batch
from odradek.topics import OFFSETS_TOPIC as CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC

TOPIC = "hostile-writes"
PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(dev_secured) -> Cluster:
    dev_secured.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    return dev_secured


def call(cluster: Cluster, address: str, api: ApiKey, version: int, body):
    """One request as the super user (``admin``) to ``address``, over SASL_SSL."""
    sec = cluster.security
    context = ssl.create_default_context(cafile=sec["ca_file"])
    security = ClientSecurity("CLIENT", context, sec["mechanism"], sec["username"], sec["password"])

    async def once():
        host, port = address.rsplit(":", 1)
        client = KafkaClient(host, int(port), client_id="hostile-writes", security=security)
        try:
            return await client.request(api, version, body, timeout=30)
        finally:
            client.close()
    return asyncio.run(once())


def produce(cluster: Cluster, topic: str, partition: int, records: bytes, tid: str | None = None):
    """A hand-built ProduceRequest v9 (acks=all) to the partition's leader: its partition answer."""
    s = Schemas(ApiKey.PRODUCE, 9, EntityType.request)
    body = make(s.ProduceRequest, transactional_id=tid, acks=-1, timeout=datetime.timedelta(seconds=20),
                topic_data=(make(s.TopicProduceData, name=topic, partition_data=(
                    make(s.PartitionProduceData, index=partition, records=records),)),))
    (answer,) = call(cluster, cluster.leader_address(topic, partition), ApiKey.PRODUCE, 9, body
                     ).responses[0].partition_responses
    return answer


def garbage() -> bytes:
    return bytes(build_batch([Record(b"\xff" * 16, b"\x00\x01garbage"), Record(b"\x00", b"\x7f")]))


def transactional(pid: int, epoch: int, seq: int = 0) -> bytes:
    return bytes(build_batch([Record(b"v", b"k")], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                             transactional=True))


def coordinator(cluster: Cluster, key: str, key_type: int) -> str:
    s = Schemas(ApiKey.FIND_COORDINATOR, 4, EntityType.request)
    deadline = time.monotonic() + 60
    while True:
        (found,) = call(cluster, cluster.bootstrap.split(",")[0], ApiKey.FIND_COORDINATOR, 4, make(
            s.FindCoordinatorRequest, key_type=key_type, coordinator_keys=(key,))).coordinators
        if found.error_code == E.none:
            return f"{found.host}:{found.port}"
        assert time.monotonic() < deadline, found
        time.sleep(0.2)   # the internal topic being created, its partition loading


def consumer(cluster: Cluster, group: str) -> Consumer:
    return Consumer(cluster.access.confluent({"group.id": group, "enable.auto.commit": False}))


def offsets_partitions(cluster: Cluster) -> int:
    """``__consumer_offsets``' partition count, once it exists (FindCoordinator creates it)."""
    coordinator(cluster, "hostile-group", 0)
    deadline = time.monotonic() + 60
    while not (leaders := cluster.partition_leaders(CONSUMER_OFFSETS_TOPIC)):
        assert time.monotonic() < deadline, "no __consumer_offsets"
        time.sleep(0.2)
    return len(cluster.wait_for_leaders(CONSUMER_OFFSETS_TOPIC, len(leaders)))


def group_on_partition_0(cluster: Cluster) -> str:
    partitions = offsets_partitions(cluster)
    return next(g for g in (f"hostile-group-{i}" for i in range(10_000)) if partition_for(g, partitions) == 0)


def commit_and_fetch(cluster: Cluster, group: str, offset: int) -> int:
    """Commit ``offset`` for TOPIC-0 in ``group`` (retrying while the coordinator moves) and read it back."""
    c = consumer(cluster, group)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                c.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)
                (tp,) = c.committed([TopicPartition(TOPIC, 0)], timeout=10)
                return tp.offset
            except Exception:   # KafkaException: NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS while it moves
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        c.close()


def test_garbage_to_the_internal_topics_is_refused_even_for_the_super_user(cluster):
    offsets_partitions(cluster)                                   # __consumer_offsets exists
    coordinator(cluster, "hostile-writes-tx", 1)                  # and __transaction_state
    for topic in (CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC):
        answer = produce(cluster, topic, 0, garbage())
        assert (answer.error_code, answer.error_message) == (E.invalid_topic_exception, None)


def test_a_transactional_batch_without_a_transactional_id_is_refused(cluster):
    before = latest_stable(cluster, 0)
    answer = produce(cluster, TOPIC, 0, transactional(pid=4242, epoch=0), tid=None)
    assert answer.error_code == E.transactional_id_authorization_failed, answer
    assert latest_stable(cluster, 0) == before       # nothing written: no transaction pins the LSO


def test_a_partition_not_added_to_the_transaction_is_refused(cluster):
    tid = "hostile-writes-tx"
    address = coordinator(cluster, tid, 1)
    s = Schemas(ApiKey.INIT_PRODUCER_ID, 4, EntityType.request)
    init = call(cluster, address, ApiKey.INIT_PRODUCER_ID, 4, make(
        s.InitProducerIdRequest, transactional_id=tid, transaction_timeout=datetime.timedelta(seconds=60),
        producer_id=-1, producer_epoch=-1))
    assert init.error_code == E.none, init
    pid, epoch = init.producer_id, init.producer_epoch
    assert len(set(cluster.partition_leaders(TOPIC).values())) > 1, "leaders on several brokers"
    for p in range(PARTITIONS):   # leaders on every broker: the coordinator asked in process and over the wire
        answer = produce(cluster, TOPIC, p, transactional(pid, epoch), tid=tid)
        assert (answer.error_code, answer.error_message) == (
            E.invalid_txn_state, "Partition was not added to the transaction"), (p, answer)
    s = Schemas(ApiKey.ADD_PARTITIONS_TO_TXN, 3, EntityType.request)
    added = call(cluster, address, ApiKey.ADD_PARTITIONS_TO_TXN, 3, make(
        s.AddPartitionsToTxnRequest, v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch, v3_and_below_topics=(
            make(s.AddPartitionsToTxnTopic, name=TOPIC, partitions=tuple(range(PARTITIONS))),)))
    assert {r.partition_error_code for t in added.results_by_topic_v3_and_below
            for r in t.results_by_partition} == {E.none}
    for p in range(PARTITIONS):
        assert produce(cluster, TOPIC, p, transactional(pid, epoch), tid=tid).error_code == E.none
    s = Schemas(ApiKey.END_TXN, 3, EntityType.request)
    ended = call(cluster, address, ApiKey.END_TXN, 3, make(
        s.EndTxnRequest, transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=False))
    assert ended.error_code == E.none


# last: it moves leaderships
def test_groups_are_served_after_a_coordinator_move(cluster):
    group = group_on_partition_0(cluster)
    partitions = len(cluster.partition_leaders(CONSUMER_OFFSETS_TOPIC))
    assert produce(cluster, CONSUMER_OFFSETS_TOPIC, 0, garbage()).error_code == E.invalid_topic_exception
    assert commit_and_fetch(cluster, group, 5) == 5
    leader = cluster.leader_id(CONSUMER_OFFSETS_TOPIC, 0)
    cluster.run("kill", str(leader))                    # the coordinator moves to another replica
    deadline = time.monotonic() + 60
    while cluster.leader_id(CONSUMER_OFFSETS_TOPIC, 0) in (leader, -1):
        assert time.monotonic() < deadline, "no new leader for __consumer_offsets-0"
        time.sleep(0.2)
    assert commit_and_fetch(cluster, group, 6) == 6
    cluster.run("start", str(leader))                   # and back: it loads the partition again
    cluster.refresh()
    cluster.wait_for_leaders(CONSUMER_OFFSETS_TOPIC, partitions)
    cluster.wait_for_leaders(TOPIC, PARTITIONS)
    assert commit_and_fetch(cluster, group, 7) == 7


def latest_stable(cluster: Cluster, partition: int) -> int:
    """ListOffsets read_committed latest: the last stable offset of TOPIC-``partition``."""
    s = Schemas(ApiKey.LIST_OFFSETS, 7, EntityType.request)
    body = make(s.ListOffsetsRequest, replica_id=-1, isolation_level=1, topics=(make(
        s.ListOffsetsTopic, name=TOPIC, partitions=(make(
            s.ListOffsetsPartition, partition_index=partition, current_leader_epoch=-1, timestamp=-1),)),))
    (answer,) = call(cluster, cluster.leader_address(TOPIC, partition), ApiKey.LIST_OFFSETS, 7, body
                     ).topics[0].partitions
    assert answer.error_code == E.none, answer
    return answer.offset
