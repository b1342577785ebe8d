"""A KIP-848 group to and from its ``__consumer_offsets`` records (``consumer_records``).

``changes`` is what persisting a group after a change writes: its records now (Kafka's
ConsumerGroup* records: the group epoch, the subscription metadata, each member's metadata,
target and current assignment, the target assignment epoch) compared with those already
written (``ConsumerGroup.written``, key -> value): the new or changed ones, and tombstones
for the keys gone (a member that left or was fenced; every key when the group is deleted).
Kafka writes the records of a change before it answers the heartbeat; so do we (the
coordinator awaits the append), and a member is never told of an assignment its next
coordinator would not know. A write that failed leaves its keys ``UNKNOWN``, rewritten by the
next change.

``restore`` is the reverse, for a partition's loader: the last value per key, replayed.
"""

from __future__ import annotations

from odradek.broker.group.consumer import ConsumerGroup, ConsumerMember, MemberState, preferred_assignor
from odradek.broker.group.consumer_records import (CURRENT_ASSIGNMENT, GROUP_METADATA, MEMBER_METADATA,
                                                   PARTITION_METADATA, TARGET_MEMBER, TARGET_METADATA,
                                                   ConsumerKey, CurrentAssignment, MemberMetadata,
                                                   current_assignment_value, decode_current_assignment,
                                                   decode_epoch, decode_member_metadata, decode_partition_metadata,
                                                   decode_target_member, epoch_value, key, member_metadata_value,
                                                   partition_metadata_value, target_member_value)

UNKNOWN = object()  # a key whose last write failed: its value in the log is not known


def image(group: ConsumerGroup) -> dict[bytes, bytes]:
    """Every record of ``group`` as it is now, key -> value."""
    gid = group.group_id
    out = {key(ConsumerKey(GROUP_METADATA, gid)): epoch_value(group.epoch),
           key(ConsumerKey(PARTITION_METADATA, gid)): partition_metadata_value(group.topics),
           key(ConsumerKey(TARGET_METADATA, gid)): epoch_value(group.target_epoch)}
    for mid, m in group.members.items():
        out.update(_member_records(gid, m, group.target.get(mid)))
    for mid, partitions in group.target.items():
        if mid not in group.members:
            out[key(ConsumerKey(TARGET_MEMBER, gid, mid))] = target_member_value(partitions)
    return out


def _member_records(gid: str, m: ConsumerMember, target) -> dict[bytes, bytes]:
    """A member's three records, encoded again only when one of their fields changed (every
    heartbeat of a group diffs all its members' records: re-encoding them all each time makes
    a large group's heartbeats quadratic in its size)."""
    signature = (m.instance_id, m.rack_id, m.client_id, m.client_host, m.subscribed, m.regex, m.rebalance_timeout_ms,
                 m.assignor, m.classic, m.epoch, m.previous_epoch, m.state, m.assigned, m.revoking, target)
    if m.encoded is not None and m.encoded[0] == signature:
        return m.encoded[1]
    records = {key(ConsumerKey(MEMBER_METADATA, gid, m.member_id)): member_metadata_value(MemberMetadata(
        m.instance_id, m.rack_id, m.client_id, m.client_host, tuple(m.subscribed), m.regex or None,
        m.rebalance_timeout_ms, m.assignor, m.classic)),
        key(ConsumerKey(CURRENT_ASSIGNMENT, gid, m.member_id)): current_assignment_value(CurrentAssignment(
            m.epoch, m.previous_epoch, m.state.value, m.assigned, m.revoking))}
    if target is not None:
        records[key(ConsumerKey(TARGET_MEMBER, gid, m.member_id))] = target_member_value(target)
    m.encoded = (signature, records)
    return records


def changes(group: ConsumerGroup, deleted: bool = False) -> list[tuple[bytes, bytes | None]]:
    """The records to write for ``group`` (all tombstones if ``deleted``); marks them written."""
    now = {} if deleted else image(group)
    out: list[tuple[bytes, bytes | None]] = [(k, None) for k in group.written if k not in now]
    out += [(k, v) for k, v in now.items() if group.written.get(k) != v]
    group.written = now
    return out


def failed(group: ConsumerGroup, written: list[tuple[bytes, bytes | None]]) -> None:
    """The write of ``written`` failed: the next change writes those keys again."""
    for k, _ in written:
        group.written[k] = UNKNOWN


def restore(group_id: str, records: dict[ConsumerKey, bytes]) -> ConsumerGroup:
    """The group the replayed ``records`` (last value per key, tombstones applied) describe."""
    group = ConsumerGroup(group_id)
    members: dict[str, ConsumerMember] = {}

    def member(mid: str) -> ConsumerMember:
        return members.setdefault(mid, ConsumerMember(mid))
    for k, value in records.items():
        if k.kind == GROUP_METADATA:
            group.epoch = decode_epoch(value)
        elif k.kind == TARGET_METADATA:
            group.target_epoch = decode_epoch(value)
        elif k.kind == PARTITION_METADATA:
            group.topics = decode_partition_metadata(value)
        elif k.kind == TARGET_MEMBER:
            group.target[k.member] = decode_target_member(value)
        elif k.kind == MEMBER_METADATA:
            _metadata(member(k.member), decode_member_metadata(value))
        elif k.kind == CURRENT_ASSIGNMENT:
            _assignment(member(k.member), decode_current_assignment(value))
    group.members = members
    for mid, m in members.items():
        if m.instance_id:
            group.static[m.instance_id] = mid
        for tp in m.assigned | m.revoking:
            group.owners[tp] = mid
    group.assignor = preferred_assignor(members.values())
    group.written = {key(k): v for k, v in records.items()}
    return group


def _metadata(m: ConsumerMember, v: MemberMetadata) -> None:
    m.instance_id, m.rack_id, m.client_id, m.client_host = v.instance_id, v.rack_id, v.client_id, v.client_host
    m.subscribed, m.rebalance_timeout_ms, m.assignor = frozenset(v.subscribed), v.rebalance_timeout_ms, v.assignor
    m.regex = v.regex or ""  # its topics are resolved again at the group's next heartbeat
    m.classic = v.classic


def _assignment(m: ConsumerMember, v: CurrentAssignment) -> None:
    m.epoch, m.previous_epoch, m.state = v.epoch, v.previous_epoch, MemberState(v.state)
    m.assigned, m.revoking = v.assigned, v.revoking
