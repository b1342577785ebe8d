"""REST Proxy v2 consumer instances: a group member living in this gateway replica.

Each instance owns one librdkafka consumer, used by one request at a time (its lock) in a
thread. Instance ids carry the id of the replica that created them, so a request that lands
on another replica (several gateways behind one Service) gets a clear 404 naming the owner's
``base_uri`` instead of a silent new instance. Idle instances expire after
``consumer.instance.timeout.ms`` and leave their group (releasing their partitions).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from odradek.gateway import formats
from odradek.gateway.auth import READ, authenticate, require
from odradek.gateway.errors import (CONSUMER_ALREADY_EXISTS, CONSUMER_FORMAT_MISMATCH, CONSUMER_INSTANCE_NOT_FOUND,
                                    ILLEGAL_STATE, INVALID_BODY, INVALID_CONSUMER_CONFIG, RestError)
from odradek.gateway.metrics import CONSUMER_INSTANCES, RECORDS_OUT
from odradek.gateway.topics import V2Response, content_type

log = logging.getLogger("odradek.gateway")
router = APIRouter(prefix="/consumers/{group}")
V2_BODY = content_type(formats.V2, formats.JSON)


class CreateConsumer(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    name: str | None = Field(None, pattern=r"^[a-zA-Z0-9._-]{1,200}$")
    format: str = Field("binary", pattern="^(binary|json)$")
    auto_offset_reset: str = Field("latest", alias="auto.offset.reset", pattern="^(earliest|latest|none)$")
    auto_commit_enable: str = Field("true", alias="auto.commit.enable", pattern="^(true|false)$")
    fetch_min_bytes: int | None = Field(None, alias="fetch.min.bytes", ge=-1)
    request_timeout_ms: int | None = Field(None, alias="consumer.request.timeout.ms", ge=0)


class Subscription(BaseModel):
    model_config = ConfigDict(extra="forbid")
    topics: list[str] | None = None
    topic_pattern: str | None = None


class PartitionRef(BaseModel):
    topic: str
    partition: int = Field(ge=0)


class Partitions(BaseModel):
    partitions: list[PartitionRef]


class OffsetRef(PartitionRef):
    offset: int = Field(ge=0)
    metadata: str | None = None


class Offsets(BaseModel):
    offsets: list[OffsetRef] = []


@dataclass
class Instance:
    group: str
    name: str
    format: str
    consumer: Consumer
    request_timeout_ms: int
    base_uri: str
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)
    positions: dict[tuple[str, int], int] = field(default_factory=dict)   # next offset per consumed partition
    subscription: list[str] = field(default_factory=list)
    assigned: list[TopicPartition] = field(default_factory=list)         # manual assignment, if any

    async def call(self, fn, *args):
        async with self.lock:
            self.last_used = time.monotonic()
            try:
                return await asyncio.to_thread(fn, *args)
            except KafkaException as e:
                err: KafkaError = e.args[0]
                raise RestError(500, 50002 if not err.retriable() else 50003, err.str()) from None
            finally:
                self.last_used = time.monotonic()


class ConsumerInstances:
    def __init__(self, app) -> None:
        self.app = app
        self.settings = app.state.settings
        self.instances: dict[tuple[str, str], Instance] = {}
        self._expiry: asyncio.Task | None = None

    async def start(self) -> None:
        self._expiry = asyncio.create_task(self._expire_loop())

    async def close(self) -> None:
        if self._expiry:
            self._expiry.cancel()
        for key in list(self.instances):
            await self.remove(*key)

    def create(self, group: str, req: CreateConsumer) -> Instance:
        name = req.name or f"rest-consumer-{self.settings.replica_id}-{uuid.uuid4().hex[:12]}"
        if (group, name) in self.instances:
            raise RestError(409, CONSUMER_ALREADY_EXISTS, f"Consumer with specified consumer ID {name} "
                                                            f"already exists in group {group}.")
        conf = {"group.id": group, "auto.offset.reset": "error" if req.auto_offset_reset == "none"
                else req.auto_offset_reset, "enable.auto.commit": req.auto_commit_enable == "true",
                "enable.partition.eof": False, "fetch.wait.max.ms": 100}
        if req.fetch_min_bytes is not None and req.fetch_min_bytes > 0:
            conf["fetch.min.bytes"] = req.fetch_min_bytes
        try:
            consumer = self.app.state.kafka.new_consumer(**conf)
        except KafkaException as e:
            raise RestError(422, INVALID_CONSUMER_CONFIG, e.args[0].str()) from None
        inst = Instance(group, name, req.format, consumer, req.request_timeout_ms or 1000,
                        f"{self.settings.base_url}/consumers/{group}/instances/{name}")
        self.instances[(group, name)] = inst
        CONSUMER_INSTANCES.set(len(self.instances))
        log.info("consumer instance %s created in group %s", name, group)
        return inst

    def get(self, group: str, name: str) -> Instance:
        inst = self.instances.get((group, name))
        if inst is not None:
            return inst
        owner = re.match(r"rest-consumer-([0-9a-f]{8})-", name)
        if owner and owner.group(1) != self.settings.replica_id:
            raise RestError(404, CONSUMER_INSTANCE_NOT_FOUND, f"Consumer instance {name} lives in another gateway "
                            f"replica ({owner.group(1)}); send its requests to the base_uri it was created with.")
        raise RestError(404, CONSUMER_INSTANCE_NOT_FOUND, "Consumer instance not found.")

    async def remove(self, group: str, name: str) -> None:
        inst = self.instances.pop((group, name), None)
        CONSUMER_INSTANCES.set(len(self.instances))
        if inst is not None:
            async with inst.lock:
                await asyncio.to_thread(inst.consumer.close)   # leaves the group: partitions move on

    async def _expire_loop(self) -> None:
        timeout = self.settings.consumer_instance_timeout_ms / 1000
        while True:
            await asyncio.sleep(min(1.0, timeout / 4))
            now = time.monotonic()
            for key, inst in list(self.instances.items()):
                if not inst.lock.locked() and now - inst.last_used > timeout:
                    log.info("consumer instance %s of group %s expired", key[1], key[0])
                    await self.remove(*key)


def _instances(request: Request) -> ConsumerInstances:
    return request.app.state.consumers


def _instance(request: Request, group: str, name: str) -> Instance:
    return _instances(request).get(group, name)


@router.post("", response_class=V2Response)
async def create_instance(group: str, body: CreateConsumer, request: Request, _k: str = V2_BODY,
                          _=require(READ)) -> dict:
    inst = _instances(request).create(group, body)
    return {"instance_id": inst.name, "base_uri": inst.base_uri}


@router.delete("/instances/{name}", status_code=204)
async def delete_instance(group: str, name: str, request: Request, _=require(READ)) -> Response:
    _instance(request, group, name)
    await _instances(request).remove(group, name)
    return Response(status_code=204)


@router.post("/instances/{name}/subscription", status_code=204)
async def subscribe(group: str, name: str, body: Subscription, request: Request, _k: str = V2_BODY) -> Response:
    inst = _instance(request, group, name)
    if bool(body.topics) == bool(body.topic_pattern):
        # Confluent's proxy takes `topics` when both are given and does nothing when neither is:
        # refused here, with the code its body validation answers (its 42201 means "key schema missing")
        raise RestError(422, INVALID_BODY, "give exactly one of topics or topic_pattern")
    who = authenticate(request)
    for t in body.topics or []:
        if not who.may(READ, t):
            raise RestError(403, 40301, f"{who.name} may not read {t}")
    if inst.assigned:
        raise RestError(409, ILLEGAL_STATE, "Subscription to topics, partitions and pattern are mutually exclusive.")
    topics = body.topics or ["^" + body.topic_pattern.lstrip("^")]
    await inst.call(inst.consumer.subscribe, topics)
    inst.subscription = topics
    return Response(status_code=204)


@router.get("/instances/{name}/subscription", response_class=V2Response)
async def get_subscription(group: str, name: str, request: Request) -> dict:
    inst = _instance(request, group, name)
    return {"topics": list(inst.subscription)}


@router.delete("/instances/{name}/subscription", status_code=204)
async def unsubscribe(group: str, name: str, request: Request) -> Response:
    inst = _instance(request, group, name)
    await inst.call(inst.consumer.unsubscribe)
    inst.subscription = []
    return Response(status_code=204)


@router.post("/instances/{name}/assignments", status_code=204)
async def assign(group: str, name: str, body: Partitions, request: Request, _k: str = V2_BODY) -> Response:
    inst = _instance(request, group, name)
    if inst.subscription:
        raise RestError(409, ILLEGAL_STATE, "Subscription to topics, partitions and pattern are mutually exclusive.")
    who = authenticate(request)
    for p in body.partitions:
        if not who.may(READ, p.topic):
            raise RestError(403, 40301, f"{who.name} may not read {p.topic}")
        await request.app.state.kafka.partition(p.topic, p.partition)
    inst.assigned = [TopicPartition(p.topic, p.partition) for p in body.partitions]
    await inst.call(inst.consumer.assign, inst.assigned)
    return Response(status_code=204)


@router.get("/instances/{name}/assignments", response_class=V2Response)
async def get_assignments(group: str, name: str, request: Request) -> dict:
    inst = _instance(request, group, name)
    return {"partitions": [{"topic": tp.topic, "partition": tp.partition}
                           for tp in await inst.call(inst.consumer.assignment)]}


def _poll(inst: Instance, timeout_s: float, max_bytes: int) -> list:
    """Records up to max_bytes of keys and values (at least one, so a large record still moves
    the consumer on); what the client fetched past that is sought back to, not dropped."""
    deadline = time.monotonic() + timeout_s
    out, size = [], 0
    while size < max_bytes:
        left = deadline - time.monotonic()
        batch = inst.consumer.consume(num_messages=500, timeout=max(0.0, left))
        for i, m in enumerate(batch):
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(m.error())
            record_size = len(m.value() or b"") + len(m.key() or b"")
            if out and size + record_size > max_bytes:
                _seek_back(inst, batch[i:])
                return out
            out.append(m)
            size += record_size
        if out or left <= 0:
            break
    return out


def _seek_back(inst: Instance, unreturned: list) -> None:
    """Rewinds each partition to its first fetched-but-unreturned record."""
    first: dict[tuple[str, int], int] = {}
    for m in unreturned:
        if m.error() is None:
            first.setdefault((m.topic(), m.partition()), m.offset())
    for (topic, partition), offset in first.items():
        inst.consumer.seek(TopicPartition(topic, partition, offset))


@router.get("/instances/{name}/records", response_class=V2Response)
async def records(group: str, name: str, request: Request, timeout: int | None = Query(None, ge=0),
                  max_bytes: int = Query(64 << 20, ge=1)) -> list[dict]:
    inst = _instance(request, group, name)
    accept = request.headers.get("accept", "*/*")
    wanted = {formats.V2_BINARY: "binary", formats.V2_JSON: "json"}
    asked = [f for t, f in wanted.items() if t in accept]
    if asked and inst.format not in asked:
        raise RestError(406, CONSUMER_FORMAT_MISMATCH, "The requested embedded data format does not match the "
                                                       "deserializer for this consumer instance")
    timeout_s = (timeout if timeout is not None else inst.request_timeout_ms) / 1000
    messages = await inst.call(_poll, inst, timeout_s, max_bytes)
    RECORDS_OUT.inc(len(messages))
    out = []
    for m in messages:
        inst.positions[(m.topic(), m.partition())] = m.offset() + 1
        out.append({"topic": m.topic(), "key": formats.decode_embedded(m.key(), inst.format),
                    "value": formats.decode_embedded(m.value(), inst.format), "partition": m.partition(),
                    "offset": m.offset()})
    media = formats.V2_JSON if inst.format == "json" else formats.V2_BINARY
    return V2Response(out, media_type=media)


@router.post("/instances/{name}/offsets", status_code=200)
async def commit(group: str, name: str, request: Request, _k: str = V2_BODY) -> Response:
    """Commit the given offsets (each the last record processed: Kafka stores the next one),
    or, with an empty body, every record this instance has returned."""
    inst = _instance(request, group, name)
    raw = await request.body()
    body = Offsets.model_validate_json(raw) if raw.strip() else Offsets()
    if body.offsets:
        tps = [TopicPartition(o.topic, o.partition, o.offset + 1, metadata=o.metadata or "") for o in body.offsets]
    else:
        tps = [TopicPartition(t, p, off) for (t, p), off in inst.positions.items()]
    if tps:
        await inst.call(lambda: inst.consumer.commit(offsets=tps, asynchronous=False))
    return Response(status_code=200)


@router.get("/instances/{name}/offsets", response_class=V2Response)
async def committed(group: str, name: str, body: Partitions, request: Request) -> dict:
    inst = _instance(request, group, name)
    tps = await inst.call(inst.consumer.committed, [TopicPartition(p.topic, p.partition) for p in body.partitions], 10)
    return {"offsets": [{"topic": tp.topic, "partition": tp.partition, "offset": tp.offset if tp.offset >= 0 else -1,
                         "metadata": tp.metadata or ""} for tp in tps]}


@router.post("/instances/{name}/positions", status_code=204)
async def seek(group: str, name: str, body: Offsets, request: Request, _k: str = V2_BODY) -> Response:
    inst = _instance(request, group, name)
    await inst.call(_seek, inst, [TopicPartition(o.topic, o.partition, o.offset) for o in body.offsets])
    return Response(status_code=204)


def _seek(inst: Instance, targets: list[TopicPartition]) -> None:
    """librdkafka seeks only partitions already fetching; a manual assignment is re-made with
    the new offsets instead, which always works."""
    if inst.assigned:
        wanted = {(t.topic, t.partition): t.offset for t in targets}
        inst.assigned = [TopicPartition(tp.topic, tp.partition, wanted.get((tp.topic, tp.partition), tp.offset))
                         for tp in inst.assigned]
        inst.consumer.assign(inst.assigned)
        return
    for tp in targets:
        inst.consumer.seek(tp)


async def _seek_to(request: Request, group: str, name: str, body: Partitions, end: bool) -> Response:
    inst = _instance(request, group, name)

    def go() -> None:
        targets = []
        for p in body.partitions:
            low, high = inst.consumer.get_watermark_offsets(TopicPartition(p.topic, p.partition), timeout=10)
            targets.append(TopicPartition(p.topic, p.partition, high if end else low))
        _seek(inst, targets)
    await inst.call(go)
    return Response(status_code=204)


@router.post("/instances/{name}/positions/beginning", status_code=204)
async def seek_to_beginning(group: str, name: str, body: Partitions, request: Request,
                            _k: str = V2_BODY) -> Response:
    return await _seek_to(request, group, name, body, end=False)


@router.post("/instances/{name}/positions/end", status_code=204)
async def seek_to_end(group: str, name: str, body: Partitions, request: Request, _k: str = V2_BODY) -> Response:
    return await _seek_to(request, group, name, body, end=True)
