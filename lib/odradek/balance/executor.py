"""The rebalance executor: runs a proposal's moves in batches under Kafka's replication throttle,
as a state machine whose whole state (``Execution``) is saved after every change, so that whoever
holds it next (the next active controller) resumes where it stopped.

One implementation for every place a plan runs: the controller drives it over its own
Reassigner, config writes and ZooKeeper (``odradek.controller.rebalancer``); ``odradek rebalance
--bootstrap-server`` drives it in-process over Kafka's admin API (``odradek.rebalance.kafka_port``,
not resumable). Both are a ``Port``.

What a step does (``Executor.step``, called every ``POLL_S`` while running):

- throttle, once, before the first move (as ``kafka-reassign-partitions --execute --throttle``):
  on every broker the plan involves ``leader/follower.replication.throttled.rate``; per topic
  ``leader.replication.throttled.replicas`` = every current replica of its moving partitions,
  ``follower.replication.throttled.replicas`` = the replicas being added; removed at the end
  or on stop (what ``--verify`` does);
- moves whose reassignment is no longer running are done (their replicas are the targets) or
  failed (someone else changed them);
- at most ``concurrency`` moves run at once; a move starts only when its partition's replica
  list is still the move's ``before``, every current replica is in the ISR, and its ``after``
  has at least ``min.insync.replicas`` replicas. Kafka's reassignment adds the targets, completes
  only once every target is in the ISR, then drops the others: the ISR never shrinks below the
  full replica set it started from, and ends as the full target set;
- stop: the running reassignments are cancelled (Kafka's cancellation restores their original
  replicas), the throttle removed, state ``stopped``;
- at the end: the throttle removed, a preferred-leader election on every moved partition, state
  ``completed``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Protocol

from odradek.cluster.control_plane_rebalance import ExecuteRequest, MoveView, RebalanceStatus
from odradek.errors import ErrorCode, KafkaError

Key = tuple[str, int]
BROKER_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
TOPIC_REPLICAS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
POLL_S = 0.5


@dataclass(frozen=True, slots=True)
class PartitionView:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    min_isr: int = 1


class Port(Protocol):
    """What the executor needs of a cluster (every call may raise; the step is then retried)."""

    async def reassign(self, targets: Mapping[Key, tuple[int, ...] | None]) -> dict[Key, str | None]: ...
    async def ongoing(self) -> set[Key]: ...
    async def partitions(self, keys: Iterable[Key]) -> dict[Key, PartitionView]: ...
    async def alter_broker_configs(self, broker: int, configs: Mapping[str, str | None]) -> None: ...
    async def alter_topic_configs(self, topic: str, configs: Mapping[str, str | None]) -> None: ...
    async def elect_preferred(self, keys: Iterable[Key]) -> None: ...
    async def save(self, execution: dict) -> None: ...


def adding(m: MoveView) -> tuple[int, ...]:
    return tuple(r for r in m.after if r not in m.before)


def throttled_replicas(moves: Iterable[MoveView]) -> dict[str, tuple[str, str]]:
    """Per topic, Kafka's (leader, follower) throttled-replica lists: every current replica may
    lead the copy; the added replicas follow."""
    leaders: dict[str, list[str]] = defaultdict(list)
    followers: dict[str, list[str]] = defaultdict(list)
    for m in moves:
        leaders[m.topic] += [f"{m.partition}:{b}" for b in m.before]
        followers[m.topic] += [f"{m.partition}:{b}" for b in adding(m)]
    return {t: (",".join(leaders[t]), ",".join(followers[t])) for t in leaders}


def involved_brokers(moves: Iterable[MoveView]) -> list[int]:
    return sorted({b for m in moves for b in (*m.before, *m.after)})


@dataclass
class Execution:
    """The executor's whole state (saved as JSON: ``zk_data.REBALANCE`` in the controller)."""

    id: str
    moves: tuple[MoveView, ...]
    throttle: int | None
    concurrency: int
    state: str = "executing"
    done: list[int] = field(default_factory=list)      # indices into ``moves``
    running: list[int] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)
    throttle_set: bool = False
    started_ms: int = 0
    finished_ms: int | None = None
    error: str | None = None

    def key(self, i: int) -> Key:
        return (self.moves[i].topic, self.moves[i].partition)

    def pending(self) -> list[int]:
        taken = {*self.done, *self.running, *self.failed}
        return [i for i in range(len(self.moves)) if i not in taken]

    def status(self) -> RebalanceStatus:
        error = self.error or ("; ".join(f"{m.topic}-{m.partition}: {e}" for i, e in sorted(self.failed.items())
                                         for m in (self.moves[i],)) or None)
        return RebalanceStatus(self.id, self.state, len(self.moves), len(self.done), len(self.running),
                               sum(m.bytes for m in self.moves), sum(self.moves[i].bytes for i in self.done),
                               self.throttle, self.started_ms, self.finished_ms, error)

    def to_json(self) -> dict:
        return {"id": self.id, "moves": [m.to_json() for m in self.moves], "throttle": self.throttle,
                "concurrency": self.concurrency, "state": self.state, "done": self.done, "running": self.running,
                "failed": {str(i): e for i, e in self.failed.items()}, "throttle_set": self.throttle_set,
                "started_ms": self.started_ms, "finished_ms": self.finished_ms, "error": self.error}

    @classmethod
    def from_json(cls, d: Mapping) -> "Execution":
        return cls(d["id"], tuple(MoveView.from_json(m) for m in d["moves"]), d.get("throttle"),
                   int(d["concurrency"]), d["state"], list(d["done"]), list(d["running"]),
                   {int(i): e for i, e in d.get("failed", {}).items()}, bool(d.get("throttle_set")),
                   int(d.get("started_ms") or 0), d.get("finished_ms"), d.get("error"))


def _now_ms() -> int:
    return int(time.time() * 1000)


class Executor:
    def __init__(self, port: Port, execution: Execution | None = None, clock=_now_ms) -> None:
        self.port = port
        self.execution = execution
        self.clock = clock

    def status(self) -> RebalanceStatus:
        return RebalanceStatus() if self.execution is None else self.execution.status()

    @property
    def running(self) -> bool:
        return self.execution is not None and self.execution.status().running

    async def start(self, req: ExecuteRequest) -> RebalanceStatus:
        """Check the moves against the cluster now, save the new execution. REASSIGNMENT_IN_PROGRESS
        while one runs; INVALID_REPLICA_ASSIGNMENT when a move's ``before`` is stale."""
        if self.running:
            raise KafkaError(ErrorCode.reassignment_in_progress,
                             f"rebalance {self.execution.id} is {self.execution.state}; stop it first")
        views = await self.port.partitions((m.topic, m.partition) for m in req.moves)
        for m in req.moves:
            view = views.get((m.topic, m.partition))
            if view is None:
                raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{m.topic}-{m.partition} does not exist")
            if view.replicas != m.before:
                raise KafkaError(ErrorCode.invalid_replica_assignment,
                                 f"{m.topic}-{m.partition} has replicas {list(view.replicas)}, not the proposal's "
                                 f"{list(m.before)}: the proposal is stale, ask for a new one")
        execution = Execution(req.proposal_id, req.moves, req.throttle_bytes_per_s, req.concurrency,
                              started_ms=self.clock())
        if not req.moves:
            execution.state, execution.finished_ms = "completed", execution.started_ms
        await self.port.save(execution.to_json())
        self.execution = execution
        return execution.status()

    async def stop(self) -> RebalanceStatus:
        """No new move starts; the next step cancels the running ones. Idempotent."""
        e = self.execution
        if e is not None and e.state == "executing":
            e.state = "stopping"
            await self.port.save(e.to_json())
        return self.status()

    async def step(self) -> bool:
        """One round; True while the execution still runs."""
        e = self.execution
        if e is None or e.state not in ("executing", "stopping"):
            return False
        before = e.to_json()
        if e.state == "executing" and e.throttle and not e.throttle_set:
            await self._set_throttle(e)
            e.throttle_set = True
            await self.port.save(e.to_json())
        await self._collect(e)
        if e.state == "stopping":
            if e.running:
                await self.port.reassign({e.key(i): None for i in e.running})
                e.running = []
            await self._finish(e, "stopped")
        else:
            await self._fill(e)
            if not e.running and not e.pending():
                await self._finish(e, "completed")
        if e.to_json() != before:
            await self.port.save(e.to_json())
        return e.state in ("executing", "stopping")

    async def _collect(self, e: Execution) -> None:
        """Moves no longer reassigning: done if their replicas are the targets, else failed."""
        if not e.running:
            return
        ongoing = await self.port.ongoing()
        finished = [i for i in e.running if e.key(i) not in ongoing]
        if not finished:
            return
        views = await self.port.partitions(e.key(i) for i in finished)
        for i in finished:
            e.running.remove(i)
            view = views.get(e.key(i))
            if view is not None and view.replicas == e.moves[i].after:
                e.done.append(i)
            else:
                e.failed[i] = f"replicas are {list(view.replicas) if view else 'gone'}, not the target"

    async def _fill(self, e: Execution) -> None:
        room = e.concurrency - len(e.running)
        pending = e.pending()
        if room <= 0 or not pending:
            return
        window = pending[:room * 4]
        views = await self.port.partitions(e.key(i) for i in window)
        batch: list[int] = []
        for i in window:
            if len(batch) >= room:
                break
            m, view = e.moves[i], views.get(e.key(i))
            if view is None:
                e.failed[i] = "the partition no longer exists"
            elif view.replicas == m.after:
                e.done.append(i)
            elif view.replicas != m.before:
                e.failed[i] = f"replicas changed to {list(view.replicas)} since the proposal"
            elif len(m.after) < view.min_isr:
                e.failed[i] = f"{len(m.after)} replicas would be fewer than min.insync.replicas={view.min_isr}"
            elif set(view.replicas) <= set(view.isr):
                batch.append(i)
            # else: under-replicated now; it starts once its ISR is full again
        if not batch:
            return
        results = await self.port.reassign({e.key(i): e.moves[i].after for i in batch})
        for i in batch:
            error = results.get(e.key(i))
            if error:
                e.failed[i] = error
            else:
                e.running.append(i)

    async def _finish(self, e: Execution, state: str) -> None:
        if e.throttle_set:
            await self._clear_throttle(e)
            e.throttle_set = False
        if e.done:
            await self.port.elect_preferred(e.key(i) for i in e.done)
        e.state, e.finished_ms = state, self.clock()

    async def _set_throttle(self, e: Execution) -> None:
        rate = str(e.throttle)
        for broker in involved_brokers(e.moves):
            await self.port.alter_broker_configs(broker, dict.fromkeys(BROKER_RATES, rate))
        for topic, (lead, follow) in throttled_replicas(e.moves).items():
            await self.port.alter_topic_configs(topic, dict(zip(TOPIC_REPLICAS, (lead, follow))))

    async def _clear_throttle(self, e: Execution) -> None:
        for topic in sorted({m.topic for m in e.moves}):
            await self.port.alter_topic_configs(topic, dict.fromkeys(TOPIC_REPLICAS))
        for broker in involved_brokers(e.moves):
            await self.port.alter_broker_configs(broker, dict.fromkeys(BROKER_RATES))

