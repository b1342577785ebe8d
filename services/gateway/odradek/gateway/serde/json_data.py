"""JSON Schema data as REST clients send and read it: the document itself, validated by
``odradek.serde.codecs.JsonCodec`` (jsonschema's validator of the draft the schema names, ``$ref``s
to the schema's references resolved) before it is written as UTF-8 JSON text, as Confluent's JSON
Schema serializer validates."""

from __future__ import annotations

import json

from odradek.gateway.serde.errors import SerdeError
from odradek.serde.codecs import JsonCodec


def codec(document, referenced: dict[str, str]) -> JsonCodec:
    return JsonCodec(document=document, references=referenced)


def encode(codec: JsonCodec, value) -> bytes:
    problem = codec.problem(value)
    if problem is not None:
        raise SerdeError(problem)
    return json.dumps(value, separators=(",", ":")).encode()


def decode(codec: JsonCodec, data: bytes):
    try:
        return json.loads(data)
    except ValueError as e:
        raise SerdeError(f"Invalid JSON data: {e}") from None
