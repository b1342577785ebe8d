"""Avro data through fastavro (the Avro implementation Confluent's Python serializers use): the
binary encoding on the topic, and Avro's JSON encoding for the values REST clients send and read
(Confluent's REST Proxy converts with Avro's JSON decoder and encoder: a union's value is
``{"type name": value}``, bytes are ISO-8859-1 strings). The schema is the registry's parsed
Apache Avro schema (references already resolved into it)."""

from __future__ import annotations

import io
import json

import avro.schema
import fastavro
from fastavro.validation import ValidationError, validate

from odradek.gateway.serde.errors import SerdeError


_PARSED: dict[int, tuple[avro.schema.Schema, dict]] = {}
CACHED = 512


def _fastavro(schema: avro.schema.Schema):
    """fastavro's parsed schema, cached by the object's identity (an Avro schema's hash renders
    its JSON: 27 us, more than writing a small record)."""
    found = _PARSED.get(id(schema))
    if found is None or found[0] is not schema:
        if len(_PARSED) >= CACHED:
            _PARSED.clear()
        found = _PARSED[id(schema)] = (schema, fastavro.parse_schema(schema.to_json()))
    return found[1]


def encode(schema: avro.schema.Schema, value) -> bytes:
    """``value`` in Avro's JSON encoding as Avro binary."""
    parsed = _fastavro(schema)
    try:
        datum = next(fastavro.json_reader(io.StringIO(json.dumps(value)), parsed))
    except (ValueError, TypeError, KeyError, AttributeError) as e:   # fastavro's JSON decoder's own refusals
        raise SerdeError(f"{type(e).__name__}: {e}") from None
    return write_datum(schema, datum)


def write_datum(schema: avro.schema.Schema, datum) -> bytes:
    """A Python datum (fastavro's: dicts, bytes, a union's value bare) as Avro binary."""
    parsed = _fastavro(schema)
    try:
        validate(datum, parsed, raise_errors=True)
    except ValidationError as e:
        raise SerdeError("; ".join(map(str, e.errors))) from None
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, datum)
    return out.getvalue()


def read_datum(schema: avro.schema.Schema, data: bytes):
    """Avro binary as a Python datum (fastavro's)."""
    try:
        return fastavro.schemaless_reader(io.BytesIO(data), _fastavro(schema), None)
    except (EOFError, ValueError, IndexError, UnicodeDecodeError) as e:
        raise SerdeError(f"Invalid Avro data for the schema: {e}") from None


def decode(schema: avro.schema.Schema, data: bytes):
    """Avro binary as a value in Avro's JSON encoding."""
    out = io.StringIO()
    fastavro.json_writer(out, _fastavro(schema), [read_datum(schema, data)])
    return json.loads(out.getvalue())
