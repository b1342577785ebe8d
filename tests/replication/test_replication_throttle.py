"""Replication throttles (``quotas.replication``), in one process with a fake clock: the quota's
rate and bound, which replicas the topic configs throttle on this broker, the leader's read
path holding an out-of-ISR follower's throttled partitions at the rate (in-sync followers and
other partitions untouched), and the follower leaving its throttled, not caught-up partitions
out of its fetch while over its quota."""

from __future__ import annotations

import asyncio
import statistics
from types import SimpleNamespace

import pytest

from odradek.broker.partitions import ReplicaManager
from odradek.broker.quotas.replication import ReplicationQuotas, throttled_partitions
from odradek.broker.replication.fetcher import FetchState, ReplicaFetcher, ReplicaFetcherManager
from odradek.broker.replication.read import FetchParams, read_logs
from odradek.broker.storage import LogManager
from odradek.cluster.model import BrokerInfo, ClusterMetadata, PartitionState, TopicMetadata
from odradek.config.keys import LONG_MAX
from odradek.records import Record, build_batch
from tests.replication.harness import TOPIC, TOPIC_ID, FakeController, eventually

RATE = 100_000          # bytes/s
BATCH = 10_000          # bytes of value per batch
FETCH_EVERY_S = 0.1


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_throttled_replica_lists_name_this_brokers_partitions():
    assert throttled_partitions("*", 1) is None
    assert throttled_partitions("0:1,1:2, 3:1", 1) == frozenset({0, 3})
    assert throttled_partitions("0:2", 1) == frozenset()
    quotas = ReplicationQuotas(1)
    quotas.update_topics([("a", {"leader.replication.throttled.replicas": "0:1,1:2",
                                 "follower.replication.throttled.replicas": "*"}),
                          ("b", {"leader.replication.throttled.replicas": ""}), ("c", {})])
    assert quotas.leader.is_throttled("a", 0) and not quotas.leader.is_throttled("a", 1)
    assert not quotas.leader.is_throttled("b", 0) and not quotas.leader.is_throttled("c", 0)
    assert quotas.follower.is_throttled("a", 7) and not quotas.follower.is_throttled("b", 0)


def test_the_quota_is_kafkas_simple_rate_against_an_upper_bound():
    clock = Clock()
    quotas = ReplicationQuotas(1, samples=11, window_s=1, clock=clock)
    quota = quotas.leader
    quota.record(10 * RATE)
    assert not quota.exceeded(), "unlimited (Long.MAX_VALUE) until a rate is set"
    quotas.update_rates({"leader.replication.throttled.rate": str(RATE),
                         "follower.replication.throttled.rate": str(LONG_MAX)}.__getitem__)
    assert quota.rate() == 10 * RATE, "within the first window the rate is over one window (SimpleRate)"
    assert quota.exceeded() and quota.delay_s() == pytest.approx(10.0), "until 10 x the bound is over 10 s"
    clock.now += 4.0
    assert quota.rate() == pytest.approx(2.5 * RATE) and quota.exceeded()
    clock.now += 6.0
    assert quota.rate() == pytest.approx(RATE) and not quota.exceeded() and quota.delay_s() == 0.0
    assert not quotas.follower.exceeded()


def test_time_before_the_first_byte_is_no_allowance():
    """A quota idle since the broker started does not let a first move burst past the rate."""
    clock = Clock()
    quotas = ReplicationQuotas(1, clock=clock)
    quotas.update_rates({"leader.replication.throttled.rate": str(RATE),
                         "follower.replication.throttled.rate": str(RATE)}.__getitem__)
    clock.now += 8.0
    quotas.leader.record(2 * RATE)
    assert quotas.leader.exceeded() and quotas.leader.rate() == 2 * RATE


def _records(n: int) -> memoryview:
    return memoryview(build_batch([Record(b"x" * BATCH, key=b"k")] * n))


def _leader(tmp_path, clock: Clock, isr: tuple[int, ...]) -> ReplicaManager:
    """Broker 1 leading partitions 0 and 1 (replicas 1, 2), partition 0 leader-throttled."""
    logs = LogManager(tmp_path)
    logs.open_all()
    rm = ReplicaManager(1, logs, quotas=ReplicationQuotas(1, clock=clock))
    rm.quotas.update_rates({"leader.replication.throttled.rate": str(RATE),
                            "follower.replication.throttled.rate": str(RATE)}.__getitem__)
    states = tuple(PartitionState(p, (1, 2), 1, 1, isr, 1, 0) for p in (0, 1))
    topic = TopicMetadata(TOPIC, TOPIC_ID, states, {"leader.replication.throttled.replicas": "0:1,1:2"})
    brokers = tuple(BrokerInfo(b, "127.0.0.1", 9092, "http://unused") for b in (1, 2))
    rm.apply(ClusterMetadata("c", "fake", 1, brokers, (topic,)))
    for p in (0, 1):
        for _ in range(30):
            rm.append(TOPIC, p, _records(5))   # 1.5 MB per partition
    return rm


def _follow(rm: ReplicaManager, clock: Clock, seconds: float) -> dict[int, int]:
    """Follower 2 fetching both partitions every 100 ms (64 KB per partition): bytes per partition."""
    offsets, got = {0: 0, 1: 0}, {0: 0, 1: 0}
    params = FetchParams(2, 0, 1, 10 << 20)
    for _ in range(round(seconds / FETCH_EVERY_S)):
        positions = [SimpleNamespace(partition=p, fetch_offset=o, partition_max_bytes=64 << 10)
                     for p, o in offsets.items()]
        result, _ = read_logs(rm, params, [(TOPIC, positions)])
        for part in result.topics[0][1]:
            if part.records is not None:
                got[part.partition] += part.records.size
                offsets[part.partition] = part.records.next_offset
        clock.now += FETCH_EVERY_S
    return got


def test_the_leader_holds_an_out_of_isr_followers_throttled_partition_at_the_rate(tmp_path):
    async def scenario():
        clock = Clock()
        rm = _leader(tmp_path, clock, isr=(1,))
        try:
            got = _follow(rm, clock, 10.0)
            assert got[0] / 10.0 == pytest.approx(RATE, rel=0.2), got
            assert got[1] == rm.logs.get(TOPIC, 1).size, "partition 1 is not throttled on this leader: all of it"
            assert rm.quotas.leader.bytes_total == got[0] + got[1]
        finally:
            await rm.close()
    asyncio.run(scenario())


def test_a_fetch_of_replica_fetch_max_bytes_never_takes_the_rate_above_the_throttle(tmp_path):
    """Kafka's follower asks 1 MiB of each partition: the leader's read gives a throttled one its
    quota's fetch budget only (here at least one 50 KB batch, half the rate: the first seconds
    read up to that much above), so the rate holds at the throttle instead of reading 10 x it."""
    async def scenario():
        clock = Clock()
        rm = _leader(tmp_path, clock, isr=(1,))
        params = FetchParams(2, 0, 1, 10 << 20)
        offset, rates = 0, []
        try:
            for _ in range(100):
                result, _ = read_logs(rm, params, [(TOPIC, [SimpleNamespace(partition=0, fetch_offset=offset,
                                                                            partition_max_bytes=1 << 20)])])
                part = result.topics[0][1][0]
                offset = part.records.next_offset if part.records is not None else offset
                rates.append(rm.quotas.leader.rate())
                clock.now += FETCH_EVERY_S
            assert max(rates) <= 1.5 * RATE and max(rates[30:]) <= 1.2 * RATE, rates
            assert statistics.median(rates[50:]) == pytest.approx(RATE, rel=0.1), rates
        finally:
            await rm.close()
    asyncio.run(scenario())


def test_the_follower_asks_a_throttled_partition_for_its_share_of_the_budget():
    async def scenario():
        quotas = ReplicationQuotas(2, clock=Clock())
        quotas.update_rates({"leader.replication.throttled.rate": str(LONG_MAX),
                             "follower.replication.throttled.rate": str(10 * RATE)}.__getitem__)
        quotas.update_topics([(TOPIC, {"follower.replication.throttled.replicas": "0:2,1:2"})])
        manager = ReplicaFetcherManager(2, lambda _t, _p: None, lambda _b: None, quota=quotas.follower)
        fetcher = ReplicaFetcher(manager, 1)
        try:
            states = [FetchState(TOPIC, p, 1, 1) for p in range(2)] + [FetchState(TOPIC, 2, 1, 1, lag=0)]
            fetcher._asked = {(s.topic, s.partition): (s, 0) for s in states}
            share, catching_up = fetcher._throttled_max_bytes({(TOPIC, p): (0, 0, 1) for p in range(3)})
            assert catching_up == {(TOPIC, 0), (TOPIC, 1)} and share == 10 * RATE // 2
            quotas.follower.record(10 * RATE)   # a window's worth moved: a tenth of one now
            assert fetcher._throttled_max_bytes({(TOPIC, 0): (0, 0, 1)})[0] == RATE
        finally:
            await fetcher.close()
    asyncio.run(scenario())


def test_the_leader_never_slows_an_in_sync_follower(tmp_path):
    async def scenario():
        clock = Clock()
        rm = _leader(tmp_path, clock, isr=(1, 2))
        try:
            got = _follow(rm, clock, 10.0)
            assert got == {p: rm.logs.get(TOPIC, p).size for p in (0, 1)}
            assert rm.quotas.leader.rate() > RATE, "in-sync bytes of throttled partitions still count (Kafka)"
        finally:
            await rm.close()
    asyncio.run(scenario())


def test_the_follower_leaves_out_throttled_partitions_not_caught_up_while_over_its_quota():
    async def scenario():
        clock = Clock()
        quotas = ReplicationQuotas(2, clock=clock)
        quotas.update_rates({"leader.replication.throttled.rate": str(LONG_MAX),
                             "follower.replication.throttled.rate": str(RATE)}.__getitem__)
        quotas.update_topics([(TOPIC, {"follower.replication.throttled.replicas": "0:2,2:2"})])
        manager = ReplicaFetcherManager(2, lambda _t, _p: None, lambda _b: None, quota=quotas.follower)
        fetcher = ReplicaFetcher(manager, 1)   # no partition of its own: its task waits
        try:
            states = [FetchState(TOPIC, 0, 1, 1), FetchState(TOPIC, 1, 1, 1), FetchState(TOPIC, 2, 1, 1, lag=0)]
            fetcher._asked = {(s.topic, s.partition): (s, 0) for s in states}
            fetcher._wanted = {(s.topic, s.partition): (0, 0, 1) for s in states}
            assert fetcher._unthrottled({(TOPIC, 1)}) == (fetcher._wanted, {(TOPIC, 1)})
            fetcher._record(states[0], 3 * RATE)
            fetcher._record(states[1], 5 * RATE)   # not throttled: counted as replication bytes only
            wanted, touched = fetcher._unthrottled({(TOPIC, 1)})
            assert set(wanted) == {(TOPIC, 1), (TOPIC, 2)} and touched is None, \
                "partition 0 out (throttled, lag unknown); 2 in (caught up); the session compares all"
            assert fetcher._unthrottled({(TOPIC, 1)}) == (wanted, {(TOPIC, 1)}), "held back as before"
            assert quotas.follower.bytes_total == 8 * RATE
            clock.now += quotas.follower.delay_s()
            assert fetcher._unthrottled({(TOPIC, 1)}) == (fetcher._wanted, None), "back in, listed again"
        finally:
            await fetcher.close()
    asyncio.run(scenario())


@pytest.mark.parametrize("side", ["leader", "follower"])
def test_a_new_replica_throttled_over_the_wire_catches_up_no_faster_than_the_rate_then_joins_the_isr(tmp_path, side):
    """Over real listeners (the harness): broker 2 starts following a 4 MB partition throttled
    at 1 MB/s on one side: it takes at least the 2 s the quota allows beyond its first two
    fetches (1 MB each: the rate is over one window at first), unthrottled a fraction of that;
    every byte counts against the quota; once caught up it joins the ISR."""
    async def scenario():
        throttled = 1 if side == "leader" else 2
        c = FakeController(replicas=(1, 2), configs={f"{side}.replication.throttled.replicas": f"0:{throttled}"})
        await c.start(tmp_path)
        try:
            quotas = c.nodes[throttled].replicas.quotas
            quotas.update_rates({"leader.replication.throttled.rate": str(1 << 20),
                                 "follower.replication.throttled.rate": str(1 << 20)}.__getitem__)
            c.reachable = {1}
            c.set_state(leader=1, leader_epoch=1, isr=(1,))
            for _ in range(40):
                c.nodes[1].replicas.append(TOPIC, 0, memoryview(build_batch([Record(b"x" * (100 << 10))])))
            size = c.nodes[1].log.size
            c.reachable = {1, 2}
            started = loop_time()
            c.push()
            await eventually(lambda: c.nodes[2].log.log_end_offset == 40, 30, "broker 2 caught up", interval=0.01)
            took = loop_time() - started
            assert took >= 2.0, f"caught up in {took:.2f} s"
            quota = quotas.leader if side == "leader" else quotas.follower
            assert quota.bytes_total == size and quota.rate() > 0
            await eventually(lambda: c.state.isr == (1, 2), 10, "broker 2 in the ISR")
        finally:
            await c.stop()
    asyncio.run(asyncio.wait_for(scenario(), 60))


def loop_time() -> float:
    return asyncio.get_running_loop().time()
