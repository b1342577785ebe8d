"""Avro data in Avro's JSON encoding, the shape REST clients send and read (Confluent's REST Proxy
converts with Avro's JSON decoder and encoder: a union's value is ``{"type name": value}``, bytes
are ISO-8859-1 strings), to and from the binary encoding that ``odradek.serde.codecs.AvroCodec``
(fastavro, as Confluent's Python serializers) writes and reads. The schema is the registry's
parsed Apache Avro schema (references already resolved into it)."""

from __future__ import annotations

import io
import json

import avro.schema
import fastavro
from fastavro.validation import ValidationError, validate

from odradek.gateway.serde.errors import SerdeError
from odradek.serde.codecs import AvroCodec


def codec(schema: avro.schema.Schema, referenced: dict[str, str]) -> AvroCodec:
    return AvroCodec(raw=schema.to_json())


def encode(codec: AvroCodec, value) -> bytes:
    """``value`` in Avro's JSON encoding as Avro binary."""
    try:
        datum = next(fastavro.json_reader(io.StringIO(json.dumps(value)), codec.parsed))
    except (ValueError, TypeError, KeyError, AttributeError) as e:   # fastavro's JSON decoder's own refusals
        raise SerdeError(f"{type(e).__name__}: {e}") from None
    try:
        validate(datum, codec.parsed, raise_errors=True)   # names the field, where the writer would not
    except ValidationError as e:
        raise SerdeError("; ".join(map(str, e.errors))) from None
    return codec.encode(datum)


def decode(codec: AvroCodec, data: bytes):
    """Avro binary as a value in Avro's JSON encoding."""
    try:
        datum = codec.decode(data)
    except (EOFError, ValueError, IndexError, UnicodeDecodeError) as e:
        raise SerdeError(f"Invalid Avro data for the schema: {e}") from None
    out = io.StringIO()
    fastavro.json_writer(out, codec.parsed, [datum])
    return json.loads(out.getvalue())
