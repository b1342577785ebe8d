"""How idle a pool of workers is, and how many tasks wait for one: Kafka's ``...AvgIdlePercent``
and ``...TaskQueueSize`` gauges (RemoteLogManagerTasksAvgIdlePercent, RemoteLogReaderAvgIdlePercent,
RemoteLogReaderTaskQueueSize; docs/observability.md).

- ``BusyTime``: the seconds ``capacity`` workers spent working over the last one to two windows
  (``WINDOW_S`` each, as the request-time quantiles), work still in progress counted up to now;
  ``idle()`` is 1 - busy / (capacity x elapsed), a fraction from 0 to 1 as Kafka's gauges are
  (their "Percent" is Yammer's naming, their values are fractions).
- ``MeteredExecutor``: a ThreadPoolExecutor that keeps a ``BusyTime`` of its threads and counts
  the tasks submitted and not yet started (``queued``).

Thread-safe: worker threads report their work while the event loop (a scrape) reads; one lock.
"""

from __future__ import annotations

import itertools
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable

__all__ = ["BusyTime", "MeteredExecutor", "WINDOW_S"]

WINDOW_S = 60.0


class BusyTime:
    def __init__(self, capacity: int, window_s: float = WINDOW_S, clock: Callable[[], float] = time.monotonic):
        self.capacity = capacity
        self.window_s = window_s
        self.clock = clock
        self._lock = threading.Lock()
        now = clock()
        self._previous_start = self._current_start = now
        self._previous = self._current = 0.0     # busy seconds ended within each window
        self._running: dict[int, float] = {}     # work in progress: token -> started
        self._tokens = itertools.count()

    def begin(self) -> int:
        with self._lock:
            token = next(self._tokens)
            self._running[token] = self.clock()
            return token

    def end(self, token: int) -> None:
        with self._lock:
            started = self._running.pop(token)
            now = self._rotate()
            # split the work between the windows it ran in; before the previous one it is forgotten
            self._current += now - max(started, self._current_start)
            self._previous += max(0.0, self._current_start - max(started, self._previous_start))

    def idle(self) -> float:
        """The idle fraction since the previous window began (0 to 1)."""
        with self._lock:
            now = self._rotate()
            busy = self._previous + self._current + sum(now - max(s, self._previous_start)
                                                        for s in self._running.values())
            elapsed = now - self._previous_start
            running = bool(self._running)
        if elapsed <= 0:
            return 0.0 if running else 1.0
        return min(1.0, max(0.0, 1.0 - busy / (self.capacity * elapsed)))

    def _rotate(self) -> float:
        """Now, after moving the windows on (aligned to the first one's start)."""
        now = self.clock()
        passed = int((now - self._current_start) // self.window_s)
        if passed >= 1:
            if passed == 1:
                self._previous, self._previous_start = self._current, self._current_start
            else:   # a whole window passed without any work ending in it
                self._previous, self._previous_start = 0.0, self._current_start + (passed - 1) * self.window_s
            self._current, self._current_start = 0.0, self._current_start + passed * self.window_s
        return now


class MeteredExecutor(ThreadPoolExecutor):
    """A thread pool whose busy time and waiting tasks the metrics read (Kafka's RemoteStorageThreadPool)."""

    def __init__(self, max_workers: int, **kwargs) -> None:
        super().__init__(max_workers, **kwargs)
        self.busy = BusyTime(max_workers)
        self._queued = 0
        self._lock = threading.Lock()

    @property
    def queued(self) -> int:
        """Tasks submitted and not yet started."""
        return self._queued

    def submit(self, fn, /, *args, **kwargs) -> Future:
        self._add(1)
        try:
            future = super().submit(self._run, fn, args, kwargs)
        except BaseException:
            self._add(-1)
            raise
        # a task cancelled before it started never runs ``_run``: it leaves the queue here
        future.add_done_callback(lambda f: f.cancelled() and self._add(-1))
        return future

    def _run(self, fn, args, kwargs):
        self._add(-1)
        token = self.busy.begin()
        try:
            return fn(*args, **kwargs)
        finally:
            self.busy.end(token)

    def _add(self, n: int) -> None:
        with self._lock:
            self._queued += n
