"""The gateway's only way to the brokers: librdkafka through confluent-kafka.

Why confluent-kafka (docs/gateway.md has the figures): its producer batches and compresses in C
and answers deliveries through callbacks, so one shared producer serves every request; its
consumer decodes fetches in C, which is what keeps Arrow range reads cheap per record.
Its calls block, so they run in threads; deliveries come back to the event loop through
``call_soon_threadsafe``. Kafka's errors leave this module as the domain's (``errors``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, ConfigResource

from odradek.topics import is_internal
from odradek.gateway.errors import (AUTHENTICATION_FAILED, AUTHORIZATION_FAILED, GatewayError, InvalidRecord,
                                    KafkaFailure,
                                    OffsetOutOfRange, PartitionNotFound, RecordTooLarge, RetriableKafkaFailure,
                                    TopicNotFound)

log = logging.getLogger("odradek.gateway")

METADATA_TTL_S = 2.0
RANGE_READERS = 8          # consumers kept for range reads; more requests wait for one
RANGE_READ_IDLE_S = 2.0    # a range read that gets nothing for this long answers what it has


@dataclass(frozen=True, slots=True)
class OutRecord:
    value: bytes | None
    key: bytes | None = None
    partition: int | None = None
    headers: Sequence[tuple[str, bytes]] | None = None
    timestamp: int | None = None


@dataclass(slots=True)
class Delivery:
    partition: int | None = None
    offset: int | None = None
    error: KafkaError | None = None

    def failure(self) -> GatewayError:
        """Why this record was not delivered (only when ``error`` is set)."""
        if self.error.code() == KafkaError.MSG_SIZE_TOO_LARGE:  # Kafka's MESSAGE_TOO_LARGE
            return RecordTooLarge(self.error.str())
        if self.error.code() == KafkaError.INVALID_RECORD:
            return InvalidRecord(self.error.str())
        return KafkaFailure.of(self.error)


@dataclass
class _Batch:
    """Deliveries of one request: the loop is woken once, when the last one arrives."""
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future
    results: list[Delivery]
    pending: int
    lock: threading.Lock = field(default_factory=threading.Lock)

    def callback(self, index: int):
        return partial(self.delivered, index)

    def delivered(self, index: int, err, msg) -> None:
        self.results[index] = Delivery(msg.partition(), msg.offset(), None) if err is None else Delivery(error=err)
        with self.lock:
            self.pending -= 1
            done = self.pending == 0
        if done:
            self.loop.call_soon_threadsafe(_resolve, self.future, self.results)


def _resolve(future: asyncio.Future, results) -> None:
    if not future.done():
        future.set_result(results)


class KafkaBridge:
    """The Kafka clients of one principal: the gateway's own, or the one an HTTP user is mapped
    to (``principals``); ``security`` is librdkafka's security settings for that principal."""

    def __init__(self, bootstrap_servers: str, max_record_bytes: int, produce_timeout_ms: int = 30_000,
                 security: dict | None = None, client_id: str = "odradek-gateway"):
        self.bootstrap = bootstrap_servers
        self.auth_error: KafkaError | None = None   # the last SASL/TLS authentication failure seen
        self.common = {"bootstrap.servers": bootstrap_servers, "client.id": client_id, **(security or {}),
                       "error_cb": self._client_error}
        self.producer = Producer({**self.common, "acks": "all", "linger.ms": 2, "batch.size": 1 << 20,
                                  "message.max.bytes": max(max_record_bytes + 1024, 1_000_000),
                                  "message.timeout.ms": produce_timeout_ms,
                                  "queue.buffering.max.kbytes": 1 << 20,
                                  # the brokers dedupe retries: no duplicate, no reordering across failover
                                  "enable.idempotence": True,
                                  # a key lands where Java's default partitioner puts it (murmur2, toPositive,
                                  # mod partitions), not librdkafka's CRC32 default; null keys stay sticky for
                                  # sticky.partitioning.linger.ms as Java's stick to a batch
                                  "partitioner": "murmur2_random"})
        self.admin = AdminClient(self.common)
        self._metadata: tuple[float, ClusterMetadata] | None = None
        self._idle_readers: list[RangeReader] = []   # least recently used first
        self._reader_count = 0
        self._reader_slots = asyncio.Semaphore(RANGE_READERS)
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll_deliveries, name="gateway-deliveries", daemon=True)
        self._poller.start()

    def _client_error(self, err: KafkaError) -> None:
        """librdkafka's error callback: an authentication failure is kept for ``authenticate``
        and ``metadata`` to answer with (librdkafka itself only retries and times out)."""
        if err.code() in AUTHENTICATION_FAILED:
            self.auth_error = err

    async def authenticate(self, timeout_s: float = 10.0) -> None:
        """Wait until the brokers accept this principal's credentials (a metadata request
        answers); their refusal raises KafkaAuthenticationFailure at once, not at the timeout."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                md = await asyncio.to_thread(self.admin.list_topics, timeout=0.5)
            except KafkaException as e:
                self.admin.poll(0)   # serves the error callback
                if self.auth_error is not None:
                    raise KafkaFailure.of(self.auth_error) from None
                if time.monotonic() > deadline:
                    raise RetriableKafkaFailure(f"Cluster unreachable: {e.args[0].str()}") from None
                continue
            self._metadata = (time.monotonic(), md)
            return

    # -- lifecycle ---------------------------------------------------------------------------
    def _poll_deliveries(self) -> None:
        while not self._stop.is_set():
            self.producer.poll(0.05)

    async def close(self) -> None:
        await asyncio.to_thread(self.producer.flush, 30)
        self._stop.set()
        await asyncio.to_thread(self._poller.join, 5)
        for reader in self._idle_readers:
            await asyncio.to_thread(reader.consumer.close)

    # -- metadata ----------------------------------------------------------------------------
    async def metadata(self, fresh: bool = False) -> ClusterMetadata:
        now = time.monotonic()
        if fresh or self._metadata is None or now - self._metadata[0] > METADATA_TTL_S:
            try:
                md = await asyncio.to_thread(self.admin.list_topics, timeout=10)
            except KafkaException as e:
                self.admin.poll(0)   # serves the error callback: refused credentials answer as such
                if self.auth_error is not None:
                    raise KafkaFailure.of(self.auth_error) from None
                raise RetriableKafkaFailure(f"Cluster unreachable: {e.args[0].str()}") from e
            self._metadata = (time.monotonic(), md)
        return self._metadata[1]

    async def topic(self, name: str):
        """The topic's metadata (refreshed once on a miss); 40401 if it does not exist, 40301 if
        this principal may not describe it (Metadata hides such topics, DescribeTopics says why)."""
        for fresh in (False, True):
            t = (await self.metadata(fresh)).topics.get(name)
            if t is not None and t.error is None and not is_internal(name):
                return t
        if not is_internal(name):
            await self.why_hidden(name)
        raise TopicNotFound(name)

    async def why_hidden(self, name: str) -> None:
        """Raise KafkaAuthorizationFailure if the brokers refuse to describe ``name`` to this
        principal. DescribeTopics, unlike a Metadata request naming the topic, never creates it."""
        future = self.admin.describe_topics(TopicCollection([name]), request_timeout=10)[name]
        try:
            await asyncio.to_thread(future.result, 15)
        except KafkaException as e:
            if e.args[0].code() in AUTHORIZATION_FAILED:
                raise KafkaFailure.of(e.args[0], topics=name) from None

    async def partition(self, topic: str, partition: int):
        """The partition's metadata; a partition the cached metadata lacks is looked up afresh
        (it may have just been added). librdkafka's own caches learn of it when a produce or
        read fails with UNKNOWN_PARTITION and is retried after a refresh (``produce``,
        ``_with_fresh_metadata``): that also covers clients this cache's refresh would miss."""
        t = await self.topic(topic)
        if partition not in t.partitions:
            t = (await self.metadata(fresh=True)).topics.get(topic)
            if t is None or partition not in t.partitions:
                raise PartitionNotFound(topic, partition)
        return t.partitions[partition]

    async def topic_configs(self, topic: str) -> dict:
        """The topic's configs (name to librdkafka's ConfigEntry)."""
        resource = ConfigResource("topic", topic)
        try:
            return await asyncio.to_thread(lambda: self.admin.describe_configs([resource])[resource].result(10))
        except KafkaException as e:
            raise KafkaFailure.of(e.args[0], topics=topic) from None

    # -- produce -----------------------------------------------------------------------------
    async def produce(self, topic: str, records: Sequence[OutRecord]) -> list[Delivery]:
        """Deliveries of ``records`` (anything with OutRecord's attributes), in their order."""
        if not records:
            return []
        loop = asyncio.get_running_loop()
        refreshed = False   # librdkafka asked once for metadata of a partition it did not know
        batch = _Batch(loop, loop.create_future(), [None] * len(records), len(records))
        produce = self.producer.produce
        for i, r in enumerate(records):
            # librdkafka's defaults spelt out (-1: partitioner, 0: now): no kwargs dict per record
            partition = -1 if r.partition is None else r.partition
            headers = list(r.headers) if r.headers else None
            while True:
                try:
                    produce(topic, r.value, r.key, partition, batch.callback(i), timestamp=r.timestamp or 0,
                            headers=headers)
                    break
                except BufferError:      # the local queue is full: let deliveries drain it
                    await asyncio.sleep(0.005)
                except KafkaException as e:
                    if e.args[0].code() in UNKNOWN_PARTITION and not refreshed:
                        await asyncio.to_thread(self.producer.list_topics, topic, 10)
                        refreshed = True
                        continue
                    batch.callback(i)(e.args[0], None)
                    break
        deliveries = await batch.future
        for d in deliveries:   # refused by the ACLs: the whole request is (403), as Confluent's proxy does
            if d.error is not None and d.error.code() in (*AUTHORIZATION_FAILED, *AUTHENTICATION_FAILED):
                raise KafkaFailure.of(d.error, topics=topic)
        return deliveries

    # -- reads -------------------------------------------------------------------------------
    def new_consumer(self, **conf) -> Consumer:
        return Consumer({**self.common, "enable.auto.commit": False, "enable.partition.eof": True,
                         "fetch.wait.max.ms": 100, "fetch.max.bytes": 64 << 20,
                         "max.partition.fetch.bytes": 8 << 20, **conf})

    async def with_reader(self, fn, *args, position: tuple[str, int, int] | None = None, topic: str = "",
                          committed: bool = False):
        """Run ``fn(reader, *args)`` in a thread with a pooled group-less consumer; the one left
        at ``position`` (topic, partition, offset) by the previous range read if there is one, so
        a client reading a partition chunk by chunk keeps its fetched-ahead data. ``committed``:
        a read_committed consumer (no record of an aborted or open transaction; offsets and the
        end at the last stable offset). A Kafka error ``fn`` raises (after the stale-metadata
        retries) leaves as a KafkaFailure."""
        async with self._reader_slots:
            reader = self._take_reader(position, committed)
            try:
                return await asyncio.to_thread(_with_fresh_metadata, fn, reader, *args)
            except KafkaException as e:
                raise KafkaFailure.of(e.args[0], topics=topic or (position or ("",))[0]) from None
            finally:
                self._idle_readers.append(reader)

    def _take_reader(self, position, committed: bool = False) -> "RangeReader":
        idle = [(i, r) for i, r in enumerate(self._idle_readers) if r.committed == committed]
        for i, r in idle:
            if position is not None and r.position == position:
                return self._idle_readers.pop(i)
        if self._idle_readers and self._reader_count >= RANGE_READERS:
            if idle:
                return self._idle_readers.pop(idle[0][0])   # the least recently used one
            self._idle_readers.pop(0).consumer.close()      # one of the other isolation level makes room
            self._reader_count -= 1
        self._reader_count += 1
        return RangeReader(self.new_consumer(**{
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "group.id": "odradek-gateway-range-reads", "auto.offset.reset": "error",
            # a range read's fetches are never empty polls: a short wait keeps the pipeline full;
            # 1 MiB partition fetches answer their first byte in ~10 ms (8 MiB: 0.1-1 s) and
            # librdkafka keeps fetching ahead up to the queue limit
            "fetch.wait.max.ms": 10, "max.partition.fetch.bytes": 1 << 20,
            "queued.max.messages.kbytes": 32 << 10,
            # once that queue is full librdkafka postponed the next fetch by 1 s (its default): a
            # reader asking for 8 MiB chunks stalled ~0.9 s every few chunks
            "fetch.queue.backoff.ms": 10}), committed=committed)

    async def watermarks(self, topic: str, partition: int, committed: bool = False) -> tuple[int, int]:
        """(log start offset, high watermark), or the last stable offset for ``committed``
        (librdkafka's ListOffsets carries the consumer's isolation level)."""
        return await self.with_reader(
            lambda r: r.consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False),
            topic=topic, committed=committed)

    async def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        def lookup(r: RangeReader) -> int | None:
            [tp] = r.consumer.offsets_for_times([TopicPartition(topic, partition, timestamp_ms)], timeout=10)
            if tp.error is not None:
                raise KafkaException(tp.error)
            return tp.offset if tp.offset >= 0 else None
        return await self.with_reader(lookup, topic=topic)

    async def read_failure(self, topic: str, partition: int, offset: int, error: KafkaError) -> GatewayError:
        """The domain error of a range read that failed with ``error`` before any record."""
        if error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
            low, high = await self.watermarks(topic, partition)
            return OffsetOutOfRange(topic, partition, offset, low, high)
        return KafkaFailure.of(error, topics=topic)


# What stale metadata gives: a partition librdkafka has not learnt of yet (it learns of added
# partitions only at its periodic refresh, 5 min), or a leader that moved (broker restarts,
# preferred-leader elections; librdkafka does not retry offset queries on its own), or a leader
# that is gone (a broker scaled away: the query waits on a dead connection until it times out;
# the refresh before the retry names the new leader, or itself fails when the cluster is down).
UNKNOWN_PARTITION = (KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART)
STALE_METADATA = (*UNKNOWN_PARTITION, KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE)
LEADER_GONE = (KafkaError._TIMED_OUT, KafkaError._TRANSPORT)   # retried once: a timeout is slow
STALE_METADATA_RETRIES = (0.0, 0.5, 1.0, 2.0)  # backoff before each retry, seconds


def _with_fresh_metadata(fn, reader: "RangeReader", *args):
    """``fn(reader, *args)``, again after a metadata refresh while it fails for stale metadata."""
    for attempt, backoff in enumerate(STALE_METADATA_RETRIES):
        try:
            return fn(reader, *args)
        except KafkaException as e:
            code = e.args[0].code()
            if code not in STALE_METADATA and not (code in LEADER_GONE and attempt == 0):
                raise
        time.sleep(backoff)
        reader.consumer.list_topics(timeout=10)
        reader.position, reader.ahead = None, []
    return fn(reader, *args)


@dataclass
class RangeReader:
    """A group-less consumer for range reads, and where its last read stopped: the messages it
    had consumed past that point wait in ``ahead`` for the read that continues from there."""
    consumer: Consumer
    position: tuple[str, int, int] | None = None
    ahead: list = field(default_factory=list)
    committed: bool = False    # isolation.level=read_committed

    def skipped_to(self, topic: str, partition: int, next_offset: int, end: int) -> int:
        """Where a read_committed read that ended at ``next_offset`` really is: the consumer's
        position, past the markers and aborted records it never returns (at most ``end``)."""
        if not self.committed:
            return next_offset
        position = self.consumer.position([TopicPartition(topic, partition)])[0].offset
        return max(next_offset, min(position, end))

    def stale_end(self, eof, end: int) -> bool:
        """Whether an end-of-partition notice is older than the records this read asks for: one
        queued when a previous read stopped at the end, before newer records arrived (the
        consumer's cached high watermark is past it), would end this read with nothing."""
        if eof.offset() >= end:
            return False
        hw = self.consumer.get_watermark_offsets(TopicPartition(eof.topic(), eof.partition()), cached=True)[1]
        return eof.offset() < hw

    def seek(self, topic: str, partition: int, offset: int) -> None:
        if self.position != (topic, partition, offset):
            self.consumer.assign([TopicPartition(topic, partition, offset)])
            self.ahead = []

    def next_batch(self) -> list:
        if self.ahead:
            batch, self.ahead = self.ahead, []
            return batch
        # consume() waits for a full batch or the timeout: a short one returns what has arrived
        return self.consumer.consume(num_messages=10_000, timeout=0.01)


def read_range(r: RangeReader, topic: str, partition: int, offset: int, end: int, max_bytes: int):
    """Messages of ``[offset, end)``, about ``max_bytes`` of data (at least one message if any),
    in a thread. Returns (messages, next offset, error) where error is a KafkaError."""
    r.seek(topic, partition, offset)
    r.position = None   # until this read ends well
    out, size, next_offset = [], 0, offset
    idle_since = time.monotonic()
    while next_offset < end and (size < max_bytes or not out):
        batch = r.next_batch()
        if not batch:
            if time.monotonic() - idle_since > RANGE_READ_IDLE_S:
                break
            continue
        idle_since = time.monotonic()
        for i, m in enumerate(batch):
            err = m.error()
            if err is not None and err.code() == KafkaError._PARTITION_EOF and r.stale_end(m, end):
                continue
            if err is not None and err.code() != KafkaError._PARTITION_EOF:
                r.consumer.unassign()
                if err.code() in UNKNOWN_PARTITION and not out:
                    raise KafkaException(err)   # _with_fresh_metadata refreshes and retries
                return out, next_offset, err
            if err is not None or m.offset() >= end or (size >= max_bytes and out):
                r.ahead = batch[i + 1:] if err is not None else batch[i:]
                if err is not None or m.offset() >= end:
                    next_offset = r.skipped_to(topic, partition, next_offset, end)
                r.position = (topic, partition, next_offset)
                return out, next_offset, None
            out.append(m)
            size += len(m.value() or b"") + len(m.key() or b"")
            next_offset = m.offset() + 1
    if next_offset < end:
        next_offset = r.skipped_to(topic, partition, next_offset, end)
    r.position = (topic, partition, next_offset)
    return out, next_offset, None
