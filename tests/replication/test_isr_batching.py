"""A leader's ISR changes travel to the controller many partitions a request, one request in
flight (Kafka's AlterPartitionManager): real partitions and logs, a fake controller call."""

from __future__ import annotations

import asyncio

import pytest

from odradek.broker.replication.isr import IsrManager, now_ms
from odradek.broker.replication.partition import Partition
from odradek.broker.storage import LogManager
from odradek.cluster import control_plane as cp
from odradek.cluster.model import PartitionState
from odradek.errors import ErrorCode, KafkaError
from tests.replication.harness import batch, eventually

LAG_MS = 100


class Controller:
    """Answers each partition of each request; the first request waits for ``release``."""

    def __init__(self, fence: set[str] = frozenset()) -> None:
        self.requests: list[list[str]] = []
        self.release = asyncio.Event()
        self.fence = fence

    async def call(self, request: cp.Request, *, timeout: float):
        assert request.route is cp.ALTER_PARTITIONS
        self.requests.append([e["topic"] for e in request.body["partitions"]])
        if len(self.requests) == 1:
            await self.release.wait()
        return request.decode({"results": [self._answer(e) for e in request.body["partitions"]]})

    def _answer(self, e: dict) -> dict:
        if e["topic"] in self.fence:
            return {"topic": e["topic"], "partition": 0, "error_code": int(ErrorCode.fenced_leader_epoch)}
        state = PartitionState(0, (1, 2, 3), 1, e["leader_epoch"], tuple(e["isr"]), 1, e["partition_epoch"] + 1)
        return {"topic": e["topic"], "partition": 0, "error_code": 0, "state": state.to_json()}


def leaders(logs: LogManager, names: list[str]) -> list[Partition]:
    """Partitions led by broker 1 with followers 2 and 3 in the ISR that never fetch."""
    out = [Partition(1, name, 0, logs.get_or_create(name, 0)) for name in names]
    now = now_ms()  # one time for all: their followers fall behind at the same shrink check
    for p in out:
        p.become_leader(PartitionState(0, (1, 2, 3), 1, 0, (1, 2, 3), 1, 0), now)
    return out


@pytest.mark.parametrize("per_request", [cp.MAX_ALTER_PARTITIONS, 4])
def test_shrinks_go_many_partitions_a_request_and_queue_behind_the_one_in_flight(tmp_path, monkeypatch, per_request):
    monkeypatch.setattr(cp, "MAX_ALTER_PARTITIONS", per_request)

    async def scenario():
        logs = LogManager(tmp_path)
        controller = Controller(fence={"a9"})
        isr = IsrManager(1, controller.call, lambda: 7, LAG_MS, lambda p: None)
        led = leaders(logs, [f"a{i}" for i in range(10)])
        stop = asyncio.Event()
        checks = asyncio.create_task(isr.run(lambda: led, stop))
        try:
            await eventually(lambda: controller.requests, 5, "the first request")
            led += leaders(logs, [f"b{i}" for i in range(6)])  # lagging while the first request is in flight
            await eventually(lambda: all(p.pending_isr for p in led), 5, "the new partitions' changes queued")
            assert len(controller.requests) == 1
            controller.release.set()
            await eventually(lambda: not any(p.pending_isr for p in led), 5, "every change answered")
        finally:
            stop.set()
            await checks
            await isr.close()
            logs.close()
        sent = [t for request in controller.requests for t in request]
        assert sorted(sent) == sorted(p.topic for p in led), "each change sent once"
        assert all(len(r) <= per_request for r in controller.requests)
        if per_request >= 10:
            assert controller.requests == [[f"a{i}" for i in range(10)], [f"b{i}" for i in range(6)]]
        assert [p.isr for p in led if p.topic != "a9"] == [(1,)] * 15 and isr.shrinks == 15
        fenced = next(p for p in led if p.topic == "a9")
        assert fenced.isr == (1, 2, 3) and fenced.alter_fenced, "a fenced partition waits for the next snapshot"
    asyncio.run(asyncio.wait_for(scenario(), 30))



ELECTED = PartitionState(0, (4, 2, 3), 4, 1, (4, 2, 3), 1, 2)   # the reassignment done, broker 4 leading
MADE_AND_MOVED_ON = {"topic": "t", "partition": 0, "error_code": 0, "state": ELECTED.to_json()}
NOT_LEADER = {"topic": "t", "partition": 0, "error_code": int(ErrorCode.not_leader_or_follower)}
LOST = KafkaError(ErrorCode.request_timed_out, "no answer")   # the change made, the answer lost


@pytest.mark.parametrize("answers", [[MADE_AND_MOVED_ON], [LOST, NOT_LEADER]], ids=["answered", "unanswered"])
def test_an_expansion_that_completes_a_reassignment_keeps_counting_the_new_leader(tmp_path, answers):
    """The controller can complete a reassignment with the very ISR change that adds its last
    target replica, electing that replica. Until the snapshot makes the old leader a follower,
    the old leader's HW keeps counting the added replica, whether the answer says so or never
    came (CI's rebalance run: records the old leader acknowledged were missing on the new
    leader, which answered the idempotent producer's retry OUT_OF_ORDER_SEQUENCE_NUMBER)."""
    calls = []

    async def call(request: cp.Request, *, timeout: float):
        answer = answers[len(calls)]
        calls.append(request)
        if isinstance(answer, KafkaError):
            raise answer
        return request.decode({"results": [answer]})

    async def scenario():
        logs = LogManager(tmp_path)
        answered = asyncio.Event()
        isr = IsrManager(1, call, lambda: 7, LAG_MS, lambda p: answered.set())
        leader = Partition(1, "t", 0, logs.get_or_create("t", 0))
        leader.become_leader(PartitionState(0, (4, 2, 3, 1), 1, 0, (1, 2, 3), 1, 1), now_ms())
        try:
            leader.log.append(batch(b"a"), leader_epoch=0)
            for follower in (2, 3, 4):
                leader.record_follower_fetch(follower, 1, now_ms())
            assert leader.advance_high_watermark() and leader.log.high_watermark == 1
            isr.expand(leader, 4)
            await asyncio.wait_for(answered.wait(), 5)
            assert len(calls) == len(answers)
            leader.log.append(batch(b"b"), leader_epoch=0)   # before the snapshot reaches broker 1
            acked = leader.produces.park(2)
            for follower in (2, 3):
                leader.record_follower_fetch(follower, 2, now_ms())
            leader.advance_high_watermark()
            leader.complete_produces()
            assert leader.log.high_watermark == 1 and not acked.done(), "broker 4, the new leader, lacks offset 1"
            leader.become_follower(ELECTED)
            assert acked.result() == ErrorCode.not_leader_or_follower
        finally:
            await isr.close()
            logs.close()
    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_a_follower_caught_up_through_its_session_stays_in_the_isr_when_an_append_moves_the_log_end(tmp_path):
    """Followers at the log end fetch in their sessions without naming the partition; an append
    then puts them behind until their next fetches. An ISR check in between must count them as
    caught up at their sessions' last fetch (as Kafka, which records each session partition at
    every fetch), not at the last fetch that named the partition, seconds ago."""
    from odradek.broker.replication.fetch_session import FetchSession
    logs = LogManager(tmp_path)
    leader = Partition(1, "t", 0, logs.get_or_create("t", 0))
    now = now_ms()
    leader.become_leader(PartitionState(0, (1, 2, 3), 1, 0, (1, 2, 3), 1, 0), now - 10 * LAG_MS)
    for follower in (2, 3):   # named the partition long ago, at the log end; fetching since in the session
        session = FetchSession(follower, True, {"t": {0: None}}, False, now - 10 * LAG_MS, now - 10)
        leader.record_follower_fetch(follower, 0, now - 10 * LAG_MS, session=session)
    assert leader.lagging(now, LAG_MS) == ()
    leader.log_end_moving(now)
    leader.log.append(batch(b"a"), leader_epoch=0)
    assert leader.lagging(now, LAG_MS) == ()
    assert leader.lagging(now + 2 * LAG_MS, LAG_MS) == (2, 3)   # and still out once they stop fetching
