"""Topics over HTTP: REST Proxy v2 metadata and produce, plus Odradek's group-less range read
(JSON or Arrow) and streaming NDJSON produce — the two paths Spark jobs use."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from odradek.gateway import formats
from odradek.gateway.auth import READ, WRITE, require
from odradek.gateway.errors import OFFSET_OUT_OF_RANGE, RECORD_TOO_LARGE, RestError, acceptable, too_large_message
from odradek.gateway.kafka import OutRecord, read_range
from odradek.gateway.metrics import RECORDS_IN, RECORDS_OUT

router = APIRouter(dependencies=[acceptable(formats.V2, "application/vnd.kafka+json", formats.JSON,
                                             formats.ARROW, formats.NDJSON)])


class V2Response(JSONResponse):
    media_type = formats.V2


def bridge(request: Request):
    return request.app.state.kafka


def content_type(*allowed: str):
    def check(request: Request) -> str:
        kind = formats.media_type(request.headers.get("content-type"))
        if kind not in allowed:
            raise RestError(415, 415, f"HTTP 415 Unsupported Media Type: expected one of {', '.join(allowed)}")
        return kind
    return Depends(check)


# -- metadata ---------------------------------------------------------------------------------------
def _partition_json(p) -> dict:
    return {"partition": p.id, "leader": p.leader,
            "replicas": [{"broker": b, "leader": b == p.leader, "in_sync": b in p.isrs} for b in p.replicas]}


@router.get("/topics", response_class=V2Response)
async def list_topics(request: Request) -> list[str]:
    md = await bridge(request).metadata(fresh=True)
    return sorted(n for n, t in md.topics.items() if t.error is None and not n.startswith("__"))


@router.get("/topics/{topic}", response_class=V2Response)
async def get_topic(topic: str, request: Request, _=require(READ)) -> dict:
    t = await bridge(request).topic(topic)
    admin = bridge(request).admin
    configs = await _topic_configs(admin, topic)
    return {"name": topic, "configs": configs,
            "partitions": [_partition_json(t.partitions[p]) for p in sorted(t.partitions)]}


async def _topic_configs(admin, topic: str) -> dict[str, str]:
    import asyncio
    from confluent_kafka.admin import ConfigResource
    resource = ConfigResource("topic", topic)
    result = await asyncio.to_thread(lambda: admin.describe_configs([resource])[resource].result(10))
    return {k: v.value for k, v in result.items() if not v.is_default and v.value is not None}


@router.get("/topics/{topic}/partitions", response_class=V2Response)
async def list_partitions(topic: str, request: Request, _=require(READ)) -> list[dict]:
    t = await bridge(request).topic(topic)
    return [_partition_json(t.partitions[p]) for p in sorted(t.partitions)]


@router.get("/topics/{topic}/partitions/{partition}", response_class=V2Response)
async def get_partition(topic: str, partition: int, request: Request, _=require(READ)) -> dict:
    return _partition_json(await bridge(request).partition(topic, partition))


@router.get("/topics/{topic}/partitions/{partition}/offsets", response_class=V2Response)
async def partition_offsets(topic: str, partition: int, request: Request, _=require(READ),
                            timestamp: int | None = Query(None, description="ms since the epoch: the "
                                                          "earliest offset whose timestamp is >= it")) -> dict:
    kafka = bridge(request)
    await kafka.partition(topic, partition)
    if timestamp is not None:
        return {"timestamp": timestamp, "offset": await kafka.offset_for_time(topic, partition, timestamp)}
    low, high = await kafka.watermarks(topic, partition)
    return {"beginning_offset": low, "end_offset": high}


@router.get("/brokers", response_class=V2Response)
async def list_brokers(request: Request) -> dict:
    md = await bridge(request).metadata(fresh=True)
    return {"brokers": sorted(md.brokers)}


# -- v2 produce -------------------------------------------------------------------------------------
class V2Record(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: Any = None
    value: Any = None
    partition: int | None = Field(None, ge=0)


class V2ProduceRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    records: list[V2Record]
    key_schema: str | None = None
    key_schema_id: int | None = None
    value_schema: str | None = None
    value_schema_id: int | None = None


class V2BinaryRecord(V2Record):
    # base64 decoded by pydantic-core while it validates (a Python call per value cost more)
    model_config = ConfigDict(extra="forbid", val_json_bytes="base64")
    key: bytes | None = None
    value: bytes | None = None


class V2BinaryProduceRequest(V2ProduceRequest):
    records: list[V2BinaryRecord]


V2_PRODUCE_TYPES = (formats.V2_BINARY, formats.V2_JSON, formats.JSON)


async def read_body(request: Request) -> bytes:
    """The whole body, refused (413) as soon as it passes --max-request-bytes (a chunked body has
    no Content-Length for the middleware to check)."""
    limit, chunks, size = request.app.state.settings.max_request_bytes, [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RestError(413, 413, too_large_message(size, limit))
        chunks.append(chunk)
    return b"".join(chunks)


async def _parse(request: Request, model: type[BaseModel]):
    raw = await read_body(request)
    try:
        return model.model_validate_json(raw)
    except ValidationError as e:
        first = e.errors()[0]
        status = 400 if first["type"] == "json_invalid" else 422
        where = ".".join(str(p) for p in first["loc"])
        raise RestError(status, status, f"{where}: {first['msg']}".lstrip(": ")) from None


async def _v2_produce(request: Request, topic: str, kind: str, partition: int | None) -> dict:
    binary = kind == formats.V2_BINARY
    body: V2ProduceRequest = await _parse(request, V2BinaryProduceRequest if binary else V2ProduceRequest)
    if body.key_schema or body.value_schema or body.key_schema_id or body.value_schema_id:
        raise RestError(422, 42205, "Schemas are not supported: Odradek has no schema registry "
                                    "(use the json or binary format)")
    kafka = bridge(request)
    t = await kafka.topic(topic)
    limit = request.app.state.settings.max_record_bytes
    records = []
    for i, r in enumerate(body.records):
        p = partition if partition is not None else r.partition
        if p is not None and p not in t.partitions:
            await kafka.partition(topic, p)   # 40402, unless it was just added
        rec = OutRecord(r.value, r.key, p) if binary else OutRecord(formats.encode_json(r.value),
                                                                    formats.encode_json(r.key), p)
        if len(rec.value or b"") + len(rec.key or b"") > limit:
            raise RestError(413, RECORD_TOO_LARGE, f"records.{i} is larger than the record size limit ({limit} bytes)")
        records.append(rec)
    deliveries = await kafka.produce(topic, records)
    RECORDS_IN.inc(len(records))
    return {"key_schema_id": None, "value_schema_id": None, "offsets": [_v2_offset(d) for d in deliveries]}


def _v2_offset(d) -> dict:
    if d.error is None:
        return {"partition": d.partition, "offset": d.offset, "error_code": None, "error": None}
    # REST Proxy v2: 1 = non-retriable, 2 = retriable Kafka exception
    return {"partition": d.partition, "offset": None, "error_code": 2 if d.error.retriable() else 1,
            "error": d.error.str()}


@router.post("/topics/{topic}", response_class=V2Response)
async def produce(topic: str, request: Request, kind: str = content_type(*V2_PRODUCE_TYPES),
                  _=require(WRITE)) -> dict:
    return await _v2_produce(request, topic, kind, None)


@router.post("/topics/{topic}/partitions/{partition}", response_class=V2Response)
async def produce_to_partition(topic: str, partition: int, request: Request,
                               kind: str = content_type(*V2_PRODUCE_TYPES), _=require(WRITE)) -> dict:
    return await _v2_produce(request, topic, kind, partition)


# -- streaming produce (NDJSON) ---------------------------------------------------------------------
class StreamHeader(BaseModel):
    model_config = ConfigDict(val_json_bytes="base64")   # each model has its own config
    key: str | None = None
    value: bytes | None = None


class StreamRecord(BaseModel):
    # bytes fields are base64 in JSON: pydantic-core decodes them in Rust while it validates
    model_config = ConfigDict(extra="forbid", val_json_bytes="base64")
    value: bytes | None = None
    key: bytes | None = None
    partition: int | None = Field(None, ge=0)
    headers: list[StreamHeader] | None = None
    timestamp: int | None = None


STREAM_RECORDS = TypeAdapter(list[StreamRecord])


def _stream_records(lines: list[bytes], limit: int) -> list:
    """The NDJSON lines as records, validated in one call of pydantic-core over the lines joined
    as a JSON array (half the cost of a call per line); when that fails, or a line held more than
    one value, line by line to name the bad line."""
    try:
        records = STREAM_RECORDS.validate_json(b"[" + b",".join(lines) + b"]")
    except ValidationError:
        records = None
    if records is None or len(records) != len(lines):
        records = [_stream_record(ln, n) for n, ln in enumerate(lines, 1)]
    for n, r in enumerate(records, 1):
        if len(r.value or b"") + len(r.key or b"") > limit:
            raise RestError(413, RECORD_TOO_LARGE, f"line {n} is larger than the record size limit ({limit} bytes)")
    return [OutRecord(r.value, r.key, r.partition, [(h.key or "", h.value) for h in r.headers], r.timestamp)
            if r.headers else r for r in records]


def _stream_record(line: bytes, n: int) -> StreamRecord:
    try:
        return StreamRecord.model_validate_json(line)
    except ValidationError as e:
        first = e.errors()[0]
        status = 400 if first["type"] == "json_invalid" else 422
        raise RestError(status, status, f"line {n}: {'.'.join(map(str, first['loc']))} {first['msg']}".strip()) from None


@router.post("/topics/{topic}/records")
async def produce_stream(topic: str, request: Request, _k: str = content_type(formats.NDJSON),
                         _=require(WRITE)) -> Response:
    """Many records per request, one JSON object per line (key, value and header values base64);
    answers one line per record, in order: ``{"partition", "offset"}`` or an error."""
    kafka = bridge(request)
    t = await kafka.topic(topic)
    limit = request.app.state.settings.max_record_bytes
    lines = [ln for ln in (await read_body(request)).splitlines() if ln.strip()]
    records = _stream_records(lines, limit)
    for n, r in enumerate(records, 1):
        if r.partition is not None and r.partition not in t.partitions:
            try:
                await kafka.partition(topic, r.partition)   # it may have just been added
            except RestError:
                raise RestError(404, 40402, f"line {n}: partition {r.partition} of topic {topic} not found.") from None
    deliveries = await kafka.produce(topic, records)
    RECORDS_IN.inc(len(records))
    text = "".join(d.to_ndjson() for d in deliveries)
    return Response(text, media_type=formats.NDJSON)


# -- group-less range read --------------------------------------------------------------------------
@router.get("/topics/{topic}/partitions/{partition}/records",
            responses={200: {"content": {formats.ARROW: {}, formats.JSON: {}}}})
async def read_records(topic: str, partition: int, request: Request, _=require(READ),
                       offset: int = Query(..., ge=0), end: int | None = Query(None, ge=0),
                       max_bytes: int = Query(8 << 20, ge=1, le=256 << 20)) -> Response:
    """Offsets ``[offset, end)`` (end defaults to the high watermark), about ``max_bytes`` of
    record data; the header ``Odradek-Next-Offset`` says where to continue."""
    kafka = bridge(request)
    await kafka.partition(topic, partition)
    stop = end if end is not None else (await kafka.watermarks(topic, partition))[1]
    media_type = formats.ARROW if formats.ARROW in request.headers.get("accept", "") else formats.JSON
    if offset >= stop:
        count, body, next_offset, error = 0, _encode([], topic, partition, media_type), offset, None
    else:
        count, body, next_offset, error = await kafka.with_reader(
            _read_encoded, topic, partition, offset, stop, max_bytes, media_type, position=(topic, partition, offset))
    if error is not None and not count:
        await _raise_read_error(kafka, topic, partition, offset, error)
    RECORDS_OUT.inc(count)
    return Response(body, media_type=media_type, headers={"Odradek-Next-Offset": str(next_offset)})


def _read_encoded(reader, topic: str, partition: int, offset: int, stop: int, max_bytes: int, media_type: str):
    """``read_range`` and the answer's body, both in the reader's thread: encoding a chunk of
    tens of MB blocked the event loop (and every other request) for as long as it took."""
    messages, next_offset, error = read_range(reader, topic, partition, offset, stop, max_bytes)
    return len(messages), _encode(messages, topic, partition, media_type), next_offset, error


def _encode(messages: list, topic: str, partition: int, media_type: str):
    if media_type == formats.ARROW:
        return formats.arrow_stream(formats.arrow_batch(messages, topic, partition))
    return json.dumps(formats.json_records(messages, topic, partition), separators=(",", ":")).encode()


async def _raise_read_error(kafka, topic: str, partition: int, offset: int, error) -> None:
    from confluent_kafka import KafkaError
    if error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
        low, high = await kafka.watermarks(topic, partition)
        raise RestError(416, OFFSET_OUT_OF_RANGE, f"Offset {offset} is out of range [{low}, {high}] of "
                        f"{topic}-{partition}", headers={"Odradek-Log-Start-Offset": str(low)})
    raise RestError(503 if error.retriable() else 500, 50003 if error.retriable() else 50002, error.str())
