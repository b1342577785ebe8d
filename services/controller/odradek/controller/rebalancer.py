"""The controller's rebalance: proposals (the balancer over the controller's own view) and the
execution of their moves (``odradek.balance.executor``) with its state in ZooKeeper
(``zk_data.REBALANCE``), resumed by whichever controller is active next.

Owns: the ``Port`` the executor drives here (reassignments through the ``Reassigner``, topic
throttle configs through ``TopicLifecycle``, broker throttle rates as ``/config/brokers/<id>``
writes, preferred elections through ``Elections``, the saved state through the store), the
routes' logic (``propose``, ``execute``, ``status``, ``stop``: docs/control-plane.md,
"Rebalance") and the loop that steps the execution every ``POLL_S`` while this instance is the
active controller (an election loads the saved state first: a failover resumes it).

Partition sizes and produce rates (the planner's disk and network goals) are asked of the live
brokers when a proposal is computed, not streamed: each broker's ``STATUS`` route lists its logs
with their sizes (the leader's size is what a new replica copies); the produce rate of a
partition is its size's growth since the previous proposal's read (0 on the first, or after
``RATE_WINDOW_S``). One request per broker per proposal, nothing in steady state.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Iterable, Mapping

from odradek.balance import Broker, ClusterModel, Partition
from odradek.balance.requests import plan_request, proposal_view
from odradek.balance.executor import POLL_S, Execution, Executor, Key, PartitionView
from odradek.cluster import control_plane as cp
from odradek.cluster import control_plane_rebalance as cpr
from odradek.cluster.control_plane_http import client_session, send
from odradek.errors import ErrorCode, KafkaError

from .context import ControllerContext
from .elections import Elections
from .reassigner import Reassigner
from .store import StoreSnapshot
from .topic_lifecycle import TopicLifecycle

log = logging.getLogger(__name__)
STATUS_TIMEOUT_S = 10.0
RATE_WINDOW_S = 600.0


class ControllerPort:
    """The executor's ``Port`` over the controller's own parts (each call as an admin request)."""

    def __init__(self, ctx: ControllerContext, reassigner: Reassigner, topics: TopicLifecycle,
                 elections: Elections) -> None:
        self._ctx, self._reassigner, self._topics, self._elections = ctx, reassigner, topics, elections

    async def reassign(self, targets: Mapping[Key, tuple[int, ...] | None]) -> dict[Key, str | None]:
        results = await self._reassigner.reassign([cp.Reassignment(t, p, r) for (t, p), r in targets.items()])
        return {(r.topic, r.partition): (None if r.error == ErrorCode.none else f"{r.error.name.upper()}: {r.message}")
                for r in results}

    async def ongoing(self) -> set[Key]:
        return {(r.topic, r.partition) for r in self._reassigner.ongoing()}

    async def partitions(self, keys: Iterable[Key]) -> dict[Key, PartitionView]:
        _, snapshot = self._ctx.require_active()
        return partition_views(snapshot, keys)

    async def alter_broker_configs(self, broker: int, configs: Mapping[str, str | None]) -> None:
        def change(config: dict[str, str]) -> dict[str, str]:
            for k, v in configs.items():
                if v is None:
                    config.pop(k, None)
                else:
                    config[k] = v
            return config
        async with self._ctx.acting():
            await self._ctx.write(self._ctx.store.alter_broker_config, str(broker), change)

    async def alter_topic_configs(self, topic: str, configs: Mapping[str, str | None]) -> None:
        set_ = {k: v for k, v in configs.items() if v is not None}
        await self._topics.alter_configs(topic, set_, [k for k, v in configs.items() if v is None], False)

    async def elect_preferred(self, keys: Iterable[Key]) -> None:
        await self._elections.elect_leaders(0, sorted(set(keys)))

    async def save(self, execution: dict) -> None:
        async with self._ctx.acting():
            await self._ctx.write(self._ctx.store.write_rebalance, execution)


def partition_views(snapshot: StoreSnapshot, keys: Iterable[Key]) -> dict[Key, PartitionView]:
    out = {}
    for t, p in keys:
        record = snapshot.topics.get(t)
        state = record.states.get(p) if record is not None else None
        if state is None:
            continue
        min_isr = int(snapshot.topic_config(record, "min.insync.replicas", "min.insync.replicas", "1"))
        out[(t, p)] = PartitionView(tuple(record.assignment.get(p, state.replicas)), tuple(state.isr), min_isr)
    return out


class Rebalancer:
    def __init__(self, ctx: ControllerContext, port: ControllerPort) -> None:
        self._ctx = ctx
        self._port = port
        self._executor: Executor | None = None
        self._loaded_epoch: int | None = None
        self._load_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._last_sizes: tuple[float, dict[Key, int]] | None = None

    # --- the routes ---------------------------------------------------------------------------
    async def propose(self, req: cpr.ProposalRequest) -> cpr.ProposalView:
        _, snapshot = self._ctx.require_active()
        sizes, rates = await self._partition_loads(snapshot)
        model = cluster_model(snapshot, sizes, rates)
        return proposal_view(plan_request(model, req, snapshot.live_ids))

    async def execute(self, req: cpr.ExecuteRequest) -> cpr.RebalanceStatus:
        executor = await self._loaded()
        status = await executor.start(req)
        log.info("rebalance %s: executing %d moves (%d bytes), throttle %s, concurrency %d", req.proposal_id,
                 len(req.moves), status.bytes_total, req.throttle_bytes_per_s, req.concurrency)
        self._wake.set()
        return status

    async def status(self) -> cpr.RebalanceStatus:
        return (await self._loaded()).status()

    async def stop(self) -> cpr.RebalanceStatus:
        status = await (await self._loaded()).stop()
        self._wake.set()
        return status

    # --- the loop -----------------------------------------------------------------------------
    async def loop(self) -> None:
        """Step the execution while active (a new election loads the saved state first)."""
        ctx = self._ctx
        while not ctx.stopping.is_set():
            self._wake.clear()
            try:
                if ctx.active:
                    executor = await self._loaded()
                    if executor.running:
                        await executor.step()
            except KafkaError as e:   # NOT_CONTROLLER, a lost race: the next round retries
                log.info("rebalance step postponed: %s", e.message)
            except Exception:   # noqa: BLE001 - a bug must not end the loop: logged, retried
                log.exception("rebalance step failed")
            await ctx.wait(self._wake, POLL_S)

    async def _loaded(self) -> Executor:
        """The executor with the state saved in ZooKeeper, read once per election."""
        record, _ = self._ctx.require_active()
        async with self._load_lock:
            if self._executor is None or self._loaded_epoch != record.epoch:
                saved = await self._ctx.write(self._ctx.store.read_rebalance)
                execution = Execution.from_json(saved) if saved else None
                self._executor = Executor(self._port, execution)
                self._loaded_epoch = record.epoch
                if execution is not None and execution.status().running:
                    log.info("resuming rebalance %s (%s): %d of %d moves done", execution.id, execution.state,
                             len(execution.done), len(execution.moves))
            return self._executor

    # --- partition sizes and rates ------------------------------------------------------------
    async def _partition_loads(self, snapshot: StoreSnapshot) -> tuple[dict[Key, int], dict[Key, float]]:
        async with client_session(self._ctx.settings.tls) as session:
            answers = await asyncio.gather(*(send(session, b.internal_url, cp.status(), STATUS_TIMEOUT_S)
                                             for b in snapshot.brokers), return_exceptions=True)
        sizes: dict[Key, int] = {}
        for answer in answers:
            if isinstance(answer, BaseException) or answer[0] >= 400:
                log.info("a broker's status was not readable for the proposal: %s", answer)
                continue
            for r in cp.BrokerStatus.from_json(answer[1]).partitions:
                key = (r.topic, r.partition)
                sizes[key] = max(sizes.get(key, 0), r.size)
        now, rates = time.monotonic(), {}
        if self._last_sizes is not None and 0 < now - self._last_sizes[0] < RATE_WINDOW_S:
            then, before = self._last_sizes
            rates = {k: max(0.0, (v - before.get(k, v)) / (now - then)) for k, v in sizes.items()}
        self._last_sizes = (now, sizes)
        return sizes, rates


def cluster_model(snapshot: StoreSnapshot, sizes: Mapping[Key, int], rates: Mapping[Key, float]) -> ClusterModel:
    brokers = tuple(Broker(b.id, b.rack) for b in snapshot.brokers)
    partitions = tuple(Partition(name, p, tuple(record.assignment[p]), state.leader, sizes.get((name, p), 0),
                                 rates.get((name, p), 0.0))
                       for name, record in sorted(snapshot.topics.items()) if name not in snapshot.pending_deletions
                       for p, state in sorted(record.states.items()) if p in record.assignment)
    return ClusterModel(brokers, partitions)
