"""A coordinator's internal topic (``__consumer_offsets``, ``__transaction_state``): asking the
controller to create it, and the coordinator's writes to it.

``InternalTopic.ensure`` is what FindCoordinator calls while the topic is missing: it starts
one creation task (the configured replication factor, the topic configs given) and starts
another only once that one is done and ``_CREATE_RETRY_S`` has passed. As Kafka's (since
KAFKA-3959), the topic is not created while fewer brokers are live than its replication
factor, nor with a lower factor when the controller sees fewer: FindCoordinator answers
COORDINATOR_NOT_AVAILABLE until enough are (a topic made during a roll with the brokers up then
kept that factor for ever: at RF 1, below ``min.insync.replicas``, no group could store a
generation again). ``InternalTopic.append`` is the coordinator's writer: the leader append at
acks=all, answered once the high watermark passes the batch.
``completes_if_cancelled`` guards a coordinator's request whose state change spans an append.
``replay`` is how a coordinator loads a partition it comes to lead: every batch from the log
start to the log end, read in 1 MiB chunks with a yield to the event loop between chunks so
that a large partition never stalls the broker. ``SkippedRecords`` is how a loading coordinator
survives a record it cannot parse (counted, logged once per load, skipped: never a reason to
resign the partition's groups or transactions).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import struct
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Callable, Mapping, TypeVar

from odradek.cluster import control_plane as cp
from odradek.errors import ErrorCode, KafkaError
from odradek.records import Record, RecordBatch, iter_batches, iter_records

from odradek.broker.replication.txn_guard import Origin

if TYPE_CHECKING:
    from odradek.broker.controller_client import ControllerClient
    from odradek.broker.partitions import ReplicaManager

log = logging.getLogger(__name__)
E = ErrorCode

# Kafka's mapping of internal-topic append errors to what coordinator clients understand
APPEND_ERRORS = {
    E.unknown_topic_or_partition: E.coordinator_not_available,
    E.not_enough_replicas: E.coordinator_not_available,
    E.not_enough_replicas_after_append: E.coordinator_not_available,
    E.request_timed_out: E.coordinator_not_available,
    E.not_leader_or_follower: E.not_coordinator,
    E.kafka_storage_error: E.not_coordinator,
    E.message_too_large: E.unknown_server_error,
    E.record_list_too_large: E.unknown_server_error,
}
_COMMIT_TIMEOUT_S = 5.0  # offsets.commit.timeout.ms, transaction.state.log's request timeout
_CREATE_RETRY_S = 1.0
CHUNK = 1 << 20
# what decoding a record that is not the coordinator's own format raises (short fields, bad
# UTF-8, unknown versions, a batch whose records cannot be read)
UNPARSEABLE = (ValueError, KafkaError, struct.error)


class InternalTopic:
    def __init__(self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str],
                 replicas: ReplicaManager, controller: ControllerClient, factor_key: str) -> None:
        self.name = name
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.factor_key = factor_key   # the broker setting the factor comes from, for the log
        self._short_logged: float | None = None   # when _too_few last logged
        self.configs = dict(configs)
        self.replicas = replicas
        self.controller = controller
        self._task: asyncio.Task | None = None
        self._started_at = 0.0

    def ensure(self) -> None:
        """Ask the controller to create the topic, unless an attempt is running or just ended."""
        task = self._task
        if task is not None and (not task.done() or time.monotonic() - self._started_at < _CREATE_RETRY_S):
            return
        self._started_at = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._create())

    def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def _configs(self, rf: int) -> dict[str, str]:
        """The topic configs at replication factor ``rf`` (min.insync.replicas never above it)."""
        configs = dict(self.configs)
        if "min.insync.replicas" in configs:
            configs["min.insync.replicas"] = str(max(1, min(int(configs["min.insync.replicas"]), rf)))
        return configs

    async def _create(self) -> None:
        rf = self.replication_factor
        live = len(self.replicas.live_brokers())
        if live < rf:
            self._too_few(f"Number of alive brokers '{live}' does not meet the required replication factor "
                          f"'{rf}' for the {self.name} topic (configured via '{self.factor_key}')")
            return
        req = cp.CreateTopic(self.name, self.partitions, rf, configs=self._configs(rf))
        try:
            await self.controller.call(cp.create_topic(req), timeout=10.0)
            log.info("asked the controller to create %s (%d partitions, RF %d)", self.name, req.partitions, rf)
        except KafkaError as e:
            if e.code == E.invalid_replication_factor:   # the controller sees fewer brokers than we do
                self._too_few(f"the controller refused {self.name} with RF {rf}: {e.message}")
            elif e.code != E.topic_already_exists:
                log.warning("creating %s failed: %s", self.name, e.message)

    def _too_few(self, why: str) -> None:
        """Kafka's error, once a minute at most: clients retry FindCoordinator every 100 ms or so."""
        if self._short_logged is None or time.monotonic() - self._short_logged >= 60.0:
            self._short_logged = time.monotonic()
            log.error("%s. This error can be ignored if the cluster is starting up and not all brokers are up "
                      "yet; until enough are, FindCoordinator answers COORDINATOR_NOT_AVAILABLE.", why)

    def next_sequence(self, partition: int, producer_id: int, epoch: int) -> int:
        """The sequence a coordinator's transactional batch of ``producer_id`` (TxnOffsetCommit)
        takes on this leader: after the producer's last one at ``epoch``, else 0. (Kafka skips
        the sequence check for the coordinator's own appends; continuing the sequence passes it.)"""
        try:
            entry = self.replicas.leader(self.name, partition).log.producer_state.producers.get(producer_id)
        except KafkaError:
            return 0
        if entry is None or entry.epoch != epoch or entry.last_seq < 0:
            return 0
        return (entry.last_seq + 1) % (1 << 31)

    async def append(self, partition: int, batch: bytearray) -> None:
        """Leader append with acks=all; returns once the high watermark passes the batch."""
        replicas = self.replicas
        info = replicas.append(self.name, partition, memoryview(batch), acks=-1, origin=Origin.COORDINATOR)
        done = replicas.replicated(self.name, partition, info.last_offset)
        try:
            error = await asyncio.wait_for(asyncio.shield(done), _COMMIT_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise KafkaError(E.request_timed_out, f"the {self.name} write was not replicated in time") from None
        if error != E.none:
            raise KafkaError(error)


_T = TypeVar("_T")
_UNCANCELLED: set[asyncio.Future] = set()  # strong references while their requests are gone


def completes_if_cancelled(method: Callable[..., Awaitable[_T]]) -> Callable[..., Awaitable[_T]]:
    """A coordinator request that changes state around an append runs to its end even when
    its handler is cancelled (the client disconnected): Kafka completes an append's callback
    whatever became of the connection. Cut short, memory and log disagree: a transition left
    pending answers CONCURRENT_TRANSACTIONS for ever and keeps the timeout from aborting the
    transaction; offsets in the log are missing from the group's."""
    @functools.wraps(method)
    async def run(*args, **kwargs):
        task = asyncio.ensure_future(method(*args, **kwargs))
        _UNCANCELLED.add(task)
        task.add_done_callback(_UNCANCELLED.discard)
        return await asyncio.shield(task)
    return run


def wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass(eq=False)
class LedPartition:
    """A partition of a coordinator's topic that this broker leads: its leader epoch, and
    whether its log has been replayed (``task`` replays it)."""
    epoch: int
    loaded: bool = False
    task: asyncio.Task | None = None


def led_partitions(replicas: ReplicaManager, topic_name: str, broker_id: int) -> tuple[int | None, dict]:
    """(the topic's partition count or None, {partition: (leader epoch, Log)} of those this broker
    leads now): what a coordinator compares with what it has loaded after each snapshot."""
    topic = replicas.topic(topic_name)
    if topic is None:
        return None, {}
    led = {}
    for state in topic.partitions:
        if state.leader != broker_id:
            continue
        try:
            lp = replicas.leader(topic_name, state.partition)
        except KafkaError:
            continue
        led[state.partition] = (lp.state.leader_epoch, lp.log)
    return len(topic.partitions), led


def follow_leadership(owned: Mapping, led: Mapping, resign: Callable[[int], None],
                      elect: Callable[[int, int, object], None]) -> None:
    """Bring a coordinator's loaded partitions (``owned``, entries with an ``epoch``) in line with
    ``led`` (``led_partitions``): resign those no longer led here at that epoch, then
    ``elect(partition, epoch, log)`` those newly led."""
    for p, entry in list(owned.items()):
        if p not in led or led[p][0] != entry.epoch:
            resign(p)
    for p, (epoch, partition_log) in led.items():
        if p not in owned:
            elect(p, epoch, partition_log)


def serving(owned: Mapping, partition: int, topic_name: str, broker_id: int, key: str):
    """``owned[partition]`` if this coordinator has it loaded, else raises what to answer
    (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) for ``key`` (a group or transactional id)."""
    entry = owned.get(partition)
    if entry is None:
        raise KafkaError(E.not_coordinator, f"broker {broker_id} is not the coordinator of {key}")
    if not entry.loaded:
        raise KafkaError(E.coordinator_load_in_progress, f"{topic_name}-{partition} is loading")
    return entry


@dataclass
class SkippedRecords:
    """Records of a coordinator partition skipped while loading because they could not be parsed
    (before issue 30 a client could produce garbage to the internal topics): their count, and
    where the first was and why, for the one line logged per load."""
    count: int = 0
    first_offset: int = -1
    first_error: str = ""

    def skip(self, offset: int, error: Exception, records: int = 1) -> None:
        if not self.count:
            self.first_offset, self.first_error = offset, str(error) or type(error).__name__
        self.count += records

    def records(self, batch: RecordBatch) -> list[Record]:
        """The batch's records; none (all counted) if they cannot be read."""
        try:
            return list(iter_records(batch))
        except UNPARSEABLE as e:
            self.skip(batch.base_offset, e, batch.records_count)
            return []

    def each(self, batch: RecordBatch, apply: Callable[[Record], None]) -> None:
        """``apply`` to every record of ``batch``; one that raises an ``UNPARSEABLE`` error is counted."""
        for record in self.records(batch):
            try:
                apply(record)
            except UNPARSEABLE as e:
                self.skip(batch.base_offset, e)

    def report(self, topic: str, partition: int) -> None:
        if self.count:
            log.warning("loading %s-%d: skipped %d records that cannot be parsed (the first in the batch at "
                        "offset %d: %s)", topic, partition, self.count, self.first_offset, self.first_error)


async def replay(log, on_batch: Callable[[RecordBatch], None], should_continue: Callable[[], bool] = lambda: True,
                 ) -> bool:
    """Call ``on_batch`` for every batch of ``log`` (a storage ``Log``) up to its end, in order;
    False if ``should_continue()`` turned false on the way (the leadership went)."""
    offset, end = log.log_start_offset, log.log_end_offset
    while offset < end:
        chunk = log.read(offset, CHUNK, max_offset=end)
        if chunk.size == 0:
            break
        data = memoryview(os.pread(chunk.fd, chunk.size, chunk.position))
        for batch in iter_batches(data):
            if batch.next_offset > offset:
                on_batch(batch)
        offset = chunk.next_offset
        await asyncio.sleep(0)
        if not should_continue():
            return False
    return True
