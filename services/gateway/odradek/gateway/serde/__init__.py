"""Registry-framed record data, as Confluent's serializers write it: bytes <-> Python values given
a schema the registry parsed (``registry.schemas.Parsed``). Pure: no registry, no Kafka, no HTTP;
the gateway (``embedded``) and the Spark source may both use it.

The wire format: magic byte 0, the schema id as 4 bytes big-endian, then the data: Avro binary
(``avro_data``), UTF-8 JSON text (``json_data``), or the Protobuf message indexes and message
(``proto_data``). Values are JSON-shaped as Confluent's REST Proxy reads and answers them: Avro's
JSON encoding (unions as ``{"branch": value}``), JSON documents, Protobuf's JSON mapping.

    frame(schema_id, encode(parsed, value)) -> bytes on the topic
    decode(parsed, unframe(data)[1])        -> the value again
"""

from __future__ import annotations

import struct

from odradek.gateway.registry.schemas import AVRO, JSON, PROTOBUF, Parsed
from odradek.gateway.serde import avro_data, json_data, proto_data
from odradek.gateway.serde.errors import SerdeError

__all__ = ["SerdeError", "frame", "unframe", "encode", "decode", "MAGIC"]

MAGIC = 0
HEADER = struct.Struct(">bI")
CODECS = {AVRO: avro_data, JSON: json_data, PROTOBUF: proto_data}


def frame(schema_id: int, data: bytes) -> bytes:
    return HEADER.pack(MAGIC, schema_id) + data


def unframe(data: bytes) -> tuple[int, bytes]:
    """(schema id, the data after the header); SerdeError when ``data`` is not registry-framed."""
    if len(data) < HEADER.size or data[0] != MAGIC:
        raise SerdeError("Unknown magic byte: the record was not written with a schema registry serializer")
    return HEADER.unpack_from(data)[1], data[HEADER.size:]


def encode(parsed: Parsed, value, referenced: dict[str, str] | None = None) -> bytes:
    """``value`` (JSON-shaped) as the data of ``parsed``'s format; SerdeError when it does not
    conform to the schema. ``referenced`` (reference name -> schema text, as the registry resolves
    them) serves JSON Schema's ``$ref``s; Avro and Protobuf have theirs in ``parsed`` already."""
    if parsed.schema.type == JSON:
        return json_data.encode(parsed.value, value, referenced)
    return CODECS[parsed.schema.type].encode(parsed.value, value)


def decode(parsed: Parsed, data: bytes):
    """The data of a record written with ``parsed`` (after the header) as a JSON-shaped value."""
    return CODECS[parsed.schema.type].decode(parsed.value, data)
