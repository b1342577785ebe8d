"""Runs a ``Proposal`` the way ``kafka-reassign-partitions --execute --throttle`` then
``--verify`` do, in batches.

A ``ClusterPort`` is what the executor needs from a cluster: start or cancel reassignments
(Kafka's AlterPartitionReassignments), the running ones (ListPartitionReassignments), each
partition's replicas and ISR, configs (IncrementalAlterConfigs) and preferred-leader elections.

- Throttle, as Kafka's command sets it for the whole plan before the first move: on every
  broker the plan involves, ``leader.replication.throttled.rate`` and
  ``follower.replication.throttled.rate``; per topic, ``leader.replication.throttled.replicas``
  lists every current replica of its moving partitions (``partition:broker``) and
  ``follower.replication.throttled.replicas`` the replicas being added. Removed once every
  move is done (what ``--verify`` does), or on ``stop``.
- Batches: at most ``concurrency`` partitions move at once; a partition starts only when its
  ISR holds every current replica (a move never starts on an under-replicated partition), and
  Kafka's reassignment adds the new replicas, waits for them in the ISR, then drops the old
  ones, so the ISR never falls below what it was (tests/scale/test_rebalance.py).
- Reorderings (leadership only) go in one request: Kafka completes them at once.
- Last, a preferred-leader election on every partition the plan touched.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable, Protocol

from odradek.balance import Move, Proposal

Key = tuple[str, int]
BROKER_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
TOPIC_REPLICAS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
POLL_S = 0.5


class ClusterPort(Protocol):
    def reassign(self, targets: dict[Key, tuple[int, ...] | None]) -> dict[Key, str | None]: ...
    def ongoing(self) -> set[Key]: ...
    def replicas_and_isr(self, keys: Iterable[Key]) -> dict[Key, tuple[tuple[int, ...], tuple[int, ...]]]: ...
    def alter_broker_configs(self, broker: int, configs: dict[str, str | None]) -> None: ...
    def alter_topic_configs(self, topic: str, configs: dict[str, str | None]) -> None: ...
    def elect_preferred(self, keys: Iterable[Key]) -> None: ...


def throttled_replicas(moves: Iterable[Move]) -> dict[str, tuple[str, str]]:
    """Per topic, Kafka's (leader, follower) throttled-replica lists for ``moves``: every
    current replica may lead the copy; the added replicas follow."""
    leaders: dict[str, list[str]] = defaultdict(list)
    followers: dict[str, list[str]] = defaultdict(list)
    for m in moves:
        leaders[m.topic] += [f"{m.partition}:{b}" for b in m.before]
        followers[m.topic] += [f"{m.partition}:{b}" for b in m.adding]
    return {t: (",".join(leaders[t]), ",".join(followers[t])) for t in leaders}


def involved_brokers(moves: Iterable[Move]) -> list[int]:
    return sorted({b for m in moves for b in (*m.before, *m.after)})


def set_throttle(port: ClusterPort, moves: list[Move], rate: int) -> None:
    for broker in involved_brokers(moves):
        port.alter_broker_configs(broker, {k: str(rate) for k in BROKER_RATES})
    for topic, (lead, follow) in throttled_replicas(moves).items():
        port.alter_topic_configs(topic, dict(zip(TOPIC_REPLICAS, (lead, follow))))


def clear_throttle(port: ClusterPort, moves: list[Move]) -> None:
    for topic in sorted({m.topic for m in moves}):
        port.alter_topic_configs(topic, dict.fromkeys(TOPIC_REPLICAS))
    for broker in involved_brokers(moves):
        port.alter_broker_configs(broker, dict.fromkeys(BROKER_RATES))


@dataclass
class Progress:
    total: int
    done: int = 0
    bytes_done: int = 0
    running: int = 0
    errors: tuple[str, ...] = ()

    def line(self, bytes_total: int) -> str:
        return (f"{self.done}/{self.total} partitions moved ({self.bytes_done}/{bytes_total} bytes), "
                f"{self.running} moving")


class StopRequested(Exception):
    """``should_stop`` said so: running moves were cancelled, the throttle removed."""


def execute(port: ClusterPort, proposal: Proposal, *, concurrency: int = 5, throttle: int | None = None,
            report: Callable[[str], None] = print, should_stop: Callable[[], bool] = lambda: False,
            timeout: float = 3600.0) -> Progress:
    """Run ``proposal``; returns the final progress (``errors`` names refused moves)."""
    data = [m for m in proposal.moves if m.adding or m.removing]
    reorders = [m for m in proposal.moves if not (m.adding or m.removing)]
    progress = Progress(len(data))
    errors: list[str] = []
    if throttle:
        set_throttle(port, data, throttle)
    try:
        if reorders:
            errors += _start(port, reorders)
        _run_batches(port, data, proposal.bytes_to_move, concurrency, progress, errors, report, should_stop,
                     time.monotonic() + timeout)
    finally:
        if throttle:
            clear_throttle(port, data)
    port.elect_preferred([(m.topic, m.partition) for m in proposal.moves])
    progress.errors = tuple(errors)
    return progress


def _start(port: ClusterPort, moves: list[Move]) -> list[str]:
    results = port.reassign({(m.topic, m.partition): m.after for m in moves})
    return [f"{t}-{p}: {e}" for (t, p), e in sorted(results.items()) if e]


def _run_batches(port: ClusterPort, data: list[Move], bytes_total: int, concurrency: int, progress: Progress,
                 errors: list[str], report: Callable[[str], None], should_stop: Callable[[], bool],
                 deadline: float) -> None:
    pending = list(data)
    running: dict[Key, Move] = {}
    while pending or running:
        if should_stop():
            port.reassign(dict.fromkeys(running))
            raise StopRequested(f"stopped: {len(running)} running moves cancelled, {len(pending)} not started")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the plan did not finish in time: {progress.line(bytes_total)}")
        _fill(port, pending, running, concurrency, errors)
        ongoing = port.ongoing()
        for key in [k for k in running if k not in ongoing]:
            move = running.pop(key)
            progress.done += 1
            progress.bytes_done += move.bytes_to_move
        progress.running = len(running)
        report(progress.line(bytes_total))
        if running:
            time.sleep(POLL_S)


def _fill(port: ClusterPort, pending: list[Move], running: dict[Key, Move], concurrency: int,
          errors: list[str]) -> None:
    """Start the next moves whose partitions are fully in sync, up to ``concurrency``."""
    room = concurrency - len(running)
    if room <= 0 or not pending:
        return
    states = port.replicas_and_isr((m.topic, m.partition) for m in pending[:room * 4])
    batch = []
    for m in list(pending):
        if len(batch) >= room:
            break
        replicas, isr = states.get((m.topic, m.partition), ((), ()))
        if replicas and set(replicas) <= set(isr):
            batch.append(m)
            pending.remove(m)
    if not batch:
        return
    refused = dict((e.split(": ", 1)[0], e) for e in _start(port, batch))
    for m in batch:
        name = f"{m.topic}-{m.partition}"
        if name in refused:
            errors.append(refused[name])
        else:
            running[(m.topic, m.partition)] = m
