"""The group coordinator of one broker: which groups it serves, their offsets, persistence.

A broker coordinates the groups of the ``__consumer_offsets`` partitions it leads. It learns
leadership from every metadata snapshot (``on_metadata``, registered with the
ReplicaManager): a partition newly led is loaded from its log (COORDINATOR_LOAD_IN_PROGRESS
meanwhile), a partition lost or whose leader epoch changed is unloaded (its waiters get
NOT_COORDINATOR). Offset commits and group metadata are appended to the group's partition
through ``append`` (the leader append; the answer waits for it) and applied in memory once
written (a KIP-848 group's records by ``store_consumer``, before its heartbeat is answered;
loaded back with the classic groups). A periodic task expires the offsets of Empty groups after
``offsets.retention.minutes`` (KIP-211: counted from when the group became Empty; per commit
for groups that never used group management) and writes their tombstones.

Transactional commits (TxnOffsetCommit) are written as a transactional batch of the producer
and kept pending in the group (``pending_txn``) until the transaction's marker reaches the
group's partition: ``complete_txn`` (called for the WriteTxnMarkers of ``__consumer_offsets``
partitions) applies them on commit and drops them on abort.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Awaitable, Callable

from odradek.broker.group import consumer_state, migration
from odradek.broker.group.config import OFFSETS_TOPIC, GroupConfig, partition_for
from odradek.broker.group.consumer import ConsumerGroup, ConsumerGroups, Lookup
from odradek.broker.group.consumer_classic import ClassicMembers
from odradek.broker.group.loader import read_partition
from odradek.broker.group.membership import Membership
from odradek.broker.group.model import Group, GroupState
from odradek.broker.group.records import (GroupValue, MemberValue, OffsetValue, group_key, group_value,
                                          offset_key, offset_value)
from odradek.broker.internal_topic import (APPEND_ERRORS, LedPartition, completes_if_cancelled, follow_leadership,
                                           led_partitions, serving, wall_ms)
from odradek.errors import ErrorCode, KafkaError
from odradek.records import Record, build_batch

log = logging.getLogger(__name__)

E = ErrorCode
S = GroupState
Append = Callable[[int, bytearray], Awaitable[None]]  # (partition, batch) -> written
Sequence = Callable[[int, int, int], int]  # (partition, producer id, epoch) -> its next sequence there
_Owned = LedPartition  # a ``__consumer_offsets`` partition this broker leads


class GroupCoordinator:
    def __init__(self, broker_id: int, config: GroupConfig, append: Append,
                 now_ms: Callable[[], int] = wall_ms, sequence: Sequence = lambda _p, _pid, _epoch: 0) -> None:
        self.broker_id = broker_id
        self.config = config
        self._append_batch = append
        self._sequence = sequence
        self._now = now_ms
        self.partitions = config.offsets_partitions  # replaced by the topic's real count
        self.membership = Membership(config.membership, self._store_group, now_ms=now_ms)
        self.consumer = ConsumerGroups(config.consumer, on_change=self._consumer_changed,  # KIP-848 groups
                                       on_downgrade=self._downgrade)
        self.classic = ClassicMembers(self.consumer)  # their classic members (KIP-848's online upgrade)
        self._conversions: dict[str, asyncio.Task] = {}  # group id -> the write of its downgrade
        self.owned: dict[int, _Owned] = {}
        self.unparseable_records = 0   # skipped while loading partitions (a metric)
        self._retention: asyncio.TimerHandle | None = None

    # -- leadership ----------------------------------------------------------------------------
    def on_metadata(self, replicas) -> None:
        """Load the offsets partitions this broker now leads, unload those it no longer does.
        ``replicas`` is the ReplicaManager (``topic`` and ``leader`` are all we use)."""
        count, led = led_partitions(replicas, OFFSETS_TOPIC, self.broker_id)
        self.partitions = count or self.partitions
        follow_leadership(self.owned, led, self._resign, self._elect)

    def _elect(self, partition: int, epoch: int, partition_log) -> None:
        owned = self.owned[partition] = _Owned(epoch)
        owned.task = asyncio.get_running_loop().create_task(self._load(partition, owned, partition_log))
        if self._retention is None:
            self._schedule_retention()

    async def _load(self, partition: int, owned: _Owned, partition_log) -> None:
        started = time.monotonic()
        try:
            contents = await read_partition(partition_log, lambda: self.owned.get(partition) is owned)
        except (KafkaError, OSError, ValueError) as e:
            log.error("loading %s-%d failed: %s; resigning its groups", OFFSETS_TOPIC, partition, e)
            if self.owned.get(partition) is owned:
                del self.owned[partition]
            return
        if contents is None or self.owned.get(partition) is not owned:
            return
        contents.skipped.report(OFFSETS_TOPIC, partition)
        self.unparseable_records += contents.skipped.count
        groups = contents.build(self._now())
        for group in groups:
            self.membership.install(group)
        for consumer_group in contents.consumer_groups():
            self.consumer.install(consumer_group)
        owned.loaded = True
        log.info("loaded %s-%d (epoch %d): %d groups from %d records in %.3fs", OFFSETS_TOPIC, partition,
                 owned.epoch, len(groups), contents.records, time.monotonic() - started)

    def _resign(self, partition: int) -> None:
        owned = self.owned.pop(partition)
        if owned.task is not None and not owned.task.done():
            owned.task.cancel()
        gone = [g for g in self.membership.groups if self.partition_of(g) == partition]
        for group_id in gone:
            self.membership.unload(group_id, E.not_coordinator)
        for group_id in [g for g in self.consumer.groups if self.partition_of(g) == partition]:
            self.consumer.unload(group_id)
        log.info("no longer the coordinator of %s-%d: unloaded %d groups", OFFSETS_TOPIC, partition, len(gone))

    def close(self) -> None:
        for p in list(self.owned):
            self._resign(p)
        if self._retention is not None:
            self._retention.cancel()

    # -- routing --------------------------------------------------------------------------------
    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.partitions)

    def check(self, group_id: str) -> int:
        """The group's partition if this broker serves it now, else the error to answer."""
        p = self.partition_of(group_id)
        serving(self.owned, p, OFFSETS_TOPIC, self.broker_id, group_id)
        return p

    def serves(self, group_id: str) -> bool:
        owned = self.owned.get(self.partition_of(group_id))
        return owned is not None and owned.loaded

    # -- persistence ----------------------------------------------------------------------------
    async def _append(self, partition: int, records: list[Record], producer: tuple[int, int] | None = None) -> None:
        """Write ``records``; ``producer`` (id, epoch): as that producer's transactional batch."""
        batch = build_batch(records) if producer is None else build_batch(
            records, producer_id=producer[0], producer_epoch=producer[1], transactional=True,
            base_sequence=self._sequence(partition, *producer))
        try:
            await self._append_batch(partition, batch)
        except KafkaError as e:
            code = APPEND_ERRORS.get(e.code, E.unknown_server_error)
            raise KafkaError(code, f"writing to {OFFSETS_TOPIC}-{partition} failed: {e.message}") from e

    async def _store_group(self, group: Group, assignments: dict[str, bytes]) -> None:
        partition = self.check(group.group_id)
        await self._append(partition, [_group_record(group, assignments)])

    async def store_consumer(self, group_id: str, deleted: bool = False) -> None:
        """Write what changed in KIP-848 group ``group_id`` (``consumer_state``), or the records of
        its conversion to a classic group; raises KafkaError (NOT_COORDINATOR, ...) when the
        write fails."""
        conversion = self._conversions.get(group_id)
        if conversion is not None:
            await asyncio.shield(conversion)
        group = self.consumer.groups.get(group_id)
        if group is None:
            return
        partition = self.check(group_id)
        records = consumer_state.changes(group, deleted)
        if not records:
            return
        try:
            await self._append(partition, [Record(value, k) for k, value in records])
        except KafkaError:
            consumer_state.failed(group, records)
            raise

    def _consumer_changed(self, group_id: str) -> None:
        _background(self.store_consumer(group_id), f"writing consumer group {group_id}")

    # -- KIP-848's online upgrade and downgrade (migration) ----------------------------------------
    def upgrade(self, group_id: str, lookup: Lookup) -> None:
        """A member using the consumer protocol joins classic group ``group_id`` (with members): it
        becomes a consumer group, its records written with the joining member's heartbeat. Refused
        as Kafka refuses it: GROUP_ID_NOT_FOUND."""
        classic = self.membership.groups[group_id]
        why = migration.upgrade_refusal(classic, self.config.consumer)
        if why is not None:
            log.info("group %s stays a classic group: %s", group_id, why)
            raise KafkaError(E.group_id_not_found, f"Group {group_id} is not a consumer group.")
        group = migration.to_consumer(classic, lookup)
        self.membership.hand_over(group_id)
        self.consumer.install(group)
        log.info("group %s: converted from a classic group to a consumer group at epoch %d with %d classic members",
                 group_id, group.epoch, len(group.members))

    def _downgrade(self, group: ConsumerGroup, rebalance: bool) -> None:
        """Only classic members are left in ``group``: it becomes a classic group (that rebalances
        if ``rebalance``); its consumer records are deleted and its classic record written in one
        batch."""
        gid = group.group_id
        records = [Record(v, k) for k, v in consumer_state.changes(group, deleted=True)]
        self.consumer.unload(gid)
        classic = migration.to_classic(group, self.membership.groups.get(gid), self._now())
        records.append(_group_record(classic, {mid: m.assignment for mid, m in classic.members.items()}))
        self.membership.adopt(classic, f"Downgrade group {gid} from consumer to classic." if rebalance else None)
        task = _background(self._append(self.partition_of(gid), records), f"writing the downgrade of group {gid}")
        self._conversions[gid] = task
        task.add_done_callback(lambda t: self._conversions.pop(gid, None) if self._conversions.get(gid) is t else None)
        log.info("group %s: converted from a consumer group to a classic group at generation %d", gid,
                 classic.generation)

    async def delete_consumer(self, group_id: str) -> None:
        """Forget KIP-848 group ``group_id`` (members gone), tombstoning its records."""
        await self.store_consumer(group_id, deleted=True)
        self.consumer.unload(group_id)

    # -- offsets --------------------------------------------------------------------------------
    def _commit_error(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                      version: int) -> ErrorCode:
        """Kafka's doCommitOffsets checks; a group is created for simple (generation -1) commits."""
        groups = self.membership.groups
        consumer_error = self.consumer.offset_error(group_id, member_id, generation, commit_version=version)
        if consumer_error is not None:  # a KIP-848 group: its offsets live in a member-less classic shell
            if consumer_error == E.none:
                groups.setdefault(group_id, Group(group_id, state_ms=self._now()))
            return consumer_error
        group = groups.get(group_id)
        if group is None:
            if generation >= 0:
                return E.illegal_generation
            groups[group_id] = Group(group_id, state_ms=self._now())
            return E.none
        if generation < 0 and group.state == S.EMPTY:
            return E.none
        if group.state == S.COMPLETING_REBALANCE and not group.is_fenced(member_id, instance_id):
            return E.rebalance_in_progress
        error = self.membership.check_member(group, member_id, instance_id, generation)
        if error == E.none:
            self.membership.touch(group, member_id)
        return error

    @completes_if_cancelled
    async def commit(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                     offsets: dict[tuple[str, int], OffsetValue], version: int = 9) -> dict[tuple[str, int], ErrorCode]:
        """Errors per partition (``version``: the OffsetCommit's); raises KafkaError for coordinator errors."""
        partition = self.check(group_id)
        error = self._commit_error(group_id, generation, member_id, instance_id, version)
        if error != E.none:
            return {tp: error for tp in offsets}
        results: dict[tuple[str, int], ErrorCode] = {}
        valid = {}
        for tp, value in offsets.items():
            if len(value.metadata.encode()) > self.config.offset_metadata_max_bytes:
                results[tp] = E.offset_metadata_too_large
            else:
                valid[tp] = value
        if valid:
            records = [Record(offset_value(v), offset_key(group_id, t, p)) for (t, p), v in valid.items()]
            try:
                await self._append(partition, records)
            except KafkaError as e:
                return {**results, **{tp: e.code for tp in valid}}
            group = self.membership.groups.get(group_id)
            if group is not None and group.state != S.DEAD:
                group.offsets.update(valid)
            results.update({tp: E.none for tp in valid})
        return results

    @completes_if_cancelled
    async def txn_commit(self, group_id: str, producer_id: int, producer_epoch: int, generation: int, member_id: str,
                         instance_id: str | None, offsets: dict[tuple[str, int], OffsetValue]
                         ) -> dict[tuple[str, int], ErrorCode]:
        """TxnOffsetCommit: errors per partition; the offsets wait for the transaction's marker."""
        partition = self.check(group_id)
        group = self.membership.groups.get(group_id)
        if group is None:
            group = self.membership.groups[group_id] = Group(group_id, state_ms=self._now())
        consumer_error = self.consumer.offset_error(group_id, member_id, generation)
        if consumer_error is not None:  # a KIP-848 group: its member and epoch; a stale epoch is ILLEGAL_GENERATION here
            error = E.illegal_generation if consumer_error == E.stale_member_epoch else consumer_error
        elif group.state == S.DEAD:
            error = E.coordinator_not_available
        elif generation >= 0 or member_id or instance_id:  # Kafka's validateOffsetCommit, transactional
            error = self.membership.check_member(group, member_id, instance_id, generation)
        else:
            error = E.none
        if error != E.none:
            return {tp: error for tp in offsets}
        big = {tp for tp, v in offsets.items() if len(v.metadata.encode()) > self.config.offset_metadata_max_bytes}
        valid = {tp: v for tp, v in offsets.items() if tp not in big}
        results = dict.fromkeys(big, E.offset_metadata_too_large)
        if valid:
            records = [Record(offset_value(v), offset_key(group_id, t, p)) for (t, p), v in valid.items()]
            try:
                await self._append(partition, records, (producer_id, producer_epoch))
            except KafkaError as e:
                return {**results, **{tp: e.code for tp in valid}}
            group.pending_txn.setdefault(producer_id, {}).update(valid)
            results.update(dict.fromkeys(valid, E.none))
        return results

    def complete_txn(self, producer_id: int, partitions: set[int], commit: bool) -> None:
        """The marker of ``producer_id``'s transaction was written to these ``__consumer_offsets``
        partitions: its pending offsets become committed (or are dropped, on abort)."""
        for group in list(self.membership.groups.values()):
            if producer_id in group.pending_txn and self.partition_of(group.group_id) in partitions:
                pending = group.pending_txn.pop(producer_id)
                if commit and group.state != S.DEAD:
                    group.offsets.update(pending)

    def has_pending(self, group_id: str, tp: tuple[str, int]) -> bool:
        """An open transaction holds an offset of ``tp`` (OffsetFetch's require_stable)."""
        group = self.membership.groups.get(group_id)
        return group is not None and any(tp in p for p in group.pending_txn.values())

    def fetch(self, group_id: str, partitions: list[tuple[str, int]] | None) -> dict[tuple[str, int], OffsetValue | None]:
        """Committed offsets (None = no commit); every partition of the group if ``partitions`` is None."""
        self.check(group_id)
        group = self.membership.groups.get(group_id)
        stored = group.offsets if group is not None else {}
        if partitions is None:
            return dict(stored)
        return {tp: stored.get(tp) for tp in partitions}

    async def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> tuple[ErrorCode, dict]:
        """OffsetDelete: (group error, {tp: error}); subscribed topics of a live group are kept."""
        partition = self.check(group_id)
        group = self.membership.groups.get(group_id)
        if group is None or group.state == S.DEAD:
            return E.group_id_not_found, {}
        subscribed: set[str] = set()
        if group.state != S.EMPTY:
            found = group.subscribed_topics()
            if found is None:
                return E.non_empty_group, {}
            subscribed = found
        errors = {tp: (E.group_subscribed_to_topic if tp[0] in subscribed else E.none) for tp in partitions}
        gone = [tp for tp, err in errors.items() if err == E.none and tp in group.offsets]
        if gone:
            await self._append(partition, [Record(None, offset_key(group_id, t, p)) for t, p in gone])
            for tp in gone:
                group.offsets.pop(tp, None)
        return E.none, errors

    async def delete_group(self, group_id: str) -> ErrorCode:
        try:
            partition = self.check(group_id)
        except KafkaError as e:
            return e.code
        if self.consumer.active(group_id):
            return E.non_empty_group
        group = self.membership.groups.get(group_id)
        if group is None and group_id in self.consumer.groups:
            await self.delete_consumer(group_id)
            return E.none  # an empty KIP-848 group without offsets
        if group is None or group.state == S.DEAD:
            return E.group_id_not_found
        if group.state != S.EMPTY:
            return E.non_empty_group
        await self._tombstone_group(partition, group)
        return E.none

    async def _tombstone_group(self, partition: int, group: Group) -> None:
        """Delete ``group``: its offsets, its classic record and, if it is an empty KIP-848
        group (deleted, or its offsets expired), that group's records."""
        await self.delete_consumer(group.group_id)
        records = [Record(None, offset_key(group.group_id, t, p)) for t, p in group.offsets]
        records.append(Record(None, group_key(group.group_id)))
        await self._append(partition, records)
        if self.membership.groups.get(group.group_id) is group:
            self.membership.unload(group.group_id, E.coordinator_not_available)
        log.info("group %s deleted", group.group_id)

    # -- retention ------------------------------------------------------------------------------
    def _schedule_retention(self) -> None:
        loop = asyncio.get_running_loop()
        self._retention = loop.call_later(self.config.retention_check_interval_ms / 1000, self._retention_tick)

    def _retention_tick(self) -> None:
        _background(self.expire_offsets(), "offset expiry")
        self._schedule_retention()

    async def expire_offsets(self) -> int:
        """Delete the expired offsets of Empty groups (and the groups left with nothing)."""
        now, retention, removed = self._now(), self.config.offsets_retention_ms, 0
        for group in list(self.membership.groups.values()):
            if group.state != S.EMPTY or not self.serves(group.group_id) or self.consumer.active(group.group_id):
                continue
            partition = self.partition_of(group.group_id)

            def expired(v: OffsetValue) -> bool:
                if v.expire_ms >= 0:
                    return now >= v.expire_ms
                return now >= (group.state_ms if group.protocol_type else v.commit_ms) + retention
            gone = [tp for tp, v in group.offsets.items() if expired(v)]
            if gone and len(gone) == len(group.offsets) and not group.members:
                await self._tombstone_group(partition, group)
            elif gone:
                await self._append(partition, [Record(None, offset_key(group.group_id, t, p)) for t, p in gone])
                for tp in gone:
                    group.offsets.pop(tp, None)
            removed += len(gone)
        if removed:
            log.info("expired %d committed offsets", removed)
        return removed


def _group_record(group: Group, assignments: dict[str, bytes]) -> Record:
    """A classic group's metadata record (its members with their assignments)."""
    members = tuple(MemberValue(m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                                m.session_timeout_ms, m.metadata(group.protocol_name),
                                assignments.get(mid, b"")) for mid, m in group.members.items())
    value = GroupValue(group.protocol_type or "", group.generation, group.protocol_name, group.leader_id,
                       group.state_ms, members)
    return Record(group_value(value), group_key(group.group_id))


def _background(coro, what: str) -> asyncio.Task:
    """A write no request waits on; its failure is logged (``what`` failed: why)."""
    task = asyncio.get_running_loop().create_task(coro)
    task.add_done_callback(lambda t: t.cancelled() or t.exception() is None or log.warning(
        "%s failed: %s", what, t.exception()))
    return task
