"""The replica manager's read path and DeleteRecords' purgatory, in one process without a
listener: one broker leading a one-replica partition, fetched through ``ReplicaManager.read``
with ``FetchParams`` and a fetch session's context, as the Fetch handler does."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from odradek.broker.partitions import ReplicaManager
from odradek.broker.replication.fetch_session import FetchSessionCache
from odradek.broker.replication.purgatory import DeleteRecordsPurgatory
from odradek.broker.replication.read import FetchParams, IsolationLevel, PartitionRead
from odradek.broker.storage import LogManager
from odradek.cluster.model import BrokerInfo, ClusterMetadata, PartitionState, TopicMetadata
from odradek.errors import ErrorCode, KafkaError
from tests.replication.harness import TOPIC, TOPIC_ID, batch


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def _manager(tmp_path) -> ReplicaManager:
    logs = LogManager(tmp_path)
    logs.open_all()
    rm = ReplicaManager(1, logs)
    state = PartitionState(0, (1,), 1, 1, (1,), 1, 0)
    topic = TopicMetadata(TOPIC, TOPIC_ID, (state,), {})
    rm.apply(ClusterMetadata("c", "fake", 1, (BrokerInfo(1, "127.0.0.1", 9092, "http://unused"),), (topic,)))
    return rm


def _context(*partitions: int, offset: int = 0, topic: str = TOPIC):
    parts = tuple(SimpleNamespace(partition=p, fetch_offset=offset, partition_max_bytes=1 << 20) for p in partitions)
    req = SimpleNamespace(session_id=0, session_epoch=-1, topics=(SimpleNamespace(topic=topic, partitions=parts),))
    return FetchSessionCache().context(12, req, False, 0)


def _params(max_wait_ms: int = 0, min_bytes: int = 1, **kw) -> FetchParams:
    return FetchParams(-1, max_wait_ms, min_bytes, 1 << 20, **kw)


def test_a_consumer_reads_below_the_high_watermark_as_a_file_slice(tmp_path):
    async def scenario():
        rm = _manager(tmp_path)
        try:
            rm.append(TOPIC, 0, batch(b"a", b"b"))
            result = await rm.read(_params(), _context(0))
            [(topic, [part])] = result.topics
            assert topic == TOPIC and part.error == ErrorCode.none
            assert (part.high_watermark, part.log_start_offset, part.last_stable_offset) == (2, 0, 2)
            assert part.records is not None and part.records.size == result.bytes > 0
            assert part.aborted is None, "read_uncommitted: no aborted transactions"
            committed = await rm.read(_params(isolation=IsolationLevel.READ_COMMITTED), _context(0))
            assert committed.topics[0][1][0].aborted == ()
        finally:
            await rm.close()
    run(scenario())


def test_a_long_poll_waits_for_an_append_and_errors_answer_at_once(tmp_path):
    async def scenario():
        rm = _manager(tmp_path)
        try:
            waiting = asyncio.create_task(rm.read(_params(max_wait_ms=20_000), _context(0)))
            while rm.wakeup.waiting == 0:  # parked: no bytes yet (the scenario's deadline bounds this)
                await asyncio.sleep(0.01)
            assert not waiting.done()
            rm.append(TOPIC, 0, batch(b"a"))
            assert (await asyncio.wait_for(waiting, 5)).bytes > 0
            missing = await rm.read(_params(max_wait_ms=20_000), _context(7))
            assert missing.topics[0][1][0].error == ErrorCode.unknown_topic_or_partition
            denied = await rm.read(_params(max_wait_ms=20_000, refused={TOPIC: ErrorCode.topic_authorization_failed}), _context(0))
            assert denied.topics == [(TOPIC, [PartitionRead(0, ErrorCode.topic_authorization_failed)])]
        finally:
            await rm.close()
    run(scenario())


def test_fetch_params_say_who_reads_what():
    follower = FetchParams(2, 500, 1, 1 << 20, IsolationLevel.READ_COMMITTED)
    assert follower.follower and not follower.committed, "followers read transactional batches whole"
    consumer = _params(isolation=IsolationLevel.READ_COMMITTED)
    assert consumer.committed and not consumer.follower


def test_delete_records_on_a_lone_leader_answers_its_new_low_watermark(tmp_path):
    async def scenario():
        rm = _manager(tmp_path)
        try:
            rm.append(TOPIC, 0, batch(b"a", b"b", b"c"))
            assert await asyncio.wait_for(rm.delete_records(TOPIC, 0, 2), 5) == (2, ErrorCode.none)
            assert rm.logs.get(TOPIC, 0).log_start_offset == 2
            with pytest.raises(KafkaError) as e:
                rm.delete_records(TOPIC, 0, 9)
            assert e.value.code == ErrorCode.offset_out_of_range
        finally:
            await rm.close()
    run(scenario())


def test_the_delete_records_purgatory_completes_on_the_low_watermark_or_fails_all():
    async def scenario():
        purgatory = DeleteRecordsPurgatory()
        low, high, gone = purgatory.park(5), purgatory.park(9), purgatory.park(7)
        gone.cancel()  # its request timed out
        purgatory.complete(6)
        assert low.result() == (6, ErrorCode.none) and not high.done() and len(purgatory) == 1
        purgatory.fail_all(ErrorCode.not_leader_or_follower)
        assert high.result() == (-1, ErrorCode.not_leader_or_follower) and len(purgatory) == 0
    run(scenario())
