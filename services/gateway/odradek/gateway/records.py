"""Confluent v3 produce (``POST /v3/clusters/{c}/topics/{t}/records``; path in ``routes``): one
``ProduceRequest`` per record, several concatenated in one body for a stream, answered one
``ProduceResponse`` (or error) per record, in order. Keys and values are BINARY (base64), JSON,
STRING, or AVRO/JSONSCHEMA/PROTOBUF data written with a schema through ``embedded``: by
``schema_id``, by ``schema_version`` of ``subject`` (default ``<topic>-key``/``<topic>-value``), by
its text ``schema`` (registered when new), or, with no type, the subject's latest schema."""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from dataclasses import dataclass

from fastapi import Request, Response
from pydantic import ValidationError

from odradek.gateway import edge, embedded, formats, v3
from odradek.gateway.auth import WRITE, require
from odradek.gateway.errors import GatewayError, InvalidBody, MalformedJson
from odradek.gateway.kafka import OutRecord
from odradek.gateway.metrics import RECORDS_IN
from odradek.gateway.models import ProduceData, ProduceRecord
from odradek.gateway.topics import bridge


SPACE = re.compile(r"\s*")


@dataclass(frozen=True)
class Encoded:
    data: bytes | None
    answer: dict | None     # the ProduceResponse's ``key`` / ``value``


def _requests(raw: bytes) -> list[ProduceRecord]:
    """The body's ProduceRequests: one JSON object, or several one after another (a stream)."""
    try:
        text = raw.decode()
    except UnicodeDecodeError as e:
        raise MalformedJson(f"The body is not UTF-8: {e}") from None
    decoder, out, at = json.JSONDecoder(), [], 0
    while (at := SPACE.match(text, at).end()) < len(text):
        try:
            start, (_, at) = at, decoder.raw_decode(text, at)
            out.append(ProduceRecord.model_validate_json(text[start:at]))   # JSON mode: base64 header values
        except ValueError as e:
            if isinstance(e, ValidationError):
                raise InvalidBody.from_pydantic(e.errors(), prefix=f"record {len(out)}") from None
            raise MalformedJson(f"Unexpected JSON in the body: {e}") from None
    return out


def _plain(kind: str, data) -> bytes:
    if kind == "BINARY":
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, TypeError, ValueError):
            raise InvalidBody(f"data={data!r} is not a base64 string.") from None
    if kind == "STRING":
        if not isinstance(data, str):
            raise InvalidBody(f"data={data!r} is not a string.")
        return data.encode()
    return formats.encode_json(data)


async def _encode(request: Request, topic: str, key: bool, given: ProduceData | None) -> Encoded:
    if given is None or (given.data is None and not given.names_a_schema):
        return Encoded(None, None)
    if given.type in ("BINARY", "JSON", "STRING"):
        data = None if given.data is None else _plain(given.type, given.data)
        return Encoded(data, {"type": given.type, "size": len(data or b"")})
    subject = given.subject or embedded.subject(topic, key)
    kind = embedded.V3_TYPES.get(given.type or "")
    if given.schema_id is not None:
        writer = await embedded.by_id(request, given.schema_id, kind)
    elif given.raw_schema is not None:
        writer = await embedded.by_text(request, subject, given.raw_schema, kind or "AVRO")
    else:
        writer = await embedded.by_version(request, subject, given.schema_version or "latest", kind)
    data = writer.encode(given.data, f"{'key' if key else 'value'}: ")   # 42203 when it does not conform
    schema_type = {v: k for k, v in embedded.V3_TYPES.items()}[writer.parsed.schema.type]
    return Encoded(data, {"type": schema_type, "subject": subject, "schema_id": writer.schema_id,
                          "schema_version": writer.version, "size": len(data or b"")})


async def produce(cluster_id: str, topic: str, request: Request,
                  _k: str = edge.content_type(formats.JSON), _=require(WRITE)) -> Response:
    cid = await v3.cluster_id(request, cluster_id)
    kafka = await bridge(request)
    t = await kafka.topic(topic)
    requests = _requests(await edge.read_body(request))
    for p in {r.partition_id for r in requests} - {None} - set(t.partitions):
        await kafka.partition(topic, p)   # 40402, unless it was just added
    answers: list[dict | None] = [None] * len(requests)
    pending = await _prepare(request, topic, requests, answers)
    deliveries = await kafka.produce(topic, [record for _, record, _ in pending])
    RECORDS_IN.inc(sum(d.error is None for d in deliveries))
    for (i, record, (key, value)), d in zip(pending, deliveries):
        if d.error is not None and len(requests) == 1:
            raise d.failure()
        answers[i] = edge.body(d.failure()) if d.error is not None else {
            "error_code": 200, "cluster_id": cid, "topic_name": topic, "partition_id": d.partition,
            "offset": d.offset, "timestamp": _iso(record.timestamp), "key": key, "value": value}
    return Response("\n".join(json.dumps(a, separators=(",", ":")) for a in answers), media_type=formats.JSON)


async def _prepare(request: Request, topic: str, requests: list[ProduceRecord], answers: list) -> list[tuple]:
    """(index, record, (key answer, value answer)) of each request encoded: every one is encoded (or
    refused) before any is written. A refusal is the answer of its request (of the whole call for one)."""
    out = []
    for i, r in enumerate(requests):
        try:
            key, value = await _encode(request, topic, True, r.key), await _encode(request, topic, False, r.value)
        except GatewayError as e:
            if len(requests) == 1:
                raise
            answers[i] = edge.body(e)
            continue
        ts = int(r.timestamp.timestamp() * 1000) if r.timestamp else int(time.time() * 1000)
        headers = [(h.name, h.value) for h in r.headers] or None
        out.append((i, OutRecord(value.data, key.data, r.partition_id, headers, ts), (key.answer, value.answer)))
    return out


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"
