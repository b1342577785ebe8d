"""Loading a ``__consumer_offsets`` partition: from its log to groups and committed offsets.

The coordinator of a partition replays it from the log start to the log end when it becomes
the partition's leader (Kafka's GroupMetadataManager.loadGroupsAndOffsets): the last record
per key wins, a tombstone deletes its key. Groups with members are restored Stable with
their generation and assignments (their members then get fresh session timers); groups with
only offsets are Empty. Reading is chunked (1 MiB) and yields to the event loop between
chunks so that a large partition never stalls the broker.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field

from odradek.broker.group.model import Group, GroupState, Member
from odradek.broker.group.records import (GroupKey, GroupValue, OffsetKey, OffsetValue, decode_group_value,
                                          decode_key, decode_offset_value)
from odradek.records import Record, iter_batches, iter_records

CHUNK = 1 << 20


@dataclass
class PartitionContents:
    """Replayed state of one partition, keyed by group id."""

    groups: dict[str, GroupValue | None] = field(default_factory=dict)
    offsets: dict[str, dict[tuple[str, int], OffsetValue]] = field(default_factory=dict)
    records: int = 0

    def replay(self, record: Record) -> None:
        if record.key is None:
            return
        key = decode_key(record.key)
        self.records += 1
        if isinstance(key, OffsetKey):
            per_group = self.offsets.setdefault(key.group, {})
            if record.value is None:
                per_group.pop((key.topic, key.partition), None)
            else:
                per_group[(key.topic, key.partition)] = decode_offset_value(record.value)
        elif isinstance(key, GroupKey):
            self.groups[key.group] = None if record.value is None else decode_group_value(record.value)

    def build(self, now_ms: int) -> list[Group]:
        out = []
        for group_id in set(self.offsets) | {g for g, v in self.groups.items() if v is not None}:
            value = self.groups.get(group_id)
            offsets = self.offsets.get(group_id, {})
            if value is None and not offsets:
                continue
            out.append(_group(group_id, value, offsets, now_ms))
        return out


def _group(group_id: str, value: GroupValue | None, offsets: dict, now_ms: int) -> Group:
    group = Group(group_id, offsets=dict(offsets), state_ms=now_ms)
    if value is None:
        return group
    group.protocol_type = value.protocol_type or None
    group.generation = value.generation
    group.protocol_name = value.protocol
    if value.state_ms >= 0:
        group.state_ms = value.state_ms
    for m in value.members:
        protocols = ((value.protocol or "", m.subscription),)
        group.members[m.member_id] = Member(m.member_id, m.instance_id, m.client_id, m.client_host,
                                            m.rebalance_timeout_ms, m.session_timeout_ms,
                                            value.protocol_type, protocols, assignment=m.assignment)
        if m.instance_id:
            group.static[m.instance_id] = m.member_id
    if group.members:
        group.leader_id = value.leader if value.leader in group.members else next(iter(group.members))
        group.state = GroupState.STABLE
    return group


async def read_partition(log, should_continue=lambda: True) -> PartitionContents | None:
    """Replay ``log`` (a storage ``Log``) up to its end; None if ``should_continue()`` turns false."""
    contents = PartitionContents()
    offset, end = log.log_start_offset, log.log_end_offset
    while offset < end:
        chunk = log.read(offset, CHUNK, max_offset=end)
        if chunk.size == 0:
            break
        data = memoryview(os.pread(chunk.fd, chunk.size, chunk.position))
        for batch in iter_batches(data):
            if batch.is_control:
                continue
            for record in iter_records(batch):
                if record.offset >= offset:
                    contents.replay(record)
        offset = chunk.next_offset
        await asyncio.sleep(0)
        if not should_continue():
            return None
    return contents
