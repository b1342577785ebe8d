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
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Iterable

from odradek.errors import ErrorCode, KafkaError

__all__ = ["BatchMetadata", "ProducerStateManager"]

RETAINED_BATCHES = 5
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
