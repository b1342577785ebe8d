"""Purgatories: requests parked until replication lets them finish (Kafka's DelayedProduce and
DelayedFetch, without a timer wheel: asyncio futures and events do the waking).

- ``ProducePurgatory`` (one per leader partition): acks=all produces wait until the high
  watermark reaches their last offset + 1. ``complete`` answers those that are due, with
  NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below ``min.insync.replicas`` meanwhile
  (Kafka's check at completion); ``fail_all`` answers every waiter with one error
  (leadership lost). The produce handler owns the request timeout.
- ``FetchWakeup`` (one per broker): long-polling fetches sleep on it; an append (new data for
  followers) or a high-watermark advance (new data for consumers) of a partition wakes the
  fetches reading it; each then re-checks its own partitions.

Event-loop thread only.
"""

from __future__ import annotations

import asyncio

from odradek.errors import ErrorCode


class ProducePurgatory:
    def __init__(self) -> None:
        self._waiting: list[tuple[int, asyncio.Future]] = []

    def __len__(self) -> int:
        return len(self._waiting)

    def park(self, required_offset: int) -> asyncio.Future:
        """A future resolved with an ErrorCode once the HW reaches ``required_offset``."""
        future = asyncio.get_running_loop().create_future()
        self._waiting.append((required_offset, future))
        return future

    def complete(self, high_watermark: int, isr_size: int, min_isr: int) -> None:
        if not self._waiting:
            return
        code = ErrorCode.none if isr_size >= min_isr else ErrorCode.not_enough_replicas_after_append
        kept = []
        for required, future in self._waiting:
            if future.done():
                continue
            if required <= high_watermark:
                future.set_result(code)
            else:
                kept.append((required, future))
        self._waiting = kept

    def fail_all(self, code: ErrorCode) -> None:
        waiting, self._waiting = self._waiting, []
        for _, future in waiting:
            if not future.done():
                future.set_result(code)


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
        future = asyncio.get_running_loop().create_future()
        self._parked[future] = (interest, appends_only)
        try:
            await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            del self._parked[future]
