"""The coordinator's offsets and persistence on a real partition log: commits and fetches,
generation checks, placement (Kafka's hash), the ``__consumer_offsets`` record format,
loading after a restart (last record per key wins, tombstones delete), unloading on
leadership loss, DeleteGroups/OffsetDelete and offset retention."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from odradek.broker.group import records as rec
from odradek.broker.group.config import OFFSETS_TOPIC, GroupConfig, java_string_hashcode, partition_for
from odradek.broker.group.coordinator import GroupCoordinator
from odradek.broker.group.model import GroupState
from odradek.broker.group.records import OffsetValue
from odradek.broker.replication.purgatory import FetchWakeup
from odradek.broker.storage import LogManager
from odradek.cluster.model import PartitionState, TopicMetadata
from odradek.errors import ErrorCode as E, KafkaError
from tests.groups.fakes import settle

PARTITIONS = 4


class Replicas:
    """Just what the coordinator reads: ``topic`` and ``leader`` of ``__consumer_offsets``
    (and the fetch wake-up ``BrokerContext.create`` hooks the fetch sessions into)."""

    def __init__(self, data_dir, leader: int = 1, epoch: int = 0) -> None:
        self.logs = LogManager(data_dir)
        self.wakeup = FetchWakeup()
        self.set_leader(leader, epoch)

    def set_leader(self, leader: int, epoch: int) -> None:
        self.leader_id, self.epoch = leader, epoch
        self.meta = TopicMetadata(OFFSETS_TOPIC, "id", tuple(
            PartitionState(p, (1,), leader, epoch, (1,)) for p in range(PARTITIONS)), {})

    def topic(self, name):
        return self.meta if name == OFFSETS_TOPIC else None

    def leader(self, topic, p):
        if self.leader_id != 1:
            raise KafkaError(E.not_leader_or_follower)
        return SimpleNamespace(state=self.meta.partitions[p], log=self.logs.get_or_create(topic, p))

    async def append(self, p, batch):
        log = self.logs.get_or_create(OFFSETS_TOPIC, p)
        log.append(memoryview(batch), leader_epoch=self.epoch)
        log.high_watermark = log.log_end_offset


async def _coordinator(replicas, **config) -> GroupCoordinator:
    c = GroupCoordinator(1, GroupConfig(offsets_partitions=PARTITIONS, **config), replicas.append)
    c.on_metadata(replicas)
    for owned in c.owned.values():
        await owned.task
    return c


def _ov(offset, metadata="", ms=1000):
    return OffsetValue(offset, 3, metadata, ms)


def test_placement_is_kafkas_java_hash():
    assert java_string_hashcode("") == 0
    assert java_string_hashcode("hello") == 99162322
    assert java_string_hashcode("polygenelubricants") == -2**31  # Utils.abs maps it to 0
    assert partition_for("polygenelubricants", 50) == 0
    assert java_string_hashcode("😀") == 31 * 0xD83D + 0xDE00  # UTF-16 code units
    assert partition_for("console-consumer-1", 50) == abs(java_string_hashcode("console-consumer-1")) % 50


def test_record_formats_round_trip_in_kafkas_layout():
    key = rec.offset_key("g", "t", 7)
    assert key == b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x07"
    assert rec.decode_key(key) == rec.OffsetKey("g", "t", 7)
    value = rec.offset_value(OffsetValue(42, 5, "meta", 1234))
    assert value[:2] == b"\x00\x03" and rec.decode_offset_value(value) == OffsetValue(42, 5, "meta", 1234)
    member = rec.MemberValue("m-1", "inst", "client", "/1.2.3.4", 300, 100, b"sub", b"asg")
    group = rec.GroupValue("consumer", 3, "range", "m-1", 99, (member,))
    assert rec.decode_key(rec.group_key("g")) == rec.GroupKey("g")
    assert rec.decode_group_value(rec.group_value(group)) == group
    assert rec.decode_key(b"\x00\x0b\x00\x01x") is None  # record kinds of other coordinators (share groups)


def test_commit_fetch_and_reload_after_restart(tmp_path):
    async def scenario():
        replicas = Replicas(tmp_path)
        c = await _coordinator(replicas)
        assert await c.commit("g", -1, "", None, {("t", 0): _ov(10), ("t", 1): _ov(20, "m")}) == \
            {("t", 0): E.none, ("t", 1): E.none}
        await c.commit("g", -1, "", None, {("t", 0): _ov(15)})
        await c.commit("other", -1, "", None, {("u", 0): _ov(1)})
        assert (await c.delete_offsets("other", [("u", 0)]))[0] == E.none
        fetched = c.fetch("g", [("t", 0), ("t", 1), ("t", 2)])
        assert fetched[("t", 0)].offset == 15 and fetched[("t", 1)].metadata == "m" and fetched[("t", 2)] is None
        c.close()
        replicas.logs.close()
        again = Replicas(tmp_path)
        again.logs.open_all()
        c2 = await _coordinator(again)
        assert {tp: v.offset for tp, v in c2.fetch("g", None).items()} == {("t", 0): 15, ("t", 1): 20}
        assert c2.fetch("other", None) == {}
        assert c2.membership.groups["g"].state == GroupState.EMPTY
    asyncio.run(scenario())


def test_group_commits_check_member_and_generation(tmp_path):
    async def scenario():
        from tests.groups.fakes import join as join_task
        replicas = Replicas(tmp_path)
        c = await _coordinator(replicas, initial_rebalance_delay_ms=0, min_session_timeout_ms=10)
        assert (await c.commit("g", 3, "m", None, {("t", 0): _ov(1)}))[("t", 0)] == E.illegal_generation
        r = await join_task(c.membership, version=3)
        assert r.error == E.none
        assert (await c.commit("g", r.generation, r.member_id, None, {("t", 0): _ov(1)}))[("t", 0)] == \
            E.rebalance_in_progress  # CompletingRebalance: no commits
        sync = await c.membership.sync("g", r.generation, r.member_id, None, None, None, {r.member_id: b"a"})
        assert sync.error == E.none
        assert (await c.commit("g", r.generation, r.member_id, None, {("t", 0): _ov(1)}))[("t", 0)] == E.none
        assert (await c.commit("g", r.generation, "x", None, {("t", 0): _ov(2)}))[("t", 0)] == E.unknown_member_id
        assert (await c.commit("g", r.generation + 1, r.member_id, None, {("t", 0): _ov(2)}))[("t", 0)] == \
            E.illegal_generation
        assert (await c.commit("g", -1, "", None, {("t", 0): _ov(2)}))[("t", 0)] == E.unknown_member_id
        assert (await c.commit("g", r.generation, r.member_id, None, {("t", 0): _ov(2, "x" * 5000)}))[("t", 0)] == \
            E.offset_metadata_too_large
        assert await c.delete_group("g") == E.non_empty_group
        error, per = await c.delete_offsets("g", [("t", 0)])
        assert error == E.non_empty_group  # the test's protocol metadata is not a consumer subscription
        # the stable group, with its member and assignment, survives a reload
        c.close()
        c2 = await _coordinator(replicas)
        g = c2.membership.groups["g"]
        assert g.state == GroupState.STABLE and g.generation == r.generation
        assert g.members[r.member_id].assignment == b"a" and g.offsets[("t", 0)].offset == 1
        c2.close()
    asyncio.run(scenario())


def test_leadership_loss_unloads_and_answers_not_coordinator(tmp_path):
    async def scenario():
        replicas = Replicas(tmp_path)
        c = await _coordinator(replicas)
        await c.commit("g", -1, "", None, {("t", 0): _ov(1)})
        replicas.set_leader(2, 1)
        c.on_metadata(replicas)
        with pytest.raises(KafkaError) as info:
            c.fetch("g", None)
        assert info.value.code == E.not_coordinator and not c.membership.groups
        replicas.set_leader(1, 2)
        c.on_metadata(replicas)
        with pytest.raises(KafkaError) as info:
            c.check("g")
        assert info.value.code == E.coordinator_load_in_progress
        await settle()
        assert c.fetch("g", None)[("t", 0)].offset == 1
    asyncio.run(scenario())


def test_delete_group_and_offset_retention_write_tombstones(tmp_path):
    async def scenario():
        now = [1_000_000]
        replicas = Replicas(tmp_path)
        c = GroupCoordinator(1, GroupConfig(offsets_partitions=PARTITIONS, offsets_retention_ms=60_000),
                             replicas.append, now_ms=lambda: now[0])
        c.on_metadata(replicas)
        await settle()
        await c.commit("old", -1, "", None, {("t", 0): _ov(5, ms=now[0])})
        await c.commit("new", -1, "", None, {("t", 0): _ov(5, ms=now[0] + 50_000)})
        await c.commit("gone", -1, "", None, {("t", 0): _ov(5, ms=now[0])})
        assert await c.delete_group("gone") == E.none
        assert await c.delete_group("gone") == E.group_id_not_found
        now[0] += 61_000
        assert await c.expire_offsets() == 1
        assert "old" not in c.membership.groups and c.fetch("new", None)[("t", 0)].offset == 5
        c.close()
        c2 = GroupCoordinator(1, GroupConfig(offsets_partitions=PARTITIONS), replicas.append)
        c2.on_metadata(replicas)
        await settle()
        assert set(c2.membership.groups) == {"new"}
        c2.close()
    asyncio.run(scenario())


def test_a_commit_cancelled_mid_write_is_kept_as_written(tmp_path):
    """A client that disconnects cancels its request while the offsets replicate: once in the
    log they are the group's (Kafka completes the append's callback), or a reload and this
    coordinator would disagree. Plain and transactional commits alike."""
    async def scenario():
        replicas = Replicas(tmp_path)
        c = await _coordinator(replicas)
        replicated = asyncio.Event()

        async def slow_append(p, batch):
            await replicated.wait()
            await replicas.append(p, batch)
        c._append_batch = slow_append
        for request in (c.commit("g", -1, "", None, {("t", 0): _ov(10)}),
                        c.txn_commit("g", 5, 0, -1, "", None, {("t", 1): _ov(20)})):
            handler = asyncio.ensure_future(request)
            await settle()
            handler.cancel()
            await settle()
            replicated.set()
            await settle()
            replicated.clear()
        assert c.fetch("g", [("t", 0)])[("t", 0)].offset == 10
        assert c.has_pending("g", ("t", 1))
        c.complete_txn(5, {partition_for("g", PARTITIONS)}, commit=True)
        assert c.fetch("g", [("t", 1)])[("t", 1)].offset == 20
    asyncio.run(scenario())


def test_a_record_that_cannot_be_parsed_is_skipped_and_the_other_groups_load(tmp_path, caplog):
    """Garbage in a ``__consumer_offsets`` partition (a client could once produce there): the
    coordinator counts it, logs it once for the load, and serves every other group of the
    partition (it used to resign them all: issue 30)."""
    from odradek.records import Record, build_batch

    async def scenario():
        replicas = Replicas(tmp_path)
        c = await _coordinator(replicas)
        groups = [g for g in (f"g{i}" for i in range(40)) if partition_for(g, PARTITIONS) == 0][:2]
        for i, group in enumerate(groups):
            await c.commit(group, -1, "", None, {("t", 0): _ov(10 + i)})
        garbage = [Record(b"garbage", b"\x00\x01\xff\xff"),                        # a key that runs past the record
                   Record(b"\x00\x07junk", rec.offset_key("g-bad", "t", 0)),       # a value of no known version
                   Record(b"\x00\x03\x00", rec.offset_key("g-short", "t", 0))]      # a value cut short
        await replicas.append(0, build_batch(garbage))
        await c.commit(groups[0], -1, "", None, {("t", 1): _ov(7)})                 # written after the garbage
        c.close()
        replicas.logs.close()
        again = Replicas(tmp_path)
        again.logs.open_all()
        with caplog.at_level("WARNING", logger="odradek.broker.internal_topic"):
            c2 = await _coordinator(again)
        assert c2.owned[0].loaded and c2.unparseable_records == 3
        assert {tp: v.offset for tp, v in c2.fetch(groups[0], None).items()} == {("t", 0): 10, ("t", 1): 7}
        assert {tp: v.offset for tp, v in c2.fetch(groups[1], None).items()} == {("t", 0): 11}
        skipped = [r for r in caplog.records if "cannot be parsed" in r.getMessage()]
        assert len(skipped) == 1 and "skipped 3 records" in skipped[0].getMessage()
    asyncio.run(scenario())
