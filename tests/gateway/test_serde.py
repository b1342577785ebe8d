"""``odradek.gateway.serde`` without a cluster: each format's value round-trips through the
Confluent wire format (``odradek.serde.wire``), Avro values in Avro's JSON encoding, Protobuf's
message indexes as Confluent writes them, and a value not matching its schema is refused."""

from __future__ import annotations

import json

import pytest

from odradek.gateway import serde
from odradek.gateway.registry import schemas as sc
from odradek.serde import wire

PERSON_AVRO = {"type": "record", "name": "Person", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": ["null", "int"]}, {"name": "tag", "type": "bytes"}]}
PERSON_JSON = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
PERSON_PROTO = ('syntax = "proto3";\npackage t;\nimport "google/protobuf/timestamp.proto";\n'
                'message Person { string name = 1; int32 age = 2; google.protobuf.Timestamp at = 3;\n'
                '  message Inner { string s = 1; } }\nmessage Other { string s = 1; }\n')


def _parsed(kind: str, text: str) -> sc.Parsed:
    return sc.parse(sc.Schema(kind, text), {})


@pytest.mark.parametrize("kind, text, value", [
    ("AVRO", json.dumps(PERSON_AVRO), {"name": "ada", "age": {"int": 36}, "tag": "\u00ff\u0001"}),
    ("AVRO", json.dumps(PERSON_AVRO), {"name": "ada", "age": None, "tag": ""}),
    ("JSON", json.dumps(PERSON_JSON), {"name": "ada", "extra": [1, 2]}),
    ("PROTOBUF", PERSON_PROTO, {"name": "ada", "age": 36, "at": "2026-11-29T07:00:00Z"}),
])
def test_values_round_trip_through_the_wire_format(kind, text, value):
    parsed = _parsed(kind, text)
    data = serde.frame(42, serde.encode(parsed, value))
    assert data[:5] == b"\0\0\0\0\x2a"
    schema_id, rest = serde.unframe(data)
    assert schema_id == 42 and serde.decode(parsed, rest) == value


@pytest.mark.parametrize("kind, text, value", [
    ("AVRO", json.dumps(PERSON_AVRO), {"name": 7, "age": None, "tag": ""}),
    ("AVRO", json.dumps(PERSON_AVRO), {"name": "ada", "age": 3, "tag": ""}),     # a union's value unwrapped
    ("AVRO", json.dumps(PERSON_AVRO), {"name": "ada"}),
    ("JSON", json.dumps(PERSON_JSON), {"name": 7}),
    ("PROTOBUF", PERSON_PROTO, {"name": "ada", "height": 2}),
])
def test_a_value_not_matching_its_schema_is_refused(kind, text, value):
    with pytest.raises(serde.SerdeError):
        serde.encode(_parsed(kind, text), value)


def test_protobuf_message_indexes_are_confluents():
    assert wire.message_indexes([0]) == b"\0"
    for indexes in ([1], [0, 0], [3, 2, 300]):
        indexes_, rest = wire.read_message_indexes(memoryview(wire.message_indexes(indexes) + b"rest"))
        assert (indexes_, bytes(rest)) == (indexes, b"rest")
    parsed = _parsed("PROTOBUF", PERSON_PROTO)
    assert serde.decode(parsed, wire.message_indexes([1]) + b"\x0a\x01z") == {"s": "z"}
    assert serde.decode(parsed, wire.message_indexes([0, 0]) + b"\x0a\x01y") == {"s": "y"}


def test_data_that_is_not_registry_framed_is_refused():
    for data in (b"", b"\x01\0\0\0\x01x", b"{}"):
        with pytest.raises(serde.SerdeError):
            serde.unframe(data)


def test_references_serve_protobuf_imports_and_json_refs():
    """A Protobuf reference that itself imports a well-known type; a JSON Schema ``$ref`` to a reference."""
    when = 'syntax = "proto3";\npackage d;\nimport "google/protobuf/timestamp.proto";\nmessage When { google.protobuf.Timestamp at = 1; }\n'
    event = 'syntax = "proto3";\npackage t;\nimport "when.proto";\nmessage Event { d.When when = 1; string s = 2; }\n'
    parsed = sc.parse(sc.Schema("PROTOBUF", event), {"when.proto": when})
    value = {"when": {"at": "2026-11-29T07:00:00Z"}, "s": "x"}
    assert serde.decode(parsed, serde.encode(parsed, value)) == value
    address = json.dumps({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
    person = json.dumps({"type": "object", "properties": {"home": {"$ref": "address.json"}}})
    parsed = sc.parse(sc.Schema("JSON", person), {"address.json": address})
    referenced = {"address.json": address}
    assert serde.decode(parsed, serde.encode(parsed, {"home": {"city": "x"}}, referenced)) == {"home": {"city": "x"}}
    with pytest.raises(serde.SerdeError, match="at /home"):
        serde.encode(parsed, {"home": {}}, referenced)
