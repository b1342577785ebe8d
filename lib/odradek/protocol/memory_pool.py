"""The memory pool for request bytes read and not yet handled (Kafka's KIP-72,
``queued.max.request.bytes``), shared by every connection of a listener.

A connection reserves a frame's size before it allocates the frame's buffer (large frames) or
copies the frame out of its receive buffer (small ones), and releases it once the request has
been handled. A reservation that does not fit is refused; the connection then mutes itself
(stops reading its socket) and waits in the pool's queue; every release wakes, in arrival
order, the waiters whose frame now fits.

The bound is strict: a frame fits when the bytes reserved plus its size stay within the
capacity, or when nothing at all is reserved (so a frame larger than the pool is still served,
alone). Reserved bytes therefore never exceed ``max(capacity, socket.request.max.bytes)``.
Unlike Kafka's non-strict pool (which admits any frame while one byte is free), a large frame
that does not fit does not block the small requests of other connections: they are admitted
while they fit, which keeps ordinary clients served while hostile ones hold large frames.
A capacity of 0 or less is unbounded, as Kafka's ``-1`` is (``MemoryPool.NONE``).

Event-loop thread only.
"""

from __future__ import annotations

from typing import Callable


class MemoryPool:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity if capacity > 0 else None
        self.reserved = 0
        self._waiters: dict[object, tuple[int, Callable[[], None]]] = {}  # insertion order = arrival

    def fits(self, size: int) -> bool:
        return self.capacity is None or self.reserved == 0 or self.reserved + size <= self.capacity

    def try_reserve(self, size: int) -> bool:
        if self.capacity is not None and self.reserved and self.reserved + size > self.capacity:
            return False
        self.reserved += size
        return True

    def release(self, size: int) -> None:
        self.reserved -= size
        if self._waiters:
            self._wake()

    def wait(self, owner: object, size: int, wake: Callable[[], None]) -> None:
        """Call ``wake()`` once ``size`` bytes fit (the owner then reserves them itself)."""
        self._waiters[owner] = (size, wake)

    def forget(self, owner: object) -> None:
        self._waiters.pop(owner, None)

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def _wake(self) -> None:
        for owner, (size, wake) in list(self._waiters.items()):
            if owner in self._waiters and self.fits(size):
                del self._waiters[owner]
                wake()
