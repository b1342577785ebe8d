"""Per-partition idempotent-producer state (Kafka's ProducerStateManager, without transactions).

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

Snapshots are Kafka's ``<20-digit offset>.snapshot`` files (version 1: version i16, CRC-32C u32
of the rest, then per producer: id i64, epoch i16, last sequence i32, last offset i64, offset
delta i32, timestamp i64, coordinator epoch i32, transaction first offset i64). Like Kafka's
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

__all__ = ["BatchMetadata", "ProducerStateManager"]

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


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=RETAINED_BATCHES))

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
            self._check_batch(batch, epoch, last_seq, known=entry is not None or batch.producer_id in pending)
            pending[batch.producer_id] = (batch.producer_epoch, _last_seq(batch))
        return None

    @staticmethod
    def _check_batch(batch, epoch: int, last_seq: int, *, known: bool) -> None:
        pid, seq = batch.producer_id, batch.base_sequence
        if not known:
            return
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

    def update(self, batches: Iterable) -> None:
        """Record written batches (leader after append, follower, log load)."""
        for batch in batches:
            if batch.producer_id < 0 or batch.is_control:
                continue
            entry = self.producers.get(batch.producer_id)
            if entry is None or batch.producer_epoch > entry.epoch:
                entry = self.producers[batch.producer_id] = ProducerEntry(batch.producer_epoch)
            entry.batches.append(BatchMetadata(batch.base_sequence, _last_seq(batch),
                                               batch.base_offset, batch.last_offset))

    def clear(self) -> None:
        self.producers.clear()

    # -- snapshots ----------------------------------------------------------------------------
    def write_snapshot(self, directory: Path, offset: int) -> Path:
        """The state as of ``offset`` (the log end) to ``<offset>.snapshot``, atomically."""
        entries = b"".join(_ENTRY.pack(pid, e.epoch, e.batches[-1].last_seq, e.batches[-1].last_offset,
                                       e.batches[-1].last_seq - e.batches[-1].first_seq, -1, -1, -1)
                           for pid, e in self.producers.items() if e.batches)
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
            pid, epoch, last_seq, last_offset, delta, *_ = _ENTRY.unpack_from(data, _HEADER.size + i * _ENTRY.size)
            entry = self.producers[pid] = ProducerEntry(epoch)
            entry.batches.append(BatchMetadata(last_seq - delta, last_seq, last_offset - delta, last_offset))
        return True


def snapshot_path(directory: Path, offset: int) -> Path:
    return Path(directory) / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offsets(directory: Path) -> list[int]:
    return sorted(int(p.name[:-len(SNAPSHOT_SUFFIX)]) for p in Path(directory).glob("*" + SNAPSHOT_SUFFIX)
                  if p.name[:-len(SNAPSHOT_SUFFIX)].isdigit())
