"""The registry's Kafka side: the compacted ``_schemas`` topic (created with one partition, as
Confluent's and Karapace's, so that its records have one order), a reader thread that applies
every record to ``RegistryState``, the writes, and the primary's election.

Election, as Confluent's and Karapace's: every replica joins one consumer group (``schema-registry``)
subscribed to ``_schemas``; its one partition goes to one member, and that member is the primary,
the only one that allocates ids and writes. The others learn the primary's URL from the group's
description (each member's ``client.id`` is its URL) and forward writes to it (``routes``). A
primary that dies leaves the group when its session times out and the partition moves to another.

Fencing: a write runs under ``primacy()``, which holds ``_term`` from its check of ``is_primary`` until
its records are in the log; the elector's revoke callback takes ``_term`` too, so a primary losing
the partition finishes its write before it leaves the rebalance, and the next primary, which
catches up with the log before it allocates, sees that write. Without it two replicas could both
allocate the next id while a replica joins (found by two replicas registering at once).

Threads: the reader and the elector each poll their own consumer in a daemon thread; the state is
read and changed under ``lock``."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.gateway.registry.errors import NotPrimary, StoreError, StoreTimeout
from odradek.gateway.registry.state import RegistryState

log = logging.getLogger("odradek.gateway.registry")

TOPIC, GROUP = "_schemas", "schema-registry"
SESSION_TIMEOUT_MS = 10_000        # how long a dead primary keeps the partition
PRIMARY_CACHE_S = 2.0
STORE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class LogSettings:
    bootstrap: str
    security: dict
    url: str                        # this replica's URL: what the others forward writes to
    topic: str = TOPIC
    group: str = GROUP
    replication_factor: int = 3     # at most the number of brokers


class SchemasLog:
    def __init__(self, settings: LogSettings):
        self.settings = settings
        self.state = RegistryState()
        self.lock = threading.Lock()
        self.next_offset = 0          # the offset after the last record applied
        self.is_primary = False
        self._term = threading.Lock()       # held by a write, and by the revoke that ends the primacy
        self._writing = asyncio.Lock()      # one write at a time on this replica
        self._primary_cache: tuple[float, str | None] = (0.0, None)
        common = {"bootstrap.servers": settings.bootstrap, **settings.security}
        self._common = common
        self.admin = AdminClient(common)
        self.producer = Producer({**common, "acks": "all", "enable.idempotence": True, "linger.ms": 0,
                                  "client.id": "odradek-schema-registry"})
        self._watermarks: Consumer | None = None
        self._watermarks_lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        await asyncio.to_thread(self._ensure_topic)
        for target, name in ((self._read, "registry-reader"), (self._elect, "registry-elector")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    async def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            await asyncio.to_thread(thread.join, 15)
        await asyncio.to_thread(self.producer.flush, 10)
        if self._watermarks is not None:
            await asyncio.to_thread(self._watermarks.close)

    def _ensure_topic(self) -> None:
        brokers = len(self._cluster_metadata(30).brokers)
        topic = NewTopic(self.settings.topic, num_partitions=1,
                         replication_factor=max(1, min(self.settings.replication_factor, brokers)),
                         config={"cleanup.policy": "compact"})
        try:
            self.admin.create_topics([topic], request_timeout=30)[self.settings.topic].result(30)
            log.info("created %s", self.settings.topic)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise

    def _cluster_metadata(self, timeout: float):
        """The cluster's metadata, asked for in one-second tries so that ``close`` (``_stop``) ends
        the wait at once: a gateway stopping while Kafka is unreachable does not hang its shutdown."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.admin.list_topics(timeout=1)
            except KafkaException:
                if self._stop.is_set() or time.monotonic() >= deadline:
                    raise

    # -- reading ---------------------------------------------------------------------------------
    def _read(self) -> None:
        consumer = Consumer({**self._common, "group.id": f"{self.settings.group}-reader",
                             "enable.auto.commit": False, "client.id": "odradek-schema-registry-reader"})
        consumer.assign([TopicPartition(self.settings.topic, 0, OFFSET_BEGINNING)])
        try:
            while not self._stop.is_set():
                for msg in consumer.consume(500, 0.2):
                    if msg.error() is not None:
                        if not msg.error().retriable():
                            log.warning("reading %s: %s", self.settings.topic, msg.error())
                        continue
                    with self.lock:
                        self.state.apply(msg.key() or b"{}", msg.value())
                        self.next_offset = msg.offset() + 1
        finally:
            consumer.close()

    def _end_offset(self) -> int:
        with self._watermarks_lock:     # one client kept across queries (a new one costs a connection)
            deadline = time.monotonic() + 10
            while True:
                if self._watermarks is None:
                    self._watermarks = Consumer({**self._common, "group.id": f"{self.settings.group}-reader"})
                try:
                    return self._watermarks.get_watermark_offsets(TopicPartition(self.settings.topic, 0),
                                                                  timeout=10)[1]
                except KafkaException as e:
                    # the client's metadata names no such partition: a topic just created, or a topic
                    # error the client cached while brokers restarted, which librdkafka answers from
                    # its cache without asking again (a test run got it for 34 s): ask with a new client
                    if e.args[0].code() != KafkaError._UNKNOWN_PARTITION or time.monotonic() >= deadline:
                        raise
                    self._watermarks.close()
                    self._watermarks = None
                    time.sleep(0.2)

    async def caught_up(self, timeout: float = STORE_TIMEOUT_S) -> None:
        """Wait until every record written so far (acknowledged to its writer, whichever replica
        that was) is applied here: before an id is allocated, and before a read answers "not found"."""
        try:
            end = await asyncio.to_thread(self._end_offset)
        except KafkaException as e:
            raise StoreError(f"Cannot read {self.settings.topic}: {e.args[0].str()}") from None
        await self.applied(end - 1, timeout)

    async def applied(self, offset: int, timeout: float = STORE_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while self.next_offset <= offset:
            if time.monotonic() > deadline:
                raise StoreTimeout(f"Timed out waiting for {self.settings.topic} to reach offset {offset}")
            await asyncio.sleep(0.01)

    # -- writing ---------------------------------------------------------------------------------
    @asynccontextmanager
    async def primacy(self):
        """Run a write as the primary, caught up with the log; NotPrimary when this replica is not."""
        async with self._writing:
            await asyncio.to_thread(self._term.acquire)
            try:
                if not self.is_primary:
                    raise NotPrimary()
                await self.caught_up()
                yield
            finally:
                self._term.release()

    async def write(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Append ``records`` in order and return once this replica has applied them."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future = loop.create_future()
        results: list = []

        def delivered(err, msg) -> None:
            results.append((err, msg.offset() if err is None else None))
            if len(results) == len(records):
                loop.call_soon_threadsafe(lambda: done.done() or done.set_result(None))

        for key, value in records:
            self.producer.produce(self.settings.topic, key=key, value=value, partition=0, on_delivery=delivered)
        await asyncio.to_thread(self.producer.flush, STORE_TIMEOUT_S)
        try:
            await asyncio.wait_for(done, STORE_TIMEOUT_S)
        except TimeoutError:
            raise StoreTimeout(f"Timed out writing to {self.settings.topic}") from None
        failed = [err for err, _ in results if err is not None]
        if failed:
            raise StoreError(f"Writing to {self.settings.topic} failed: {failed[0].str()}")
        await self.applied(max(offset for _, offset in results))

    # -- the primary -----------------------------------------------------------------------------
    def _elect(self) -> None:
        consumer = Consumer({**self._common, "group.id": self.settings.group, "client.id": self.settings.url,
                             "enable.auto.commit": False, "auto.offset.reset": "latest",
                             "session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": 1000})

        def assigned(_, partitions) -> None:
            self.is_primary = any(p.partition == 0 for p in partitions)
            log.info("schema registry %s is %s", self.settings.url, "the primary" if self.is_primary else "a follower")

        def revoked(_, partitions) -> None:
            with self._term:              # a write under way ends first (see the module's docstring)
                self.is_primary = False

        consumer.subscribe([self.settings.topic], on_assign=assigned, on_revoke=revoked, on_lost=revoked)
        try:
            while not self._stop.is_set():
                consumer.poll(0.2)    # keeps the membership; the records themselves are the reader's
        finally:
            self.is_primary = False
            consumer.close()          # leaves the group: another replica takes over at once

    def _describe_primary(self) -> str | None:
        group = self.admin.describe_consumer_groups([self.settings.group], request_timeout=10)[self.settings.group]
        for member in group.result(10).members:
            tps = member.assignment.topic_partitions if member.assignment else []
            if any(tp.topic == self.settings.topic and tp.partition == 0 for tp in tps):
                return member.client_id
        return None

    async def primary_url(self, fresh: bool = False) -> str | None:
        """The primary's URL (this replica's when it is the primary); None while none is elected."""
        if self.is_primary:
            return self.settings.url
        at, url = self._primary_cache
        if fresh or url is None or time.monotonic() - at > PRIMARY_CACHE_S:
            try:
                url = await asyncio.to_thread(self._describe_primary)
            except KafkaException:
                url = None
            self._primary_cache = (time.monotonic(), url)
        return url
