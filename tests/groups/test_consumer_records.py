"""A KIP-848 group's records in ``__consumer_offsets`` (``consumer_records``, ``consumer_state``):
Kafka 4.x's byte layout, what a change writes (new values, tombstones for a member gone or a
group deleted), and a coordinator that loads the partition after another wrote it: same group
epoch, members, member epochs and assignments; its members heartbeat on with their epochs."""

from __future__ import annotations

import asyncio
import uuid

from odradek.broker.group import consumer_records as cr
from odradek.broker.group import records as rec
from odradek.broker.group.consumer import Heartbeat, MemberState
from odradek.broker.group.consumer_state import changes
from odradek.broker.group.records import OffsetValue
from odradek.errors import ErrorCode as E
from tests.groups.test_offsets import Replicas, _coordinator

TID = str(uuid.UUID(int=7))
TOPICS = {"t": (TID, 4)}


def lookup(names):
    return {n: TOPICS[n] for n in names if n in TOPICS}


def test_keys_and_values_in_kafkas_layout():
    key = cr.key(cr.ConsumerKey(cr.CURRENT_ASSIGNMENT, "g", "m"))
    assert key == b"\x00\x08\x00\x01g\x00\x01m"
    assert rec.decode_key(key) == cr.ConsumerKey(cr.CURRENT_ASSIGNMENT, "g", "m")
    assert cr.key(cr.ConsumerKey(cr.GROUP_METADATA, "g")) == b"\x00\x03\x00\x01g"
    assert cr.epoch_value(5) == b"\x00\x00" + b"\x00\x00\x00\x05" + b"\x00"
    # Kafka 4.1 adds MetadataHash as tagged field 0: read past it
    assert cr.decode_epoch(b"\x00\x00\x00\x00\x00\x05" + b"\x01\x00\x08" + bytes(8)) == 5
    value = cr.current_assignment_value(cr.CurrentAssignment(3, 2, "unrevoked_partitions",
                                                             frozenset({(TID, 1), (TID, 0)}), frozenset({(TID, 2)})))
    part = uuid.UUID(TID).bytes
    assert value == (b"\x00\x00" + b"\x00\x00\x00\x03" + b"\x00\x00\x00\x02" + b"\x01"
                     + b"\x02" + part + b"\x03" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x01" + b"\x00"
                     + b"\x02" + part + b"\x02" + b"\x00\x00\x00\x02" + b"\x00" + b"\x00")
    assert cr.decode_current_assignment(value).revoking == frozenset({(TID, 2)})
    meta = cr.MemberMetadata(None, "r1", "c", "h", ("b", "a"), None, 30000, "uniform")
    encoded = cr.member_metadata_value(meta)
    assert encoded.startswith(b"\x00\x00" + b"\x00" + b"\x03r1" + b"\x02c" + b"\x02h" + b"\x03\x02a\x02b" + b"\x00")
    assert cr.decode_member_metadata(encoded) == cr.MemberMetadata(None, "r1", "c", "h", ("a", "b"), None, 30000,
                                                                   "uniform")
    assert cr.decode_partition_metadata(cr.partition_metadata_value(TOPICS)) == TOPICS


def _join(c, member):
    return c.consumer.heartbeat(Heartbeat("g", member, 0, rebalance_timeout_ms=30000, subscribed=("t",),
                                          owned=frozenset()), lookup)


def _beat(c, member, epoch, owned):
    return c.consumer.heartbeat(Heartbeat("g", member, epoch, owned=frozenset(owned)), lookup)


def test_a_change_writes_what_changed_and_a_leave_writes_tombstones(tmp_path):
    async def scenario():
        c = await _coordinator(Replicas(tmp_path))
        _join(c, "a")
        group = c.consumer.groups["g"]
        first = changes(group)
        assert {rec.decode_key(k).kind for k, _ in first} == set(cr.KINDS) and all(v for _, v in first)
        assert changes(group) == []  # nothing changed since
        _join(c, "b")
        kinds = {rec.decode_key(k) for k, _ in changes(group)}
        assert cr.ConsumerKey(cr.MEMBER_METADATA, "g", "b") in kinds and cr.ConsumerKey(cr.GROUP_METADATA, "g") in kinds
        assert cr.ConsumerKey(cr.TARGET_MEMBER, "g", "a") in kinds  # a's target shrank: rewritten
        assert cr.ConsumerKey(cr.CURRENT_ASSIGNMENT, "g", "a") not in kinds  # a has not heartbeated since
        c.consumer.heartbeat(Heartbeat("g", "b", -1), lookup)
        gone = [(rec.decode_key(k), v) for k, v in changes(group) if v is None]
        assert sorted(k.kind for k, _ in gone) == [cr.MEMBER_METADATA, cr.TARGET_MEMBER, cr.CURRENT_ASSIGNMENT]
        assert {k.member for k, _ in gone} == {"b"}
        c.close()
    asyncio.run(scenario())


def test_a_new_coordinator_loads_members_epochs_and_assignments(tmp_path):
    async def scenario():
        replicas = Replicas(tmp_path)
        c = await _coordinator(replicas)
        a = _join(c, "a")
        await c.store_consumer("g")
        b = _join(c, "b")
        await c.store_consumer("g")
        a2 = _beat(c, "a", a.member_epoch, a.assignment)  # revokes half of a's partitions
        await c.store_consumer("g")
        assert c.consumer.groups["g"].members["a"].state == MemberState.UNREVOKED_PARTITIONS
        before = c.consumer.groups["g"]
        snapshot = {m.member_id: (m.epoch, m.previous_epoch, m.state, m.assigned, m.revoking)
                    for m in before.members.values()}
        epochs = (before.epoch, before.target_epoch, dict(before.target), dict(before.owners), before.topics)
        c.close()  # the coordinator moves: another broker loads the partition
        c2 = await _coordinator(replicas)
        after = c2.consumer.groups["g"]
        assert {m.member_id: (m.epoch, m.previous_epoch, m.state, m.assigned, m.revoking)
                for m in after.members.values()} == snapshot
        assert (after.epoch, after.target_epoch, after.target, after.owners, after.topics) == epochs
        assert changes(after) == []  # the loaded group knows what is written
        # its members heartbeat on with their epochs: a releases, then b gets the rest
        kept = a2.assignment
        r = _beat(c2, "a", a.member_epoch, kept)
        assert r.member_epoch == after.target_epoch and set(kept) == set(after.members["a"].assigned)
        await c2.store_consumer("g")
        r = _beat(c2, "b", b.member_epoch, b.assignment or ())
        assert r.member_epoch == after.target_epoch and len(r.assignment) == 2
        assert not set(r.assignment) & set(kept)
        await c2.store_consumer("g")
        assert await c2.delete_group("g") == E.non_empty_group
        for m, epoch in (("a", after.target_epoch), ("b", after.target_epoch)):
            c2.consumer.heartbeat(Heartbeat("g", m, -1), lookup)
        await c2.store_consumer("g")
        assert await c2.delete_group("g") == E.none
        c2.close()
        c3 = await _coordinator(replicas)
        assert "g" not in c3.consumer.groups  # deleted: every key tombstoned
        c3.close()
    asyncio.run(scenario())


def test_an_empty_consumer_group_whose_offsets_expire_is_deleted_with_them(tmp_path):
    async def scenario():
        replicas = Replicas(tmp_path)
        c = await _coordinator(replicas, offsets_retention_ms=1000)
        r = _join(c, "a")
        await c.store_consumer("g")
        assert await c.commit("g", r.member_epoch, "a", None, {("t", 0): OffsetValue(5, -1, "", 0)}) == \
            {("t", 0): E.none}
        c.consumer.heartbeat(Heartbeat("g", "a", -1), lookup)
        await c.store_consumer("g")
        assert "g" in c.consumer.groups  # empty, kept: its epoch goes on
        assert await c.expire_offsets() == 1
        assert "g" not in c.consumer.groups
        c.close()
        c2 = await _coordinator(replicas)
        assert "g" not in c2.consumer.groups and c2.fetch("g", None) == {}
        c2.close()
    asyncio.run(scenario())
