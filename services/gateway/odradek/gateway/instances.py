"""REST Proxy v2 consumer instances: group members living in this gateway replica, and their
registry keyed by (group, instance).

Each instance owns one librdkafka consumer, used by one request at a time (the instance's
lock) in a thread. Instance ids carry the id of the replica that created them, so a request
that lands on another replica (several gateways behind one Service) is told which replica
owns it instead of getting a silent new instance. The registry's reaper closes instances idle
for ``consumer.instance.timeout.ms``: they leave their group, releasing their partitions.
Errors are the domain's (``errors``); nothing here knows about HTTP.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from odradek.gateway.errors import (ConsumerAlreadyExists, ConsumerInstanceNotFound, Forbidden,
                                    InvalidConsumerConfig, KafkaFailure)
from odradek.gateway.metrics import CONSUMER_INSTANCES
from odradek.gateway.models import CreateConsumer

log = logging.getLogger("odradek.gateway")
POLL_BATCH = 500   # records librdkafka hands over per consume() call


@dataclass
class Instance:
    group: str
    name: str
    format: str
    consumer: Consumer
    request_timeout_ms: int
    base_uri: str
    owner: str = "anonymous"    # the HTTP user that created it: its consumer logs in as that user's principal
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)
    positions: dict[tuple[str, int], int] = field(default_factory=dict)   # next offset per consumed partition
    subscription: list[str] = field(default_factory=list)
    assigned: list[TopicPartition] = field(default_factory=list)         # manual assignment, if any

    async def call(self, fn, *args):
        """``fn(*args)`` in a thread, alone on this instance; a Kafka error as a KafkaFailure."""
        async with self.lock:
            self.last_used = time.monotonic()
            try:
                return await asyncio.to_thread(fn, *args)
            except KafkaException as e:
                topics = ", ".join(self.subscription or sorted({tp.topic for tp in self.assigned}))
                raise KafkaFailure.of(e.args[0], topics, self.group) from None
            finally:
                self.last_used = time.monotonic()

    async def read(self, timeout_s: float, max_bytes: int) -> list:
        """Records up to ``max_bytes`` (see ``_poll``); each one's partition position moves past it."""
        messages = await self.call(self._poll, timeout_s, max_bytes)
        for m in messages:
            self.positions[(m.topic(), m.partition())] = m.offset() + 1
        return messages

    def _poll(self, timeout_s: float, max_bytes: int) -> list:
        """Records up to max_bytes of keys and values (at least one, so a large record still moves
        the consumer on); what the client fetched past that is sought back to, not dropped."""
        deadline = time.monotonic() + timeout_s
        out, size = [], 0
        while size < max_bytes:
            left = deadline - time.monotonic()
            batch = self.consumer.consume(num_messages=POLL_BATCH, timeout=max(0.0, left))
            for i, m in enumerate(batch):
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(m.error())
                record_size = len(m.value() or b"") + len(m.key() or b"")
                if out and size + record_size > max_bytes:
                    self._seek_back(batch[i:])
                    return out
                out.append(m)
                size += record_size
            if out or left <= 0:
                break
        return out

    def _seek_back(self, unreturned: list) -> None:
        """Rewinds each partition to its first fetched-but-unreturned record."""
        first: dict[tuple[str, int], int] = {}
        for m in unreturned:
            if m.error() is None:
                first.setdefault((m.topic(), m.partition()), m.offset())
        for (topic, partition), offset in first.items():
            self.consumer.seek(TopicPartition(topic, partition, offset))

    def seek(self, targets: list[TopicPartition]) -> None:
        """librdkafka seeks only partitions already fetching; a manual assignment is re-made with
        the new offsets instead, which always works."""
        if self.assigned:
            wanted = {(t.topic, t.partition): t.offset for t in targets}
            self.assigned = [TopicPartition(tp.topic, tp.partition, wanted.get((tp.topic, tp.partition), tp.offset))
                             for tp in self.assigned]
            self.consumer.assign(self.assigned)
            return
        for tp in targets:
            self.consumer.seek(tp)

    def seek_to_edge(self, partitions: list[tuple[str, int]], end: bool) -> None:
        """Seek each partition to its log end (``end``) or log start offset."""
        targets = []
        for topic, partition in partitions:
            low, high = self.consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            targets.append(TopicPartition(topic, partition, high if end else low))
        self.seek(targets)


class ConsumerInstances:
    """The registry: instances by (group, name), and the reaper of idle ones."""

    def __init__(self, settings) -> None:
        self.settings = settings
        self.instances: dict[tuple[str, str], Instance] = {}
        self._reaper: asyncio.Task | None = None

    async def start(self) -> None:
        self._reaper = asyncio.create_task(self._reap_idle())

    async def close(self) -> None:
        if self._reaper:
            self._reaper.cancel()
        for key in list(self.instances):
            await self.remove(*key)

    def create(self, group: str, req: CreateConsumer, kafka, owner: str) -> Instance:
        """A new instance whose consumer is one of ``kafka``'s (the creating user's principal)."""
        name = req.name or f"rest-consumer-{self.settings.replica_id}-{uuid.uuid4().hex[:12]}"
        if (group, name) in self.instances:
            raise ConsumerAlreadyExists(group, name)
        try:
            consumer = kafka.new_consumer(**_consumer_config(group, req))
        except KafkaException as e:
            raise InvalidConsumerConfig(e.args[0].str()) from None
        inst = Instance(group, name, req.format, consumer, req.request_timeout_ms or 1000,
                        f"{self.settings.base_url}/consumers/{group}/instances/{name}", owner)
        self.instances[(group, name)] = inst
        CONSUMER_INSTANCES.set(len(self.instances))
        log.info("consumer instance %s created in group %s", name, group)
        return inst

    def get(self, group: str, name: str, user: str) -> Instance:
        """The instance, if ``user`` (the HTTP user asking) created it: its consumer acts as the
        creator's Kafka principal, which no other user may borrow."""
        inst = self.instances.get((group, name))
        if inst is not None:
            if inst.owner != user:
                raise Forbidden(f"{user} may not use consumer instance {name}: another user created it")
            return inst
        owner = re.match(r"rest-consumer-([0-9a-f]{8})-", name)
        if owner and owner.group(1) != self.settings.replica_id:
            raise ConsumerInstanceNotFound(group, name, owner=owner.group(1))
        raise ConsumerInstanceNotFound(group, name)

    async def remove(self, group: str, name: str) -> None:
        inst = self.instances.pop((group, name), None)
        CONSUMER_INSTANCES.set(len(self.instances))
        if inst is not None:
            async with inst.lock:
                await asyncio.to_thread(inst.consumer.close)   # leaves the group: partitions move on

    async def _reap_idle(self) -> None:
        timeout = self.settings.consumer_instance_timeout_ms / 1000
        while True:
            await asyncio.sleep(min(1.0, timeout / 4))
            now = time.monotonic()
            for key, inst in list(self.instances.items()):
                if not inst.lock.locked() and now - inst.last_used > timeout:
                    log.info("consumer instance %s of group %s expired", key[1], key[0])
                    await self.remove(*key)


def _consumer_config(group: str, req: CreateConsumer) -> dict:
    """librdkafka's configuration for an instance created with ``req``."""
    conf = {"group.id": group, "auto.offset.reset": "error" if req.auto_offset_reset == "none"
            else req.auto_offset_reset, "enable.auto.commit": req.auto_commit_enable == "true",
            "enable.partition.eof": False, "fetch.wait.max.ms": 100, "isolation.level": req.isolation_level}
    if req.fetch_min_bytes is not None and req.fetch_min_bytes > 0:
        conf["fetch.min.bytes"] = req.fetch_min_bytes
    return conf
