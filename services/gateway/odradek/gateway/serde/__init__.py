"""Registry-framed record data for the gateway's REST formats: bytes <-> JSON-shaped values given
a schema the registry parsed (``registry.schemas.Parsed``). Pure: no registry, no Kafka, no HTTP;
the gateway's ``embedded`` uses it.

The wire format (magic byte 0, the schema id as 4 bytes big-endian, Protobuf's message indexes)
and the codecs (fastavro's parsed schemas, jsonschema's validators, Protobuf's dynamic messages)
are the client package's, one implementation for the gateway and the Spark source:
``odradek.serde.wire`` and ``odradek.serde.codecs``. What this package owns: a codec per parsed
schema (cached by the parsed object's identity), the conversions to and from the JSON shapes
Confluent's REST Proxy reads and answers (``avro_data``: Avro's JSON encoding, unions as
``{"branch": value}``; ``json_data``: JSON documents; ``proto_data``: Protobuf's JSON mapping),
and one error, ``SerdeError``, for everything the codecs and the wire format refuse.

    frame(schema_id, encode(parsed, value)) -> bytes on the topic
    decode(parsed, unframe(data)[1])        -> the value again
"""

from __future__ import annotations

from odradek.gateway.registry.schemas import AVRO, JSON, PROTOBUF, Parsed
from odradek.gateway.serde import avro_data, json_data, proto_data
from odradek.gateway.serde.errors import SerdeError
from odradek.serde import codecs, wire

__all__ = ["SerdeError", "frame", "unframe", "encode", "decode", "MAGIC"]

MAGIC = wire.MAGIC
FORMATS = {AVRO: avro_data, JSON: json_data, PROTOBUF: proto_data}
CACHED = 512
_CODECS: dict[int, tuple[object, dict, object]] = {}   # id -> (parsed value, references, codec)


def frame(schema_id: int, data: bytes) -> bytes:
    return wire.frame(schema_id, data)


def unframe(data: bytes) -> tuple[int, bytes]:
    """(schema id, the data after the header); SerdeError when ``data`` is not registry-framed."""
    try:
        schema_id, payload = wire.unframe(data)
    except wire.WireFormatError:
        raise SerdeError("Unknown magic byte: the record was not written with a schema registry serializer") from None
    return schema_id, bytes(payload)


def encode(parsed: Parsed, value, referenced: dict[str, str] | None = None) -> bytes:
    """``value`` (JSON-shaped) as the data of ``parsed``'s format; SerdeError when it does not
    conform to the schema. ``referenced`` (reference name -> schema text, as the registry resolves
    them) serves JSON Schema's ``$ref``s; Avro and Protobuf have theirs in ``parsed`` already."""
    try:
        return FORMATS[parsed.schema.type].encode(codec(parsed, referenced or {}), value)
    except (codecs.SchemaError, wire.WireFormatError) as e:
        raise SerdeError(str(e)) from None


def decode(parsed: Parsed, data: bytes):
    """The data of a record written with ``parsed`` (after the header) as a JSON-shaped value."""
    try:
        return FORMATS[parsed.schema.type].decode(codec(parsed), data)
    except (codecs.SchemaError, wire.WireFormatError) as e:
        raise SerdeError(str(e)) from None


def codec(parsed: Parsed, referenced: dict[str, str] | None = None):
    """``odradek.serde.codecs``' codec of ``parsed``, cached by the parsed value's identity (an
    Avro schema's hash renders its JSON: 27 us, more than writing a small record; a validator or a
    descriptor pool costs more to build than to use). ``referenced`` None: any (decoding)."""
    value = parsed.value
    found = _CODECS.get(id(value))
    if found is None or found[0] is not value or (referenced is not None and found[1] != referenced):
        if len(_CODECS) >= CACHED:
            _CODECS.clear()
        referenced = dict(referenced or {})
        found = _CODECS[id(value)] = (value, referenced, FORMATS[parsed.schema.type].codec(value, referenced))
    return found[2]
