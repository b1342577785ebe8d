"""Transactional offsets in the group coordinator: pending until the transaction's marker,
applied on commit, dropped on abort, both live (``complete_txn``) and when a
``__consumer_offsets`` partition is replayed (commit and abort markers in the log)."""

import asyncio

from odradek.broker.group.config import GroupConfig
from odradek.broker.group.coordinator import GroupCoordinator
from odradek.broker.group.loader import PartitionContents
from odradek.broker.group.records import OffsetValue, offset_key, offset_value
from odradek.broker.internal_topic import LedPartition
from odradek.errors import ErrorCode as E
from odradek.records import Record, build_batch, iter_batches

TP = ("in", 0)


def control(pid: int, commit: bool) -> bytearray:
    return build_batch([Record(b"\x00\x00\x00\x00\x00\x00", b"\x00\x00\x00" + (b"\x01" if commit else b"\x00"))],
                       producer_id=pid, producer_epoch=0, transactional=True, control=True)


def offsets_batch(pid: int | None, group: str, offset: int) -> bytearray:
    records = [Record(offset_value(OffsetValue(offset, -1, "", 5)), offset_key(group, *TP))]
    if pid is None:
        return build_batch(records)
    return build_batch(records, producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True)


def replayed(*batches) -> PartitionContents:
    contents = PartitionContents()
    for raw in batches:
        for b in iter_batches(memoryview(raw)):
            contents.replay_batch(b)
    return contents


def test_replay_applies_committed_and_drops_aborted_transactional_offsets():
    c = replayed(offsets_batch(None, "g", 1), offsets_batch(7, "g", 10), offsets_batch(8, "h", 20),
                 control(7, True), control(8, False), offsets_batch(9, "g", 30))
    assert c.offsets["g"][TP].offset == 10
    assert TP not in c.offsets.get("h", {})
    groups = {g.group_id: g for g in c.build(0)}
    assert groups["g"].pending_txn[9][TP].offset == 30   # still open at the log end


def test_txn_commit_waits_for_the_marker():
    async def scenario():
        written = []

        async def append(partition, batch):
            written.append(batch)
        coord = GroupCoordinator(1, GroupConfig(offsets_partitions=1), append)
        coord.owned[0] = LedPartition(0, loaded=True)
        value = OffsetValue(10, -1, "", 5)
        assert await coord.txn_commit("g", 7, 0, -1, "", None, {TP: value}) == {TP: E.none}
        batch = next(iter_batches(memoryview(written[0])))
        assert (batch.is_transactional, batch.producer_id) == (True, 7)
        assert coord.fetch("g", [TP]) == {TP: None} and coord.has_pending("g", TP)
        coord.complete_txn(7, {0}, commit=True)
        assert coord.fetch("g", [TP]) == {TP: value} and not coord.has_pending("g", TP)
        await coord.txn_commit("g", 8, 0, -1, "", None, {TP: OffsetValue(99, -1, "", 6)})
        coord.complete_txn(8, {0}, commit=False)
        assert coord.fetch("g", [TP]) == {TP: value}
        assert await coord.txn_commit("g", 8, 0, 3, "nobody", None, {TP: value}) == {TP: E.unknown_member_id}
    asyncio.run(scenario())
