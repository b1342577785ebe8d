"""Test doubles for the group coordinator: a fake clock driving ``call_later`` timers, a
recording group store, and helpers to run scenarios on an event loop."""

from __future__ import annotations

import asyncio
import heapq
import itertools

from odradek.broker.group.membership import Membership, MembershipConfig


class _Handle:
    __slots__ = ("when", "fn", "args", "cancelled")

    def __init__(self, when, fn, args):
        self.when, self.fn, self.args, self.cancelled = when, fn, args, False

    def cancel(self):
        self.cancelled = True


class FakeClock:
    """``call_later`` in virtual seconds; ``advance`` fires due timers in order."""

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list = []
        self._seq = itertools.count()

    def call_later(self, delay, fn, *args):
        h = _Handle(self.now + delay, fn, args)
        heapq.heappush(self._heap, (h.when, next(self._seq), h))
        return h

    def ms(self) -> int:
        return int(round(self.now * 1000))

    async def advance(self, seconds: float) -> None:
        await settle()  # let tasks just created run (and schedule their timers) first
        target = self.now + seconds
        while self._heap and self._heap[0][0] <= target + 1e-9:
            when, _, h = heapq.heappop(self._heap)
            if h.cancelled:
                continue
            self.now = when
            h.fn(*h.args)
            await settle()
        self.now = target
        await settle()


async def settle(rounds: int = 10) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


class Store:
    """Records every ``store_group`` call: (group id, generation, assignments)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, dict]] = []
        self.fail_with = None

    async def __call__(self, group, assignments):
        if self.fail_with is not None:
            raise self.fail_with
        self.calls.append((group.group_id, group.generation, dict(assignments)))


def membership(delay_ms: int = 100, clock: FakeClock | None = None, store: Store | None = None,
               min_session_ms: int = 10) -> tuple[Membership, FakeClock, Store]:
    clock = clock or FakeClock()
    store = store or Store()
    config = MembershipConfig(initial_rebalance_delay_ms=delay_ms, min_session_timeout_ms=min_session_ms,
                              max_session_timeout_ms=600_000)
    return Membership(config, store, call_later=clock.call_later, now_ms=clock.ms), clock, store


PROTOCOLS = (("range", b"r-meta"), ("roundrobin", b"rr-meta"))


def join(m: Membership, member_id: str = "", *, group: str = "g", instance: str | None = None,
         session_ms: int = 1000, rebalance_ms: int = 2000, protocols=PROTOCOLS, client: str = "c",
         version: int = 4, protocol_type: str = "consumer") -> asyncio.Task:
    return asyncio.get_running_loop().create_task(m.join(
        group, member_id, instance, client, "/127.0.0.1", session_ms, rebalance_ms, protocol_type,
        protocols, require_known_member_id=version >= 4, skip_assignment=version >= 9))


def sync(m: Membership, member_id: str, generation: int, assignments: dict | None = None, *,
         group: str = "g", instance: str | None = None) -> asyncio.Task:
    return asyncio.get_running_loop().create_task(m.sync(
        group, generation, member_id, instance, "consumer", None, assignments or {}))


def run(coro):
    return asyncio.run(coro)
