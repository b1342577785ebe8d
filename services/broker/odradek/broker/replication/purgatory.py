"""Purgatories: requests parked until replication lets them finish (Kafka's DelayedProduce,
DelayedDeleteRecords and DelayedFetch, without a timer wheel: asyncio futures do the waking).

- ``ProducePurgatory`` (one per leader partition): acks=all produces wait until the high
  watermark reaches their last offset + 1. ``complete`` answers those that are due, with
  NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below ``min.insync.replicas`` meanwhile
  (Kafka's check at completion); ``fail_all`` answers every waiter with one error
  (leadership lost). The produce handler owns the request timeout.
- ``DeleteRecordsPurgatory`` (one per leader partition): DeleteRecords requests wait until the
  low watermark (the smallest log start offset of the leader and its live followers) reaches
  the offset they deleted up to; ``complete`` is called with it whenever it may have moved (a
  follower's fetch, a deletion, a new snapshot); ``fail_all`` on leadership lost. The
  DeleteRecords handler owns the request timeout.
- ``FetchWakeup`` (one per broker): long-polling fetches sleep on it; an append (new data for
  followers) or a high-watermark advance (new data for consumers) of a partition wakes the
  fetches reading it; each then re-checks its own partitions. Their ``max_wait`` deadlines,
  and the produce handler's timeouts, share one loop timer (``deadlines``).

Event-loop thread only.
"""

from __future__ import annotations

import asyncio

from odradek.broker.replication import deadlines
from odradek.errors import ErrorCode


class _Purgatory:
    """Futures parked each until a watermark reaches its required offset."""

    def __init__(self) -> None:
        self._waiting: list[tuple[int, asyncio.Future]] = []

    def __len__(self) -> int:
        return len(self._waiting)

    def park(self, required_offset: int) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        self._waiting.append((required_offset, future))
        return future

    def _complete(self, watermark: int, result) -> bool:
        """Answer the futures the watermark reached; True if any."""
        kept = []
        answered = False
        for required, future in self._waiting:
            if future.done():  # timed out: answered or cancelled by its handler's wait
                continue
            if required <= watermark:
                future.set_result(result)
                answered = True
            else:
                kept.append((required, future))
        self._waiting = kept
        return answered

    def _fail_all(self, result) -> None:
        waiting, self._waiting = self._waiting, []
        for _, future in waiting:
            if not future.done():
                future.set_result(result)


class ProducePurgatory(_Purgatory):
    """``park(offset)``: a future resolved with an ErrorCode once the HW reaches ``offset``."""

    def complete(self, high_watermark: int, isr_size: int, min_isr: int) -> bool:
        """True if a produce was answered."""
        return bool(self._waiting) and self._complete(high_watermark, ErrorCode.none if isr_size >= min_isr
                                                      else ErrorCode.not_enough_replicas_after_append)

    def fail_all(self, code: ErrorCode) -> None:
        self._fail_all(code)


class DeleteRecordsPurgatory(_Purgatory):
    """``park(offset)``: a future resolved with (low watermark, ErrorCode) once the low
    watermark reaches ``offset``, or with (-1, the error) by ``fail_all``."""

    def complete(self, low_watermark: int) -> None:
        self._complete(low_watermark, (low_watermark, ErrorCode.none))

    def fail_all(self, code: ErrorCode) -> None:
        self._fail_all((-1, code))


class FetchWakeup:
    """Parked fetches, each waiting on the partitions it reads (Kafka's DelayedFetch keys):
    ``notify(tp)`` wakes only the fetches reading ``tp``, so that an append costs the fetches
    of other partitions nothing (with thousands of partitions per fetch, re-reading them all on
    every append anywhere was what kept the event loop busy); followers' fetches wake on
    appends only (they wait for bytes; a high watermark reaches them with their next fetch)."""

    def __init__(self) -> None:
        self._parked: dict[asyncio.Future, tuple[frozenset | set | None, bool]] = {}
        self.listeners: list = []  # told every notify's partition (the fetch sessions: what may have news)

    @property
    def waiting(self) -> int:
        """Parked fetches (Kafka's Fetch purgatory size)."""
        return len(self._parked)

    def notify(self, tp: tuple[str, int] | None = None, *, appended: bool = False) -> None:
        """``tp`` got an append (``appended``) or a new high watermark; None wakes every fetch."""
        for listener in self.listeners:
            listener(tp)
        for future, (interest, appends_only) in list(self._parked.items()):
            if future.done() or (tp is not None and ((interest is not None and tp not in interest)
                                                     or (appends_only and not appended))):
                continue
            future.set_result(None)

    async def wait(self, timeout: float, interest: frozenset | set | None = None, appends_only: bool = False) -> None:
        """Sleep until a ``notify`` of a partition in ``interest`` (None: any), or ``timeout`` seconds."""
        if timeout <= 0:
            return
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._parked[future] = (interest, appends_only)
        # the future resolved at the deadline, not wait_for (its waiter and done callback cost the
        # woken fetch an extra event-loop iteration), nor a timer of its own (see deadlines)
        deadlines.on(loop).expire(future, timeout, deadlines.resolve)
        try:
            await future
        finally:
            del self._parked[future]
