"""Deadlines of parked requests on one loop timer (Kafka's purgatories share a timing wheel).

A long-polling fetch waits at most its ``max_wait`` and an acks=all produce its request timeout;
both are usually answered long before (in the single-record round trip, within a millisecond,
by the append or the follower fetch that moves the high watermark). A loop timer scheduled and
cancelled per parked request (``call_later``, ~3 us each in uvloop, and three per round trip:
both followers' fetches and the produce) was a few percent of the leader's CPU there. Here each
deadline is a heap entry, and one timer is armed for the earliest: a request answered before
its deadline leaves its entry behind, dropped when the timer reaches it or when the heap is
compacted, so that answering costs nothing and parking a heap push (the timer is re-armed only
for a deadline earlier than the one it is armed for).

``expire(future, delay, action)``: ``action(future)`` at ``delay`` seconds unless the future is
done by then (up to ``SLACK`` early: uvloop rounds its timers to the millisecond anyway).
One ``Deadlines`` per event loop (``on(loop)``). Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from typing import Callable

SLACK = 0.001               # a deadline this close is due (uvloop's timers fire up to half a millisecond early)
# entries kept before the answered ones are swept out (then twice the live ones): a sweep costs a
# pass over the heap, so it is paid for by the pushes since the last one, never per timer firing
# (thousands of parked consumer fetches, each its own deadline, fire the timer that often)
_COMPACT_FROM = 256


class Deadlines:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._heap: list[tuple[float, int, asyncio.Future, Callable[[asyncio.Future], object]]] = []
        self._order = itertools.count()   # ties broken by arrival, never by comparing futures
        self._timer: asyncio.TimerHandle | None = None
        self._armed_for = float("inf")
        self._compact_at = _COMPACT_FROM

    def __len__(self) -> int:
        return len(self._heap)

    def expire(self, future: asyncio.Future, delay: float, action: Callable[[asyncio.Future], object]) -> None:
        """Call ``action(future)`` once ``delay`` seconds have passed, unless ``future`` is done."""
        when = self.loop.time() + max(delay, 0.0)
        if len(self._heap) >= self._compact_at:
            self._compact()
        heapq.heappush(self._heap, (when, next(self._order), future, action))
        if when < self._armed_for:
            self._arm(when)

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._armed_for = when
        self._timer = self.loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._timer, self._armed_for = None, float("inf")
        if len(self._heap) >= self._compact_at:   # answered entries dropped in one pass, not popped one by one
            self._compact()
        heap = self._heap
        due = self.loop.time() + SLACK
        while heap and (heap[0][0] <= due or heap[0][2].done()):
            _, _, future, action = heapq.heappop(heap)
            if not future.done():
                action(future)
        if heap:
            self._arm(heap[0][0])

    def _compact(self) -> None:
        """Drop the entries of requests answered already (a heap of 30 s produce timeouts would
        otherwise hold every acks=all produce of the last 30 s), in one pass."""
        self._heap = [entry for entry in self._heap if not entry[2].done()]
        heapq.heapify(self._heap)
        self._compact_at = max(_COMPACT_FROM, 2 * len(self._heap))


_current: Deadlines | None = None


def on(loop: asyncio.AbstractEventLoop) -> Deadlines:
    """The deadlines of ``loop`` (a broker runs one loop; tests start a new one per run)."""
    global _current
    current = _current   # read once: another thread's loop may replace it meanwhile (each gets its own)
    if current is None or current.loop is not loop:
        current = _current = Deadlines(loop)
    return current


def resolve(future: asyncio.Future) -> None:
    """A waiter's expiry: woken with None (a parked fetch reads again and answers)."""
    if not future.done():
        future.set_result(None)


def cancel(future: asyncio.Future) -> None:
    """A request's expiry: its future cancelled (the produce answers REQUEST_TIMED_OUT)."""
    future.cancel()
