"""Per-partition producer state (Kafka's ProducerStateManager): idempotence and transactions.

For every producer id seen in the log: its epoch and the metadata of its last five batches
(first/last sequence, first/last offset). The leader checks each idempotent batch before
append, with Kafka 3.9's answers:
- same epoch, same first/last sequence as a retained batch: a duplicate, answered as success
  with the original batch's offsets (nothing is written);
- an epoch below the producer's: INVALID_PRODUCER_EPOCH (Kafka's produce path, not PRODUCER_FENCED);
- a new epoch must start at sequence 0, and a known epoch must continue at last sequence + 1
  (wrapping at 2^31 - 1): otherwise OUT_OF_ORDER_SEQUENCE_NUMBER.
A producer id the partition has never seen is accepted at any sequence (KIP-360: Kafka no
longer answers UNKNOWN_PRODUCER_ID on produce). Followers and log loading only ``update``.

Transactions (Kafka 3.9's rules, without KIP-890's partition verification): a producer's first
transactional batch opens its transaction at that batch's offset (``ongoing``: producer id ->
first offset, in offset order); a control batch (commit/abort marker) closes it and yields a
``CompletedTxn`` (none for a marker without data). A data batch that is not transactional while
the producer's transaction is open is INVALID_TXN_STATE. Before a leader writes a marker,
``check_marker`` answers INVALID_PRODUCER_EPOCH for an epoch below the producer's and
TRANSACTION_COORDINATOR_FENCED for a coordinator epoch below the last one seen. A marker
moves the producer to its epoch (a coordinator's abort after fencing bumps it) and records the
coordinator epoch. Completed transactions whose marker is not yet below the high watermark
stay *unreplicated*: with the ongoing ones they hold back the last stable offset
(``first_unstable_offset``).

Snapshots are Kafka's ``<20-digit offset>.snapshot`` files (version 1: version i16, CRC-32C u32
of the rest, then per producer: id i64, epoch i16, last sequence i32, last offset i64, offset
delta i32, timestamp i64, coordinator epoch i32, current transaction first offset i64, -1 when
none: the ongoing transactions survive a reload). Like Kafka's
they keep only each producer's last batch, so after a load from a snapshot a retry of that batch
is deduplicated, and older ones only if the replayed log tail holds them.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from crc32c import crc32c

from odradek.errors import ErrorCode, KafkaError
from odradek.records import ControlType, read_control

__all__ = ["BatchMetadata", "CompletedTxn", "ProducerStateManager"]

RETAINED_BATCHES = 5
SNAPSHOT_SUFFIX = ".snapshot"
_HEADER = struct.Struct(">hIi")           # version, crc, entry count
_ENTRY = struct.Struct(">qhiqiqiq")
_MAX_SEQUENCE = 2**31 - 1


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker closed: its first data offset, the marker's offset, how it ended."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=RETAINED_BATCHES))
    coordinator_epoch: int = -1
    txn_first_offset: int = -1      # the open transaction's first offset, -1 when none
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


def _last_seq(batch) -> int:
    return (batch.base_sequence + batch.last_offset_delta) % (_MAX_SEQUENCE + 1)


def _next_seq(seq: int) -> int:
    return 0 if seq == _MAX_SEQUENCE else seq + 1


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}          # producer id -> first offset, in offset order
        self.unreplicated: list[CompletedTxn] = []  # completed, marker not yet below the HW

    def replicated_up_to(self, high_watermark: int) -> None:
        """Forget the completed transactions whose marker is below the high watermark."""
        if self.unreplicated and self.unreplicated[0].last_offset < high_watermark:
            self.unreplicated = [t for t in self.unreplicated if t.last_offset >= high_watermark]

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of the oldest transaction not yet decided and replicated, or None."""
        self.replicated_up_to(high_watermark)
        first = next(iter(self.ongoing.values()), None)
        if self.unreplicated:
            oldest = min(t.first_offset for t in self.unreplicated)
            first = oldest if first is None else min(first, oldest)
        return first

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Kafka's checks of a coordinator's marker before the leader appends it."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.epoch:
            raise KafkaError(ErrorCode.invalid_producer_epoch,
                             f"Epoch of producer {producer_id} is {producer_epoch}, which is smaller than "
                             f"the last seen epoch {entry.epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(ErrorCode.transaction_coordinator_fenced,
                             f"Invalid coordinator epoch for producerId {producer_id}: {coordinator_epoch} "
                             f"(zombie), {entry.coordinator_epoch} (current)")

    def find_duplicate(self, batch) -> BatchMetadata | None:
        """The retained batch that ``batch`` repeats, if any."""
        entry = self.producers.get(batch.producer_id)
        if batch.producer_id < 0 or entry is None or entry.epoch != batch.producer_epoch:
            return None
        last_seq = _last_seq(batch)
        return next((m for m in entry.batches if m.first_seq == batch.base_sequence and m.last_seq == last_seq),
                    None)

    def check(self, batches: Iterable) -> BatchMetadata | None:
        """Check a leader append: the original batch if it is a retried single batch, else None;
        raises the Kafka error for a fenced epoch or a gap in the sequence."""
        batches = list(batches)
        if len(batches) == 1 and (duplicate := self.find_duplicate(batches[0])) is not None:
            return duplicate
        pending: dict[int, tuple[int, int]] = {}   # producer id -> (epoch, last seq) within this append
        for batch in batches:
            if batch.producer_id < 0:
                continue
            entry = self.producers.get(batch.producer_id)
            epoch, last_seq = pending.get(batch.producer_id) or (
                (entry.epoch, entry.last_seq) if entry else (-1, -1))
            self._check_batch(batch, epoch, last_seq, known=entry is not None or batch.producer_id in pending,
                              txn_open=entry is not None and entry.txn_first_offset >= 0
                              and batch.producer_epoch == entry.epoch)
            pending[batch.producer_id] = (batch.producer_epoch, _last_seq(batch))
        return None

    @staticmethod
    def _check_batch(batch, epoch: int, last_seq: int, *, known: bool, txn_open: bool = False) -> None:
        pid, seq = batch.producer_id, batch.base_sequence
        if not known:
            return
        if txn_open and not batch.is_transactional:
            raise KafkaError(ErrorCode.invalid_txn_state,
                             f"Expected transactional write from producer {pid} at offset {batch.base_offset}")
        if batch.producer_epoch < epoch:
            raise KafkaError(ErrorCode.invalid_producer_epoch,
                             f"Epoch of producer {pid} is {batch.producer_epoch}, which is smaller than the "
                             f"last seen epoch {epoch}")
        if batch.producer_epoch > epoch:
            if seq != 0:
                raise KafkaError(ErrorCode.out_of_order_sequence_number,
                                 f"Invalid sequence number for new epoch of producer {pid} at epoch "
                                 f"{batch.producer_epoch} (request epoch), {seq} (seq. number), 0 expected")
        elif seq != _next_seq(last_seq):
            raise KafkaError(ErrorCode.out_of_order_sequence_number,
                             f"Out of order sequence number for producer {pid} at epoch {epoch}: "
                             f"{seq} (incoming seq. number), {last_seq} (current end sequence number)")

    def update(self, batches: Iterable) -> list[CompletedTxn]:
        """Record written batches (leader after append, follower, log load); control batches
        must be ``RecordBatch`` views (their marker is read). Returns the transactions closed."""
        completed = []
        for batch in batches:
            if batch.producer_id < 0:
                continue
            entry = self._entry(batch.producer_id, batch.producer_epoch)
            entry.last_timestamp = batch.max_timestamp
            if batch.is_control:
                done = self._end_txn(batch, entry)
                if done is not None:
                    completed.append(done)
                continue
            entry.batches.append(BatchMetadata(batch.base_sequence, _last_seq(batch),
                                               batch.base_offset, batch.last_offset))
            if batch.is_transactional and entry.txn_first_offset < 0:
                entry.txn_first_offset = batch.base_offset
                self.ongoing[batch.producer_id] = batch.base_offset
        return completed

    def _entry(self, producer_id: int, epoch: int) -> ProducerEntry:
        """The producer's entry, started afresh (sequences forgotten) at a newer epoch."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(epoch)
        elif epoch > entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        return entry

    def _end_txn(self, batch, entry: ProducerEntry) -> CompletedTxn | None:
        if batch.records_count == 0:
            return None   # the cleaner emptied it: its transaction's data is gone too
        try:
            marker = read_control(batch)
        except KafkaError:
            return None   # another kind of control record: no transaction ends here
        entry.coordinator_epoch = marker.coordinator_epoch
        first, entry.txn_first_offset = entry.txn_first_offset, -1
        if first < 0:
            return None   # a marker without data: no effect on the LSO nor the transaction index
        self.ongoing.pop(batch.producer_id, None)
        done = CompletedTxn(batch.producer_id, first, batch.base_offset, marker.type == ControlType.ABORT)
        self.unreplicated.append(done)
        return done

    def clear(self) -> None:
        self.producers.clear()
        self.ongoing.clear()
        self.unreplicated.clear()

    # -- snapshots ----------------------------------------------------------------------------
    def write_snapshot(self, directory: Path, offset: int) -> Path:
        """The state as of ``offset`` (the log end) to ``<offset>.snapshot``, atomically."""
        entries = b"".join(_ENTRY.pack(pid, e.epoch, *_last_batch_fields(e), e.last_timestamp,
                                       e.coordinator_epoch, e.txn_first_offset)
                           for pid, e in self.producers.items())
        body = struct.pack(">i", len(self.producers)) + entries
        path = snapshot_path(directory, offset)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(struct.pack(">hI", 1, crc32c(body)) + body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return path

    def load_snapshot(self, path: Path) -> bool:
        """Replace the state with a snapshot's; False (state cleared) if it is corrupt."""
        self.clear()
        data = path.read_bytes()
        if len(data) < _HEADER.size:
            return False
        version, crc, count = _HEADER.unpack_from(data)
        if version != 1 or crc32c(data[6:]) != crc or len(data) != _HEADER.size + count * _ENTRY.size:
            return False
        for i in range(count):
            pid, epoch, last_seq, last_offset, delta, timestamp, coordinator_epoch, txn_first = _ENTRY.unpack_from(
                data, _HEADER.size + i * _ENTRY.size)
            entry = self.producers[pid] = ProducerEntry(epoch, coordinator_epoch=coordinator_epoch,
                                                        txn_first_offset=txn_first, last_timestamp=timestamp)
            if last_offset >= 0:
                entry.batches.append(BatchMetadata(last_seq - delta, last_seq, last_offset - delta, last_offset))
            if txn_first >= 0:
                self.ongoing[pid] = txn_first
        self.ongoing = dict(sorted(self.ongoing.items(), key=lambda item: item[1]))
        return True


def _last_batch_fields(entry: ProducerEntry) -> tuple[int, int, int]:
    """last sequence, last offset, offset delta of the producer's last batch (-1, -1, 0 if none)."""
    if not entry.batches:
        return -1, -1, 0
    last = entry.batches[-1]
    return last.last_seq, last.last_offset, last.last_seq - last.first_seq


def snapshot_path(directory: Path, offset: int) -> Path:
    return Path(directory) / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offsets(directory: Path) -> list[int]:
    return sorted(int(p.name[:-len(SNAPSHOT_SUFFIX)]) for p in Path(directory).glob("*" + SNAPSHOT_SUFFIX)
                  if p.name[:-len(SNAPSHOT_SUFFIX)].isdigit())
