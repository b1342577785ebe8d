"""Loading a ``__consumer_offsets`` partition: from its log to groups and committed offsets.

The coordinator of a partition replays it from the log start to the log end when it becomes
the partition's leader (Kafka's GroupMetadataManager.loadGroupsAndOffsets): the last record
per key wins, a tombstone deletes its key. Groups with members are restored Stable with
their generation and assignments (their members then get fresh session timers); groups with
only offsets are Empty. Offsets committed in a transaction (TxnOffsetCommit: a transactional
batch of the producer) stay pending until that producer's control batch: a commit marker
applies them, an abort marker drops them; those still pending at the log end are the groups'
pending transactional offsets. Reading is ``internal_topic.replay``'s (chunked, yielding).
A KIP-848 group's records (kinds 3-8) are kept raw, last value per key, and ``consumer_groups``
restores those groups (``consumer_state.restore``).
A record that cannot be parsed (garbage a client once could produce to the topic) is counted in
``skipped`` and passed over: the other groups of the partition load as they should.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.broker.group.consumer import ConsumerGroup
from odradek.broker.group.consumer_records import ConsumerKey
from odradek.broker.group.consumer_state import restore
from odradek.broker.group.model import Group, GroupState, Member
from odradek.broker.group.records import (GroupKey, GroupValue, OffsetKey, OffsetValue, decode_group_value,
                                          decode_key, decode_offset_value)
from odradek.broker.internal_topic import SkippedRecords, replay
from odradek.errors import KafkaError
from odradek.records import Record, RecordBatch

_COMMIT = 1  # a control record's type (key: int16 version, int16 type; 0 = abort)


@dataclass
class PartitionContents:
    """Replayed state of one partition, keyed by group id."""

    groups: dict[str, GroupValue | None] = field(default_factory=dict)
    offsets: dict[str, dict[tuple[str, int], OffsetValue]] = field(default_factory=dict)
    # producer id -> group -> (topic, partition) -> offset, awaiting that producer's marker
    pending: dict[int, dict[str, dict[tuple[str, int], OffsetValue]]] = field(default_factory=dict)
    consumer: dict[str, dict[ConsumerKey, bytes]] = field(default_factory=dict)  # KIP-848 groups' records
    records: int = 0
    skipped: SkippedRecords = field(default_factory=SkippedRecords)

    def replay_batch(self, batch: RecordBatch) -> None:
        if batch.is_control:
            records = self.skipped.records(batch)
            if records and records[0].key is not None and len(records[0].key) >= 4:
                self.complete(batch.producer_id, int.from_bytes(records[0].key[2:4], "big") == _COMMIT)
            return
        txn = batch.producer_id if batch.is_transactional else None
        self.skipped.each(batch, lambda record: self.replay(record, txn))

    def complete(self, producer_id: int, commit: bool) -> None:
        for group, offsets in self.pending.pop(producer_id, {}).items():
            if commit:
                self.offsets.setdefault(group, {}).update(offsets)

    def replay(self, record: Record, producer_id: int | None = None) -> None:
        if record.key is None:
            return
        key = decode_key(record.key)
        self.records += 1
        if isinstance(key, OffsetKey) and producer_id is not None and record.value is not None:
            self.pending.setdefault(producer_id, {}).setdefault(key.group, {})[(key.topic, key.partition)] = \
                decode_offset_value(record.value)
        elif isinstance(key, OffsetKey):
            per_group = self.offsets.setdefault(key.group, {})
            if record.value is None:
                per_group.pop((key.topic, key.partition), None)
            else:
                per_group[(key.topic, key.partition)] = decode_offset_value(record.value)
        elif isinstance(key, GroupKey):
            self.groups[key.group] = None if record.value is None else decode_group_value(record.value)
        elif isinstance(key, ConsumerKey):
            self._replay_consumer(key, record.value)

    def _replay_consumer(self, key: ConsumerKey, value: bytes | None) -> None:
        records = self.consumer.setdefault(key.group, {})
        if value is not None:
            records[key] = bytes(value)
            return
        records.pop(key, None)
        if not records:
            del self.consumer[key.group]

    def consumer_groups(self) -> list[ConsumerGroup]:
        """The KIP-848 groups the partition holds (a group whose records were all deleted is gone)."""
        out = []
        for group_id, records in self.consumer.items():
            try:
                out.append(restore(group_id, records))
            except KafkaError as e:  # a value that does not parse: that group is not restored
                self.skipped.skip(-1, e, len(records))
        return out

    def build(self, now_ms: int) -> list[Group]:
        out = []
        waiting = {g for per_producer in self.pending.values() for g in per_producer}
        for group_id in set(self.offsets) | waiting | {g for g, v in self.groups.items() if v is not None}:
            value = self.groups.get(group_id)
            offsets = self.offsets.get(group_id, {})
            if value is None and not offsets and group_id not in waiting:
                continue
            group = _group(group_id, value, offsets, now_ms)
            for producer_id, per_group in self.pending.items():
                if group_id in per_group:
                    group.pending_txn[producer_id] = dict(per_group[group_id])
            out.append(group)
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
    return contents if await replay(log, contents.replay_batch, should_continue) else None
