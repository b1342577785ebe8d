"""Who may append what to a partition leader: the append's origin (Kafka's AppendOrigin) and the
KIP-890 part 1 verification guards of transactional batches (Kafka's VerificationGuard and the
verification state its ProducerStateManager keeps per producer).

A client's append to an internal topic (``__consumer_offsets``, ``__transaction_state``) is
refused with INVALID_TOPIC_EXCEPTION whoever the principal is; only the coordinators, appending
with ``Origin.COORDINATOR``, write there (Kafka's ``internalTopicsAllowed``). Garbage produced
there used to take every group of the partition offline at its next load (issue 30).

With ``transaction.partition.verification.enable`` a client's transactional batch is appended
only if its producer already has a transaction open on this partition (the log says so: no
question asked, the hot path) or if it carries the guard handed out when the leader started
asking the transaction coordinator (``start``) and that guard is still the producer's: a
marker ending the producer's transaction meanwhile clears it (``ended``), so a late batch
cannot reopen a transaction that was just committed or aborted (the "hanging transaction"
KIP-890 closes). Otherwise INVALID_TXN_STATE. The first appended batch opens the transaction,
and the guard goes (``appended``). Event-loop thread only.
"""

from __future__ import annotations

import enum

from odradek.errors import ErrorCode, KafkaError
from odradek.records import MAGIC, iter_headers
from odradek.topics import is_internal

MAX_GUARDS = 100_000   # per partition: verifications in flight are few; a bound against a flood of producer ids


class Origin(enum.Enum):
    CLIENT = "client"              # a producer: internal topics refused, transactional batches verified
    COORDINATOR = "coordinator"    # the group and transaction coordinators' own writes


def check_origin(topic: str, origin: Origin) -> None:
    """Kafka's ReplicaManager.appendToLocalLog with internalTopicsAllowed=false for clients."""
    if origin is Origin.CLIENT and is_internal(topic):
        raise KafkaError(ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {topic}")


class VerificationGuard:
    """One verification of (producer id, epoch) on one partition; compared by identity."""

    __slots__ = ("producer_id", "epoch")

    def __init__(self, producer_id: int, epoch: int) -> None:
        self.producer_id, self.epoch = producer_id, epoch

    def __repr__(self) -> str:
        return f"VerificationGuard(producer {self.producer_id}, epoch {self.epoch})"


def has_ongoing_transaction(log, producer_id: int, epoch: int) -> bool:
    """Kafka's UnifiedLog.hasOngoingTransaction: the log has the producer's transaction open at this epoch."""
    entry = log.producer_state.producers.get(producer_id)
    return entry is not None and entry.txn_first_offset >= 0 and entry.epoch == epoch


class TxnVerifications:
    """The guards of one partition's verifications in flight, by producer id."""

    def __init__(self) -> None:
        self._guards: dict[int, VerificationGuard] = {}

    def __len__(self) -> int:
        return len(self._guards)

    def start(self, log, producer_id: int, epoch: int) -> VerificationGuard | None:
        """None when the producer's transaction is already open here (no verification needed),
        else the guard the append must present (the pending one of this epoch, or a new one)."""
        if has_ongoing_transaction(log, producer_id, epoch):
            return None
        guard = self._guards.get(producer_id)
        if guard is None or guard.epoch != epoch:
            if len(self._guards) >= MAX_GUARDS:
                del self._guards[next(iter(self._guards))]
            guard = self._guards[producer_id] = VerificationGuard(producer_id, epoch)
        return guard

    def check(self, log, records, guard: VerificationGuard | None) -> None:
        """Before a client append: each transactional data batch continues an open transaction
        or presents its producer's current guard, else INVALID_TXN_STATE."""
        for batch in _transactional(records):
            if has_ongoing_transaction(log, batch.producer_id, batch.producer_epoch):
                continue
            if guard is None or self._guards.get(batch.producer_id) is not guard:
                raise KafkaError(ErrorCode.invalid_txn_state, "Record was not part of an ongoing transaction")

    def appended(self, records) -> None:
        """After an append: the transactions it opened need no guard any more."""
        for batch in _transactional(records):
            self._guards.pop(batch.producer_id, None)

    def ended(self, producer_id: int) -> None:
        """A marker closed the producer's transaction: a verification from before it is stale."""
        self._guards.pop(producer_id, None)


def _transactional(records):
    return (h for h in iter_headers(records)
            if h.magic == MAGIC and h.is_transactional and not h.is_control and h.producer_id >= 0)
