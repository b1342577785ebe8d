"""ISR changes requested by leaders (Kafka's AlterPartition path, over our control plane).

The leader never writes the ISR itself: it asks the active controller
(``control_plane.ALTER_PARTITIONS`` with its broker epoch, leader epoch and the partition
epoch it based the change on), and the controller writes ZooKeeper by compare-and-set and
answers the new ``PartitionState`` (then pushes it to everyone).

- **Shrink**: ``run`` checks every ``replica.lag.time.max.ms / 2`` (as Kafka does) for ISR
  followers not caught up within the lag time and asks to remove them.
- **Expand**: ``expand`` is called on a follower fetch that reached the HW.
- One change in flight per partition (``Partition.pending_isr``), and one request in flight
  per broker carrying every change queued until it is sent (Kafka's AlterPartitionManager):
  a broker rejoining thousands of ISRs after a restart costs its leaders a few requests,
  not one per partition. An answer that fences a partition (FENCED_LEADER_EPOCH,
  INVALID_UPDATE_VERSION, NOT_LEADER_OR_FOLLOWER, STALE_BROKER_EPOCH) blocks its further
  changes until the next snapshot; any other refusal (INELIGIBLE_REPLICA: a returning broker
  the controller does not see live yet) retries after ``RETRY_BACKOFF_MS``.
- While a change is pending the HW counts its *maximal ISR* (partition.py). It stays pending,
  as Kafka's does, whenever the controller may have made it without this leader adopting the
  result: an answer naming another leader or a newer leader epoch (the change completed a
  reassignment that elected the replica it added), NOT_LEADER_OR_FOLLOWER or
  FENCED_LEADER_EPOCH to a change adding a replica, or no answer at all (sent again every
  ``RETRY_BACKOFF_MS``); the snapshot that follows clears it. Dropping it earlier let a leader
  acknowledge records the newly elected replica lacked (lost records; an idempotent
  producer's retry answered OUT_OF_ORDER_SEQUENCE_NUMBER by the new leader).

Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import Awaitable, Callable, Iterable

from odradek import logs
from odradek.broker.replication.partition import Partition
from odradek.cluster import control_plane as cp
from odradek.cluster.model import PartitionState
from odradek.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

ALTER_TIMEOUT_S = 15.0  # a request of thousands of partitions while the controller is busy
RETRY_BACKOFF_MS = 500
_WAIT_FOR_SNAPSHOT = {ErrorCode.fenced_leader_epoch, ErrorCode.invalid_update_version,
                      ErrorCode.not_leader_or_follower, ErrorCode.stale_broker_epoch}
_MOVED_ON = {ErrorCode.fenced_leader_epoch, ErrorCode.not_leader_or_follower}  # another leader or epoch now

Call = Callable[..., Awaitable[cp.AlterPartitionResults]]  # ControllerClient.call
Change = tuple[Partition, PartitionState, tuple[int, ...]]  # the partition, the state it is based on, the new ISR


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class IsrManager:
    def __init__(self, broker_id: int, call: Call, broker_epoch: Callable[[], int], lag_ms: int,
                 on_change: Callable[[Partition], None]) -> None:
        self.broker_id = broker_id
        self._call = call
        self._broker_epoch = broker_epoch
        self.lag_ms = lag_ms
        self._on_change = on_change
        self._unsent: dict[tuple[str, int], Change] = {}  # insertion-ordered: oldest first
        self._sender: asyncio.Task | None = None
        self._resends: set[asyncio.TimerHandle] = set()  # unanswered changes, sent again after the backoff
        self.shrinks = 0  # ISR changes this leader made (Kafka's IsrShrinksPerSec / IsrExpandsPerSec counts)
        self.expands = 0

    async def run(self, partitions: Callable[[], Iterable[Partition]], stop: asyncio.Event) -> None:
        """The shrink check, every lag/2 until ``stop``."""
        interval = max(self.lag_ms / 2000, 0.05)
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), interval)
            except asyncio.TimeoutError:
                pass
            now = now_ms()
            for partition in list(partitions()):
                if not partition.may_alter(now):
                    continue
                lagging = partition.lagging(now, self.lag_ms)
                if lagging:
                    log.info("%s-%d: followers %s are not caught up within %d ms: leaving the ISR",
                             partition.topic, partition.index, list(lagging), self.lag_ms,
                             extra=logs.tp(partition.topic, partition.index))
                    self._submit(partition, tuple(r for r in partition.isr if r not in lagging))

    def expand(self, partition: Partition, replica_id: int) -> None:
        if replica_id in partition.isr:   # every fetch of an in-sync follower: nothing to decide
            return
        if partition.may_alter(now_ms()) and partition.may_join(replica_id):
            log.info("%s-%d: follower %d caught up: joining the ISR", partition.topic, partition.index, replica_id,
                     extra=logs.tp(partition.topic, partition.index))
            self._submit(partition, partition.isr + (replica_id,))

    def _submit(self, partition: Partition, isr: tuple[int, ...]) -> None:
        partition.pending_isr = isr
        self._queue((partition, partition.state, isr))

    def _queue(self, change: Change) -> None:
        self._unsent[change[0].key] = change
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(self._send_all(), name="alter-partitions")

    async def _send_all(self) -> None:
        """Send what is queued, one request at a time, until nothing is (what queues while a
        request is in flight goes in the next)."""
        while self._unsent:
            keys = list(itertools.islice(self._unsent, cp.MAX_ALTER_PARTITIONS))
            # A snapshot since queueing (it clears pending_isr) made the change moot.
            batch = [item for item in map(self._unsent.pop, keys) if item[0].pending_isr == item[2]]
            if batch:
                await self._send(batch)

    async def _send(self, batch: list[Change]) -> None:
        epoch = self._broker_epoch()
        req = cp.AlterPartitions(self.broker_id, epoch, tuple(
            cp.AlterPartition(self.broker_id, epoch, p.topic, p.index, based_on.leader_epoch,
                              based_on.partition_epoch, isr) for p, based_on, isr in batch))
        try:
            answer = await self._call(cp.alter_partitions(req), timeout=ALTER_TIMEOUT_S)
        except KafkaError as e:  # the whole request (an unreachable controller): one line, not one a partition
            log.info("ISR changes of %d partitions not answered (%s: %s); sending them again", len(batch),
                     e.code.name.upper(), e.message)
            for change in batch:
                self._unanswered(change)
            return
        except Exception as e:  # noqa: BLE001 - an unreadable answer, a bug: sent again, not dropped
            log.warning("alter-partitions request failed: %r", e)
            answer = cp.AlterPartitionResults(())
        results = {(r.topic, r.partition): r for r in answer.results}
        for change in batch:
            partition = change[0]
            result = results.get((partition.topic, partition.index))
            if result is None:
                self._unanswered(change)
            elif result.error != ErrorCode.none:
                error = KafkaError(result.error, result.message or "")
                log.info("%s-%d: ISR change to %s refused (%s: %s)%s", partition.topic, partition.index,
                         list(change[2]), error.code.name.upper(), error.message,
                         "; waiting for the next snapshot" if error.code in _WAIT_FOR_SNAPSHOT else "; retrying")
                self._refused(*change, error)
            else:
                self._accepted(*change, result.state)

    def _unanswered(self, change: Change) -> None:
        """No answer (an unreachable controller, a timeout): the controller may have made the
        change, so it stays pending (the HW keeps counting a replica being added, which may lead
        by now) and goes again after the backoff, as Kafka's AlterPartitionManager resends it."""
        def resend() -> None:
            self._resends.discard(handle)
            if change[0].leading and change[0].pending_isr == change[2]:  # no snapshot settled it meanwhile
                self._queue(change)
        handle = asyncio.get_running_loop().call_later(RETRY_BACKOFF_MS / 1000, resend)
        self._resends.add(handle)

    def _refused(self, partition: Partition, based_on: PartitionState, isr: tuple[int, ...], e: KafkaError) -> None:
        """Not made. After NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH a change adding a replica
        stays pending: an earlier attempt that was never answered may have made it before the
        controller moved leadership on (maybe to that replica), and the snapshot that follows (a
        follower, or our new epoch) clears it. A shrink's pending ISR counts nothing more than the
        ISR it was based on: it goes at once."""
        adds = not set(isr) <= set(based_on.isr)
        if partition.pending_isr == isr and not (adds and e.code in _MOVED_ON):
            partition.pending_isr = None
            if e.code in _WAIT_FOR_SNAPSHOT:
                partition.alter_fenced = partition.state is based_on
            else:
                partition.alter_retry_ms = now_ms() + RETRY_BACKOFF_MS
        self._on_change(partition)

    def _accepted(self, partition: Partition, based_on: PartitionState, isr: tuple[int, ...],
                  state: PartitionState) -> None:
        """The controller made the change. Its answer is adopted when it is still our leadership
        at our leader epoch. When the controller has moved on since (this very change completed
        a reassignment that elected the replica just added), the change stays pending until
        the snapshot makes us a follower: the HW keeps counting the added replica, which may
        lead now, so no produce is acknowledged that it lacks (Kafka keeps its pending ISR
        when the answer's leader epoch is not its own)."""
        stale = partition.is_stale(state)  # a newer snapshot came first: it is the controller's word
        adopted = not stale and partition.leading and state.leader == self.broker_id \
            and state.leader_epoch == partition.leader_epoch
        if (stale or adopted) and partition.pending_isr == isr:
            partition.pending_isr = None
        if adopted:
            if len(state.isr) < len(based_on.isr):
                self.shrinks += 1
            elif len(state.isr) > len(based_on.isr):
                self.expands += 1
            partition.state = state
            log.info("%s-%d: ISR is now %s (partition epoch %d)", partition.topic, partition.index,
                     list(state.isr), state.partition_epoch, extra=logs.tp(partition.topic, partition.index))
        self._on_change(partition)

    async def close(self) -> None:
        for handle in self._resends:
            handle.cancel()
        self._resends.clear()
        if self._sender is not None:
            self._sender.cancel()
            await asyncio.gather(self._sender, return_exceptions=True)
