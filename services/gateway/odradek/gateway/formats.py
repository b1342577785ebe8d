"""Record encodings: REST Proxy v2's embedded formats (binary = base64, json = any JSON value;
the media types of the schema formats, whose encoding is ``embedded``'s) and the Arrow IPC
stream of Spark's Kafka-source columns."""

from __future__ import annotations

import base64
import json

import pyarrow as pa

from odradek.gateway.errors import UndecodableRecord

V2_BINARY = "application/vnd.kafka.binary.v2+json"
V2_JSON = "application/vnd.kafka.json.v2+json"
V2_AVRO = "application/vnd.kafka.avro.v2+json"
V2_JSONSCHEMA = "application/vnd.kafka.jsonschema.v2+json"
V2_PROTOBUF = "application/vnd.kafka.protobuf.v2+json"
# each v2 embedded format's media type; avro, jsonschema and protobuf are ``embedded``'s
EMBEDDED = {V2_BINARY: "binary", V2_JSON: "json", V2_AVRO: "avro", V2_JSONSCHEMA: "jsonschema",
            V2_PROTOBUF: "protobuf"}
MEDIA_OF = {fmt: media for media, fmt in EMBEDDED.items()}
V2 = "application/vnd.kafka.v2+json"
JSON = "application/json"
NDJSON = "application/x-ndjson"
ARROW = "application/vnd.apache.arrow.stream"

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
SPARK_SCHEMA = pa.schema([
    ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()), ("partition", pa.int32()),
    ("offset", pa.int64()), ("timestamp", pa.timestamp("ms", tz="UTC")), ("timestampType", pa.int32()),
    ("headers", HEADER_TYPE)])
# librdkafka's timestamp types (0 none, 1 create, 2 log-append) as Spark numbers them (0 create, 1 log-append)
SPARK_TIMESTAMP_TYPE = {0: 0, 1: 0, 2: 1}


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";")[0].strip().lower()


def b64encode(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def encode_json(value) -> bytes | None:
    """A v2 json-format record field as the bytes of its JSON text (the binary format's base64 is
    decoded by the request model)."""
    return None if value is None else json.dumps(value, separators=(",", ":")).encode()


def decode_embedded(data: bytes | None, fmt: str):
    if data is None:
        return None
    if fmt == "binary":
        return b64encode(data)
    try:
        return json.loads(data)
    except ValueError:
        raise UndecodableRecord() from None


def _headers(h) -> list[dict] | None:
    return [{"key": k, "value": v} for k, v in h] if h else None


def arrow_batch(messages: list, topic: str, partition: int) -> pa.RecordBatch:
    timestamps = [m.timestamp() for m in messages]
    headers = [m.headers() for m in messages]
    return pa.RecordBatch.from_arrays([
        pa.array([m.key() for m in messages], pa.binary()),
        pa.array([m.value() for m in messages], pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), len(messages)),
        pa.repeat(pa.scalar(partition, pa.int32()), len(messages)),
        pa.array([m.offset() for m in messages], pa.int64()),
        pa.array([t[1] for t in timestamps], pa.timestamp("ms", tz="UTC")),
        pa.array([SPARK_TIMESTAMP_TYPE.get(t[0], 0) for t in timestamps], pa.int32()),
        pa.array([_headers(h) for h in headers] if any(headers) else [None] * len(messages), HEADER_TYPE),
    ], schema=SPARK_SCHEMA)


def arrow_stream(batch: pa.RecordBatch) -> memoryview:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, SPARK_SCHEMA) as writer:
        if batch.num_rows:
            writer.write_batch(batch)
    return memoryview(sink.getvalue())  # no copy: the response writes Arrow's buffer


def json_records(messages: list, topic: str, partition: int) -> list[dict]:
    out = []
    for m in messages:
        kind, ts = m.timestamp()
        h = m.headers()
        out.append({"topic": topic, "key": b64encode(m.key()), "value": b64encode(m.value()),
                    "partition": partition, "offset": m.offset(), "timestamp": ts,
                    "timestampType": SPARK_TIMESTAMP_TYPE.get(kind, 0),
                    "headers": [{"key": k, "value": b64encode(v)} for k, v in h] if h else None})
    return out
