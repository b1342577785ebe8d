"""One transactional id's state and Kafka's state machine over it (TransactionMetadata).

States and their ids (the ids are written to ``__transaction_state``)::

    Empty(0) -> Ongoing(1) -> PrepareCommit(2) -> CompleteCommit(4) -> Ongoing / Empty / Dead
                           -> PrepareAbort(3)  -> CompleteAbort(5)  -> ...
    Ongoing -> PrepareEpochFence(7) -> PrepareAbort      (a new producer instance, a timeout)

A change is two steps, as in Kafka: ``prepare_*`` checks the move and returns the target
(``Transit``), marking it pending; once the target is written to the log, ``complete`` applies
it (``abandon`` drops the pending mark when the write fails). While a change is pending, client
requests get CONCURRENT_TRANSACTIONS. Not thread-safe: the event loop is the only writer.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

NO_PRODUCER_ID = -1
NO_EPOCH = -1
_SHORT_MAX = 32767


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """Kafka's name (DescribeTransactions, ListTransactions' filters)."""
        return "".join(w.capitalize() for w in self.name.split("_"))


S = TxnState
_PREVIOUS = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}
COMPLETED = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})


def epoch_exhausted(epoch: int) -> bool:
    return epoch >= _SHORT_MAX - 1


@dataclass(frozen=True, slots=True)
class Transit:
    """A target state, written to the log before it is applied."""
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    start_ms: int
    last_update_ms: int


class IllegalTransition(Exception):
    """A move Kafka treats as a coordinator bug (IllegalStateException)."""


@dataclass(eq=False)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    pending: TxnState | None = None
    failed_epoch_fence: bool = False

    @property
    def pending_in_progress(self) -> bool:
        return self.pending is not None

    @property
    def epoch_exhausted(self) -> bool:
        return epoch_exhausted(self.producer_epoch)

    def _current(self) -> Transit:
        return Transit(self.producer_id, self.last_producer_id, self.producer_epoch, self.last_producer_epoch,
                       self.timeout_ms, self.state, frozenset(self.partitions), self.start_ms, self.last_update_ms)

    def _prepare(self, target: Transit) -> Transit:
        if self.pending is not None:
            raise IllegalTransition(f"{self.transactional_id}: {target.state.kafka_name} while "
                                    f"{self.pending.kafka_name} is pending")
        if self.state not in _PREVIOUS[target.state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.kafka_name} -> {target.state.kafka_name}")
        self.pending = target.state
        return target

    # -- the moves (Kafka's prepare* methods) ------------------------------------------------------
    def prepare_epoch_bump(self, timeout_ms: int, expected_epoch: int | None, now: int) -> Transit | None:
        """InitProducerId on a completed transaction; None = PRODUCER_FENCED."""
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epochs = (bumped, NO_EPOCH)
        elif self.producer_epoch == NO_EPOCH or expected_epoch == self.producer_epoch:
            epochs = (bumped, self.producer_epoch)
        elif expected_epoch == self.last_producer_epoch:  # a retry of a bump whose answer was lost
            epochs = (self.producer_epoch, self.last_producer_epoch)
        else:
            return None
        return self._prepare(replace(self._current(), producer_epoch=epochs[0], last_producer_epoch=epochs[1],
                                     timeout_ms=timeout_ms, state=S.EMPTY, partitions=frozenset(),
                                     start_ms=-1, last_update_ms=now))

    def prepare_id_rotation(self, producer_id: int, timeout_ms: int, now: int, record_last_epoch: bool) -> Transit:
        """An exhausted epoch: a new producer id at epoch 0."""
        return self._prepare(replace(self._current(), producer_id=producer_id, last_producer_id=self.producer_id,
                                     producer_epoch=0,
                                     last_producer_epoch=self.producer_epoch if record_last_epoch else NO_EPOCH,
                                     timeout_ms=timeout_ms, state=S.EMPTY, partitions=frozenset(), start_ms=-1,
                                     last_update_ms=now))

    def prepare_fence(self) -> Transit:
        """Bump the epoch of an ongoing transaction so that its markers fence the old producer."""
        if self.producer_epoch >= _SHORT_MAX:
            raise IllegalTransition(f"{self.transactional_id}: the epoch cannot be bumped past {_SHORT_MAX}")
        epoch = self.producer_epoch if self.failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(replace(self._current(), producer_epoch=epoch, last_producer_epoch=NO_EPOCH,
                                     state=S.PREPARE_EPOCH_FENCE))

    def prepare_add(self, partitions: set[tuple[str, int]], now: int) -> Transit:
        start = now if self.state in COMPLETED else self.start_ms
        return self._prepare(replace(self._current(), state=S.ONGOING,
                                     partitions=frozenset(self.partitions | partitions), start_ms=start,
                                     last_update_ms=now))

    def prepare_end(self, state: TxnState, now: int) -> Transit:
        return self._prepare(replace(self._current(), state=state, last_update_ms=now))

    def prepare_complete(self, now: int) -> Transit:
        state = S.COMPLETE_COMMIT if self.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        return self._prepare(replace(self._current(), state=state, partitions=frozenset(), last_update_ms=now))

    def prepare_dead(self) -> Transit:
        return self._prepare(replace(self._current(), state=S.DEAD, partitions=frozenset()))

    # -- applying ------------------------------------------------------------------------------------
    def complete(self, t: Transit) -> None:
        """The target was written: it becomes the state."""
        if self.pending != t.state:
            raise IllegalTransition(f"{self.transactional_id}: completing {t.state.kafka_name}, pending "
                                    f"{self.pending.kafka_name if self.pending else None}")
        self.producer_id, self.last_producer_id = t.producer_id, t.last_producer_id
        self.producer_epoch, self.last_producer_epoch = t.producer_epoch, t.last_producer_epoch
        self.timeout_ms, self.state, self.partitions = t.timeout_ms, t.state, set(t.partitions)
        self.start_ms, self.last_update_ms = t.start_ms, t.last_update_ms
        self.pending = None
        if t.state != S.PREPARE_EPOCH_FENCE:
            self.failed_epoch_fence = False

    def abandon(self) -> None:
        self.pending = None
