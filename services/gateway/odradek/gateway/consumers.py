"""REST Proxy v2 consumer-instance routes (``/consumers/{group}...``; paths in ``routes``): each
translates a request into a call on the instance registry (``instances``) and its answer into
v2's JSON. Errors are raised as domain errors; ``edge`` answers them."""

from __future__ import annotations

from confluent_kafka import TopicPartition
from fastapi import Query, Request, Response

from odradek.gateway import edge, embedded, formats
from odradek.gateway.auth import READ, authenticate, require
from odradek.gateway.errors import FormatMismatch, Forbidden, IllegalState, InvalidBody
from odradek.gateway.instances import ConsumerInstances, Instance
from odradek.gateway.metrics import RECORDS_OUT
from odradek.gateway.principals import kafka
from odradek.gateway.models import CreateConsumer, Offsets, Partitions, Subscription

V2_BODY = edge.content_type(formats.V2, formats.JSON)


def _instances(request: Request) -> ConsumerInstances:
    return request.app.state.consumers


def _instance(request: Request, group: str, name: str) -> Instance:
    return _instances(request).get(group, name, authenticate(request).name)


def _may_read(request: Request, topics) -> None:
    who = authenticate(request)
    for t in topics:
        if not who.may(READ, t):
            raise Forbidden(f"{who.name} may not read {t}")


async def create_instance(group: str, body: CreateConsumer, request: Request, _k: str = V2_BODY,
                          who=require(READ)) -> dict:
    inst = _instances(request).create(group, body, await kafka(request), who.name)
    return {"instance_id": inst.name, "base_uri": inst.base_uri}


async def delete_instance(group: str, name: str, request: Request, _=require(READ)) -> Response:
    _instance(request, group, name)
    await _instances(request).remove(group, name)
    return Response(status_code=204)


async def subscribe(group: str, name: str, body: Subscription, request: Request, _k: str = V2_BODY) -> Response:
    inst = _instance(request, group, name)
    if bool(body.topics) == bool(body.topic_pattern):
        # Confluent's proxy takes `topics` when both are given and does nothing when neither is:
        # refused here, with the code its body validation answers (its 42201 means "key schema missing")
        raise InvalidBody("give exactly one of topics or topic_pattern")
    _may_read(request, body.topics or [])
    who = authenticate(request)
    if body.topic_pattern and not who.reads_every_topic():
        # a pattern matches topics created later too: only a token that may read them all
        raise Forbidden(f"{who.name} may not subscribe to a topic pattern (it may not read every topic): "
                        "subscribe to the topics by name")
    if inst.assigned:
        raise IllegalState()
    topics = body.topics or ["^" + body.topic_pattern.lstrip("^")]
    await inst.call(inst.consumer.subscribe, topics)
    inst.subscription = topics
    return Response(status_code=204)


async def get_subscription(group: str, name: str, request: Request) -> dict:
    return {"topics": list(_instance(request, group, name).subscription)}


async def unsubscribe(group: str, name: str, request: Request) -> Response:
    inst = _instance(request, group, name)
    await inst.call(inst.consumer.unsubscribe)
    inst.subscription = []
    return Response(status_code=204)


async def assign(group: str, name: str, body: Partitions, request: Request, _k: str = V2_BODY) -> Response:
    inst = _instance(request, group, name)
    if inst.subscription:
        raise IllegalState()
    _may_read(request, [p.topic for p in body.partitions])
    for p in body.partitions:
        await (await kafka(request)).partition(p.topic, p.partition)
    inst.assigned = [TopicPartition(p.topic, p.partition) for p in body.partitions]
    await inst.call(inst.consumer.assign, inst.assigned)
    return Response(status_code=204)


async def get_assignments(group: str, name: str, request: Request) -> dict:
    inst = _instance(request, group, name)
    return {"partitions": [{"topic": tp.topic, "partition": tp.partition}
                           for tp in await inst.call(inst.consumer.assignment)]}


async def records(group: str, name: str, request: Request, timeout: int | None = Query(None, ge=0),
                  max_bytes: int = Query(64 << 20, ge=1)) -> list[dict]:
    inst = _instance(request, group, name)
    accept = request.headers.get("accept", "*/*")
    asked = [f for t, f in formats.EMBEDDED.items() if t in accept]
    if asked and inst.format not in asked:
        raise FormatMismatch()
    reader = (embedded.Reader(await embedded.registry(request), embedded.FORMATS[inst.format])
              if inst.format in embedded.FORMATS else None)
    messages = await inst.read((timeout if timeout is not None else inst.request_timeout_ms) / 1000, max_bytes)
    RECORDS_OUT.inc(len(messages))
    if reader is None:
        out = [{"topic": m.topic(), "key": formats.decode_embedded(m.key(), inst.format),
                "value": formats.decode_embedded(m.value(), inst.format), "partition": m.partition(),
                "offset": m.offset()} for m in messages]
    else:
        out = [{"topic": m.topic(), "key": await reader.decode(m.key()), "value": await reader.decode(m.value()),
                "partition": m.partition(), "offset": m.offset()} for m in messages]
    return edge.V2Response(out, media_type=formats.MEDIA_OF[inst.format])


async def commit(group: str, name: str, request: Request, _k: str = V2_BODY) -> Response:
    """Commit the given offsets (each the last record processed: Kafka stores the next one),
    or, with an empty body, every record this instance has returned."""
    inst = _instance(request, group, name)
    raw = await edge.read_body(request)
    body = edge.parse(raw, Offsets) if raw.strip() else Offsets()
    if body.offsets:
        _may_read(request, [o.topic for o in body.offsets])   # Kafka's OffsetCommit needs READ on the topic
        for o in body.offsets:  # 40401 / 40402 for what does not exist, rather than the broker's 50002
            await (await kafka(request)).partition(o.topic, o.partition)
        tps = [TopicPartition(o.topic, o.partition, o.offset + 1, metadata=o.metadata or "") for o in body.offsets]
    else:
        tps = [TopicPartition(t, p, off) for (t, p), off in inst.positions.items()]
    if tps:
        await inst.call(lambda: inst.consumer.commit(offsets=tps, asynchronous=False))
    return Response(status_code=200)


async def committed(group: str, name: str, body: Partitions, request: Request) -> dict:
    inst = _instance(request, group, name)
    _may_read(request, [p.topic for p in body.partitions])
    tps = await inst.call(inst.consumer.committed, [TopicPartition(p.topic, p.partition) for p in body.partitions], 10)
    return {"offsets": [{"topic": tp.topic, "partition": tp.partition, "offset": tp.offset if tp.offset >= 0 else -1,
                         "metadata": tp.metadata or ""} for tp in tps]}


async def seek(group: str, name: str, body: Offsets, request: Request, _k: str = V2_BODY) -> Response:
    inst = _instance(request, group, name)
    _may_read(request, [o.topic for o in body.offsets])
    await inst.call(inst.seek, [TopicPartition(o.topic, o.partition, o.offset) for o in body.offsets])
    return Response(status_code=204)


async def seek_to_beginning(group: str, name: str, body: Partitions, request: Request,
                            _k: str = V2_BODY) -> Response:
    return await _seek_to_edge(request, group, name, body, end=False)


async def seek_to_end(group: str, name: str, body: Partitions, request: Request, _k: str = V2_BODY) -> Response:
    return await _seek_to_edge(request, group, name, body, end=True)


async def _seek_to_edge(request: Request, group: str, name: str, body: Partitions, end: bool) -> Response:
    inst = _instance(request, group, name)
    await inst.call(inst.seek_to_edge, [(p.topic, p.partition) for p in body.partitions], end)
    return Response(status_code=204)
