"""Topic routes (paths in ``routes``): REST Proxy v2 metadata and produce, plus Odradek's
group-less range read (JSON or Arrow) and streaming NDJSON produce — the two paths Spark jobs
use. Errors are raised as domain errors; ``edge`` answers them."""

from __future__ import annotations

import json

from fastapi import Query, Request, Response
from pydantic import ValidationError

from odradek.gateway import edge, embedded, formats, framed
from odradek.gateway.auth import READ, WRITE, require
from odradek.gateway.errors import (InvalidBody, InvalidSchema, KeySchemaMissing, PartitionNotFound, RecordTooLarge,
                                    ValueSchemaMissing)
from odradek.gateway.kafka import Delivery, KafkaBridge, OutRecord, read_range
from odradek.gateway.metrics import RECORDS_IN, RECORDS_OUT
from odradek.gateway.models import STREAM_RECORDS, StreamRecord, V2BinaryProduceRequest, V2ProduceRequest
from odradek.gateway.principals import kafka as principal_kafka, listing_principal
from odradek.topics import is_internal


async def bridge(request: Request, optional: bool = False) -> KafkaBridge:
    """The Kafka clients of the request's principal (``principals``)."""
    return await principal_kafka(request, optional)


# -- metadata ---------------------------------------------------------------------------------------
def _partition_json(p) -> dict:
    return {"partition": p.id, "leader": p.leader,
            "replicas": [{"broker": b, "leader": b == p.leader, "in_sync": b in p.isrs} for b in p.replicas]}


async def list_topics(request: Request) -> list[str]:
    md = await (await bridge(request, optional=True)).metadata(fresh=True)
    who = listing_principal(request)
    return sorted(n for n, t in md.topics.items() if t.error is None and not is_internal(n) and who.sees(n))


async def get_topic(topic: str, request: Request, _=require(READ)) -> dict:
    t = await (await bridge(request)).topic(topic)
    configs = await (await bridge(request)).topic_configs(topic)
    overrides = {k: v.value for k, v in configs.items() if not v.is_default and v.value is not None}
    return {"name": topic, "configs": overrides,
            "partitions": [_partition_json(t.partitions[p]) for p in sorted(t.partitions)]}


async def list_partitions(topic: str, request: Request, _=require(READ)) -> list[dict]:
    t = await (await bridge(request)).topic(topic)
    return [_partition_json(t.partitions[p]) for p in sorted(t.partitions)]


async def get_partition(topic: str, partition: int, request: Request, _=require(READ)) -> dict:
    return _partition_json(await (await bridge(request)).partition(topic, partition))


ISOLATION = Query("read_uncommitted", pattern="^(read_uncommitted|read_committed)$",
                  description="read_committed: the end is the last stable offset, and no record of an "
                              "aborted or open transaction is returned")


async def partition_offsets(topic: str, partition: int, request: Request, _=require(READ),
                            timestamp: int | None = Query(None, description="ms since the epoch: the "
                                                          "earliest offset whose timestamp is >= it"),
                            isolation_level: str = ISOLATION) -> dict:
    kafka = await bridge(request)
    await kafka.partition(topic, partition)
    if timestamp is not None:
        return {"timestamp": timestamp, "offset": await kafka.offset_for_time(topic, partition, timestamp)}
    low, high = await kafka.watermarks(topic, partition, committed=isolation_level == "read_committed")
    return {"beginning_offset": low, "end_offset": high}


async def list_brokers(request: Request) -> dict:
    md = await (await bridge(request, optional=True)).metadata(fresh=True)
    return {"brokers": sorted(md.brokers)}


# -- v2 produce -------------------------------------------------------------------------------------
V2_PRODUCE_TYPES = (formats.V2_BINARY, formats.V2_JSON, formats.JSON, formats.V2_AVRO, formats.V2_JSONSCHEMA,
                    formats.V2_PROTOBUF)


async def _v2_produce(request: Request, topic: str, kind: str, partition: int | None) -> dict:
    binary = kind == formats.V2_BINARY
    body: V2ProduceRequest = await edge.parse_body(request, V2BinaryProduceRequest if binary else V2ProduceRequest)
    kafka = await bridge(request)
    t = await kafka.topic(topic)
    keys, values = await _v2_writers(request, topic, formats.EMBEDDED.get(kind, "json"), body)
    limit = request.app.state.settings.max_record_bytes
    records = []
    for i, r in enumerate(body.records):
        p = partition if partition is not None else r.partition
        if p is not None and p not in t.partitions:
            await kafka.partition(topic, p)   # 40402, unless it was just added
        rec = (OutRecord(r.value, r.key, p) if binary else
               OutRecord(values.encode(r.value, f"records.{i}.value: "), keys.encode(r.key, f"records.{i}.key: "), p))
        if len(rec.value or b"") + len(rec.key or b"") > limit:
            raise RecordTooLarge.over_limit(f"records.{i}", limit)
        records.append(rec)
    deliveries = await kafka.produce(topic, records)
    RECORDS_IN.inc(len(records))
    return {"key_schema_id": keys.schema_id, "value_schema_id": values.schema_id,
            "offsets": [_v2_offset(d) for d in deliveries]}


class _JsonWriter:
    """The json format's "writer": a value's JSON text, with no schema."""
    schema_id = None

    @staticmethod
    def encode(value, where: str = "") -> bytes | None:
        return formats.encode_json(value)


async def _v2_writers(request: Request, topic: str, fmt: str, body: V2ProduceRequest) -> tuple:
    """How keys and values are written: with their schemas in a schema format, else as JSON (the
    binary format's bytes need none)."""
    if fmt not in embedded.FORMATS:
        if body.key_schema or body.value_schema or body.key_schema_id or body.value_schema_id:
            raise InvalidSchema(f"the {fmt} format takes no schema (avro, jsonschema and protobuf do)")
        return _JsonWriter, _JsonWriter
    kind = embedded.FORMATS[fmt]

    async def writer(key: bool, text: str | None, schema_id: int | None):
        if schema_id is not None:
            return await embedded.by_id(request, schema_id, kind)
        if text is not None:
            return await embedded.by_text(request, embedded.subject(topic, key), text, kind)
        if any((r.key if key else r.value) is not None for r in body.records):
            raise (KeySchemaMissing if key else ValueSchemaMissing)()
        return _JsonWriter      # every key (value) is null: nothing to encode
    return (await writer(True, body.key_schema, body.key_schema_id),
            await writer(False, body.value_schema, body.value_schema_id))


def _v2_offset(d) -> dict:
    if d.error is None:
        return {"partition": d.partition, "offset": d.offset, "error_code": None, "error": None}
    # REST Proxy v2: 1 = non-retriable, 2 = retriable Kafka exception
    return {"partition": d.partition, "offset": None, "error_code": 2 if d.error.retriable() else 1,
            "error": d.error.str()}


async def produce(topic: str, request: Request, kind: str = edge.content_type(*V2_PRODUCE_TYPES),
                  _=require(WRITE)) -> dict:
    return await _v2_produce(request, topic, kind, None)


async def produce_to_partition(topic: str, partition: int, request: Request,
                               kind: str = edge.content_type(*V2_PRODUCE_TYPES), _=require(WRITE)) -> dict:
    return await _v2_produce(request, topic, kind, partition)


# -- streaming produce (NDJSON) ---------------------------------------------------------------------
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
            raise RecordTooLarge.over_limit(f"line {n}", limit)
    return [OutRecord(r.value, r.key, r.partition, [(h.key or "", h.value) for h in r.headers], r.timestamp)
            if r.headers else r for r in records]


def _stream_record(line: bytes, n: int) -> StreamRecord:
    try:
        return StreamRecord.model_validate_json(line)
    except ValidationError as e:
        raise InvalidBody.from_pydantic(e.errors(), prefix=f"line {n}") from None


async def produce_stream(topic: str, request: Request, _k: str = edge.content_type(formats.NDJSON),
                         _=require(WRITE)) -> Response:
    """Many records per request, one JSON object per line (key, value and header values base64);
    answers one line per record, in order: ``{"partition", "offset"}`` or an error."""
    kafka = await bridge(request)
    t = await kafka.topic(topic)
    limit = request.app.state.settings.max_record_bytes
    lines = [ln for ln in (await edge.read_body(request)).splitlines() if ln.strip()]
    records = _stream_records(lines, limit)
    for n, r in enumerate(records, 1):
        if r.partition is not None and r.partition not in t.partitions:
            try:
                await kafka.partition(topic, r.partition)   # it may have just been added
            except PartitionNotFound:
                raise PartitionNotFound(topic, r.partition, where=f"line {n}: ") from None
    deliveries = await kafka.produce(topic, records)
    RECORDS_IN.inc(len(records))
    return Response("".join(map(_ndjson_line, deliveries)), media_type=formats.NDJSON)


def _ndjson_line(d: Delivery) -> str:
    """A delivery as one NDJSON answer line (the common success case formatted directly: it is
    the streaming produce's per-record cost)."""
    if d.error is None:
        return f'{{"partition":{d.partition},"offset":{d.offset}}}\n'
    return json.dumps(edge.body(d.failure()), separators=(",", ":")) + "\n"


# -- group-less range read --------------------------------------------------------------------------
async def read_records(topic: str, partition: int, request: Request, _=require(READ),
                       offset: int = Query(..., ge=0), end: int | None = Query(None, ge=0),
                       max_bytes: int = Query(8 << 20, ge=1, le=256 << 20),
                       isolation_level: str = ISOLATION, schemas: bool = Query(False)) -> Response:
    """Offsets ``[offset, end)`` (end defaults to the high watermark, or the last stable offset
    under read_committed), about ``max_bytes`` of record data; the header
    ``Odradek-Next-Offset`` says where to continue. ``schemas=true`` (JSON only): registry-framed
    keys and values also decoded (``framed``), for the console."""
    kafka = await bridge(request)
    await kafka.partition(topic, partition)
    committed = isolation_level == "read_committed"
    stop = end if end is not None else (await kafka.watermarks(topic, partition, committed))[1]
    media_type = formats.ARROW if formats.ARROW in request.headers.get("accept", "") else formats.JSON
    if offset >= stop:
        count, body, next_offset, error = 0, _encode([], topic, partition, media_type), offset, None
    else:
        count, body, next_offset, error = await kafka.with_reader(
            _read_encoded, topic, partition, offset, stop, max_bytes, media_type, position=(topic, partition, offset),
            committed=committed)
    if error is not None and not count:
        raise await kafka.read_failure(topic, partition, offset, error)
    if schemas and media_type == formats.JSON:
        body = await framed.decoded_body(request, topic, body)
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
