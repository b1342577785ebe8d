"""The transaction coordinator of one broker (Kafka's TransactionCoordinator and state manager).

A broker coordinates the transactional ids of the ``__transaction_state`` partitions it
leads. It learns leadership from every metadata snapshot (``on_metadata``), as the group
coordinator does: a partition newly led is replayed from its log (the last value per id
wins; COORDINATOR_LOAD_IN_PROGRESS meanwhile) and its transactions caught between
PrepareCommit/PrepareAbort and the end get their markers sent again; a partition lost, or
whose leader epoch changed, is dropped (NOT_COORDINATOR). That leader epoch is the
coordinator epoch the markers carry.

Every state change is written to the id's partition (acks=all) before it is applied
(``metadata``'s prepare/complete). EndTxn answers once PrepareCommit/PrepareAbort is written;
``MarkerSender`` then writes the markers to the transaction's partitions and the coordinator
writes CompleteCommit/CompleteAbort. Timers (``timers``) abort transactions past their
timeout and forget ids idle for ``transactional.id.expiration.ms``. Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from odradek.broker.group.config import partition_for
from odradek.broker.internal_topic import (APPEND_ERRORS, LedPartition, SkippedRecords,
                                           completes_if_cancelled, follow_leadership, led_partitions, replay,
                                           serving, wall_ms)
from odradek.broker.txn.config import TXN_TOPIC, TxnConfig
from odradek.broker.txn.markers import MarkerSender
from odradek.broker.txn.metrics import WindowedTimes
from odradek.broker.txn.metadata import (COMPLETED, NO_EPOCH, NO_PRODUCER_ID, Transit, TxnMetadata,
                                         TxnState, epoch_exhausted)
from odradek.broker.txn.records import TxnLogValue, decode_key, decode_value, txn_key, txn_value
from odradek.errors import ErrorCode, KafkaError
from odradek.records import Record, build_batch

log = logging.getLogger(__name__)

E = ErrorCode
S = TxnState
Append = Callable[[int, bytearray], Awaitable[None]]
Allocate = Callable[[], Awaitable[int]]

_RETRY_S = 0.1


@dataclass(eq=False)
class Owned(LedPartition):
    """A ``__transaction_state`` partition this broker leads, and its transactional ids."""
    txns: dict[str, TxnMetadata] = field(default_factory=dict)


class TransactionCoordinator:
    def __init__(self, broker_id: int, config: TxnConfig, append: Append, allocate: Allocate,
                 markers: MarkerSender, now_ms: Callable[[], int] = wall_ms) -> None:
        self.broker_id = broker_id
        self.config = config
        self._append_batch = append
        self._allocate = allocate
        self.markers = markers
        self.now = now_ms
        self.partitions = config.partitions  # replaced by the topic's real count
        self.owned: dict[int, Owned] = {}
        self._tasks: set[asyncio.Task] = set()
        self.load_times = WindowedTimes()          # partition-load-time (txn.metrics)
        self.append_retries: set[str] = set()      # ids whose completion write is being retried
        self.unparseable_records = 0               # skipped while loading partitions (txn.metrics)

    # -- leadership --------------------------------------------------------------------------------
    def on_metadata(self, replicas) -> None:
        """Load the partitions this broker now leads, drop those it no longer does."""
        count, led = led_partitions(replicas, TXN_TOPIC, self.broker_id)
        self.partitions = count or self.partitions
        follow_leadership(self.owned, led, self._resign, self._elect)

    def _elect(self, partition: int, epoch: int, partition_log) -> None:
        owned = self.owned[partition] = Owned(epoch)
        owned.task = self.spawn(self._load(partition, owned, partition_log))

    async def _load(self, partition: int, owned: Owned, partition_log) -> None:
        started = time.monotonic()
        values: dict[str, TxnLogValue | None] = {}
        skipped = SkippedRecords()

        def on_batch(batch) -> None:
            if not batch.is_control:   # garbage in the topic is skipped: never a reason to resign every id here
                skipped.each(batch, lambda record: _replay_record(record, values))
        try:
            done = await replay(partition_log, on_batch, lambda: self.owned.get(partition) is owned)
        except (KafkaError, OSError, ValueError) as e:
            log.error("loading %s-%d failed: %s; resigning it", TXN_TOPIC, partition, e)
            if self.owned.get(partition) is owned:
                del self.owned[partition]
            return
        if not done or self.owned.get(partition) is not owned:
            return
        skipped.report(TXN_TOPIC, partition)
        self.unparseable_records += skipped.count
        for tid, v in values.items():
            if v is not None and v.status != S.DEAD:
                owned.txns[tid] = TxnMetadata(tid, v.producer_id, NO_PRODUCER_ID, v.producer_epoch, NO_EPOCH,
                                              v.timeout_ms, S(v.status), set(v.partitions), v.start_ms,
                                              v.last_update_ms)
        owned.loaded = True
        self.load_times.record((time.monotonic() - started) * 1000)
        log.info("loaded %s-%d (coordinator epoch %d): %d transactional ids in %.3fs", TXN_TOPIC, partition,
                 owned.epoch, len(owned.txns), time.monotonic() - started)
        for md in owned.txns.values():  # decided before the failover: finish them
            if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                self.spawn(self._finish(owned, md, md.state == S.PREPARE_COMMIT, md.prepare_complete(self.now())))

    def _resign(self, partition: int) -> None:
        owned = self.owned.pop(partition)
        if owned.task is not None and not owned.task.done():
            owned.task.cancel()
        log.info("no longer the transaction coordinator of %s-%d: dropped %d transactional ids", TXN_TOPIC,
                 partition, len(owned.txns))

    def spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            error = task.exception()
            log.log(logging.INFO if isinstance(error, KafkaError) else logging.ERROR,
                    "transaction coordinator task failed: %r", error, exc_info=not isinstance(error, KafkaError))

    def close(self) -> None:
        for p in list(self.owned):
            self._resign(p)
        for task in list(self._tasks):
            task.cancel()
        self.markers.close()

    # -- routing -----------------------------------------------------------------------------------
    def partition_of(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.partitions)

    def owner(self, transactional_id: str) -> Owned:
        """The id's partition if this broker serves it now; else raises the error to answer."""
        return serving(self.owned, self.partition_of(transactional_id), TXN_TOPIC, self.broker_id, transactional_id)

    def _current(self, transactional_id: str, owned: Owned, md: TxnMetadata) -> bool:
        """Still this coordinator's metadata of the id (no failover or expiry in between)?"""
        return self.owned.get(self.partition_of(transactional_id)) is owned and owned.txns.get(transactional_id) is md

    # -- persistence -------------------------------------------------------------------------------
    async def write(self, owned: Owned, md: TxnMetadata, t: Transit) -> ErrorCode:
        """Write ``t`` (prepared on ``md``) to the log; apply it once written."""
        tid = md.transactional_id
        value = None if t.state == S.DEAD else txn_value(TxnLogValue(
            t.producer_id, t.producer_epoch, t.timeout_ms, int(t.state), tuple(sorted(t.partitions)),
            t.last_update_ms, t.start_ms))
        try:
            await self._append_batch(self.partition_of(tid), build_batch([Record(value, txn_key(tid))]))
        except KafkaError as e:
            if self._current(tid, owned, md):
                md.abandon()
            return APPEND_ERRORS.get(e.code, e.code)
        if not self._current(tid, owned, md):
            return E.not_coordinator
        md.complete(t)
        return E.none

    # -- InitProducerId ----------------------------------------------------------------------------
    @completes_if_cancelled
    async def init_producer_id(self, tid: str, timeout_ms: int, expected: tuple[int, int] | None
                               ) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch) for a transactional producer; ``expected``: the (id, epoch)
        a KIP-360 producer sends to recover after an abortable error."""
        if not tid:
            return E.invalid_request, -1, -1
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return E.invalid_transaction_timeout, -1, -1
        owned = self.owner(tid)
        md = owned.txns.get(tid)
        if md is None:
            pid = await self._allocate()
            owned = self.owner(tid)
            md = owned.txns.setdefault(tid, TxnMetadata(tid, pid, NO_PRODUCER_ID, NO_EPOCH, NO_EPOCH, timeout_ms,
                                                        S.EMPTY, last_update_ms=self.now()))
        rotate_to = None
        if md.epoch_exhausted and md.state in COMPLETED and (expected is None or expected[1] == md.producer_epoch):
            rotate_to = await self._allocate()
            if not self._current(tid, owned, md):
                return E.concurrent_transactions, -1, -1
        error, t = self._init_transit(md, timeout_ms, expected, rotate_to)
        if error != E.none:
            return error, -1, -1
        if t.state == S.PREPARE_EPOCH_FENCE:  # abort the open transaction first; the client retries
            error = await self.end_txn(tid, t.producer_id, t.producer_epoch, False, from_client=False)
            return (E.concurrent_transactions if error == E.none else error), -1, -1
        error = await self.write(owned, md, t)
        return (error, md.producer_id, md.producer_epoch) if error == E.none else (error, -1, -1)

    def _init_transit(self, md: TxnMetadata, timeout_ms: int, expected: tuple[int, int] | None,
                      rotate_to: int | None) -> tuple[ErrorCode, Transit | None]:
        """Kafka's prepareInitProducerIdTransit."""
        if md.pending_in_progress:
            return E.concurrent_transactions, None
        if expected is not None and not (md.producer_epoch == NO_EPOCH or expected[0] == md.producer_id or (
                expected[0] == md.last_producer_id and epoch_exhausted(expected[1]))):
            return E.producer_fenced, None
        if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return E.concurrent_transactions, None
        if md.state == S.ONGOING:
            return E.none, md.prepare_fence()
        if md.state not in COMPLETED:
            return E.concurrent_transactions, None
        if rotate_to is not None:
            return E.none, md.prepare_id_rotation(rotate_to, timeout_ms, self.now(), expected is not None)
        t = md.prepare_epoch_bump(timeout_ms, expected[1] if expected is not None else None, self.now())
        return (E.none, t) if t is not None else (E.producer_fenced, None)

    # -- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------------
    @completes_if_cancelled
    async def add_partitions(self, tid: str, producer_id: int, epoch: int, partitions: set[tuple[str, int]]
                             ) -> ErrorCode:
        owned, md, error = self._find(tid, producer_id, epoch)
        if error is not None:
            return error
        if md.pending_in_progress or md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return E.concurrent_transactions
        if md.state == S.ONGOING and partitions <= md.partitions:
            return E.none
        return await self.write(owned, md, md.prepare_add(partitions, self.now()))

    def verify_partitions(self, tid: str, producer_id: int, epoch: int, partitions: set[tuple[str, int]]
                          ) -> dict[tuple[str, int], ErrorCode]:
        """Kafka's handleVerifyPartitionsInTransaction (AddPartitionsToTxn v4+ ``verify_only``, a
        partition leader asking before it appends a transactional batch): NONE for each
        partition in the transaction, TRANSACTION_ABORTABLE for the others; an unknown id or
        another producer id INVALID_PRODUCER_ID_MAPPING, another epoch PRODUCER_FENCED, a
        transaction being completed CONCURRENT_TRANSACTIONS, for every partition."""
        _, md, error = self._find(tid, producer_id, epoch)
        if error is None and md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            error = E.concurrent_transactions
        if error is not None:
            return dict.fromkeys(partitions, error)
        return {tp: E.none if tp in md.partitions else E.transaction_abortable for tp in partitions}

    # -- EndTxn -------------------------------------------------------------------------------------
    @completes_if_cancelled
    async def end_txn(self, tid: str, producer_id: int, epoch: int, commit: bool, from_client: bool = True
                      ) -> ErrorCode:
        """Kafka's endTransaction: write PrepareCommit/PrepareAbort, answer, send the markers."""
        owned, md, error = self._find(tid, producer_id, epoch, exact=from_client)
        if error is not None:
            return error
        if md.pending_in_progress and md.pending != S.PREPARE_EPOCH_FENCE:
            return E.concurrent_transactions
        target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        if md.state != S.ONGOING:
            return self._ended_error(md.state, commit)
        fence = not commit and md.pending == S.PREPARE_EPOCH_FENCE
        if fence:  # the fence's bumped epoch becomes the transaction's: its markers fence the old producer
            md.pending, md.producer_epoch, md.last_producer_epoch = None, epoch, NO_EPOCH
        error = await self.write(owned, md, md.prepare_end(target, self.now()))
        if error != E.none:
            if fence and self._current(tid, owned, md):
                md.failed_epoch_fence = True
            return error
        if not self._current(tid, owned, md):
            return E.not_coordinator
        if error := self._producer_error(md, producer_id, epoch) or (
                E.concurrent_transactions if md.pending_in_progress else None):
            return error
        if md.state != target:
            return E.invalid_txn_state
        self.spawn(self._finish(owned, md, commit, md.prepare_complete(self.now())))
        return E.none

    def _find(self, tid: str, producer_id: int, epoch: int, exact: bool = True):
        """(partition state, metadata, None) for a producer's request, or (.., .., the error)."""
        if not tid:
            return None, None, E.invalid_request
        owned = self.owner(tid)
        md = owned.txns.get(tid)
        if md is None:
            return owned, None, E.invalid_producer_id_mapping
        return owned, md, self._producer_error(md, producer_id, epoch, exact)

    @staticmethod
    def _producer_error(md: TxnMetadata, producer_id: int, epoch: int, exact: bool = True) -> ErrorCode | None:
        """A request from another producer id, or a fenced epoch (an older one; any other one
        when ``exact``: clients never bump the epoch themselves)."""
        if md.producer_id != producer_id:
            return E.invalid_producer_id_mapping
        if (exact and epoch != md.producer_epoch) or epoch < md.producer_epoch:
            return E.producer_fenced
        return None

    @staticmethod
    def _ended_error(state: TxnState, commit: bool) -> ErrorCode:
        """EndTxn on a transaction that is not Ongoing: a retry of a finished one is fine."""
        if state == (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT):
            return E.none
        if state == (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
            return E.concurrent_transactions
        return E.invalid_txn_state

    async def _finish(self, owned: Owned, md: TxnMetadata, commit: bool, t: Transit) -> None:
        """Markers to every partition of the transaction, then CompleteCommit/CompleteAbort."""
        tid = md.transactional_id
        sent = await self.markers.send(md.producer_id, md.producer_epoch, commit, owned.epoch, md.partitions,
                                       lambda: self._current(tid, owned, md))
        if not sent:
            log.info("markers of %s not all written (coordinator moved or fenced)", tid)
            return
        try:
            while self._current(tid, owned, md):
                if not md.pending_in_progress:
                    t = md.prepare_complete(self.now())
                if await self.write(owned, md, t) == E.none:
                    return
                self.append_retries.add(tid)
                await asyncio.sleep(_RETRY_S)
        finally:
            self.append_retries.discard(tid)

    # -- admin ---------------------------------------------------------------------------------------
    def describe(self, tid: str) -> TxnMetadata:
        """The id's metadata; raises NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS or
        TRANSACTIONAL_ID_NOT_FOUND."""
        md = self.owner(tid).txns.get(tid)
        if md is None or md.state == S.DEAD:
            raise KafkaError(E.transactional_id_not_found, f"transactional id {tid} not found")
        return md

    def listing(self) -> tuple[bool, list[TxnMetadata]]:
        """(some partition still loading, every loaded transactional id's metadata)."""
        loading = any(not o.loaded for o in self.owned.values())
        return loading, [md for o in self.owned.values() if o.loaded for md in o.txns.values()
                         if md.state != S.DEAD]

    def loaded_txns(self):
        """(partition state, metadata) of every loaded id (the timers' walk)."""
        return [(o, md) for o in list(self.owned.values()) if o.loaded for md in list(o.txns.values())]



def _replay_record(record: Record, values: dict[str, TxnLogValue | None]) -> None:
    """A ``__transaction_state`` record: the last value per transactional id wins."""
    tid = decode_key(record.key) if record.key is not None else None
    if tid is not None:
        values[tid] = None if record.value is None else decode_value(record.value)
