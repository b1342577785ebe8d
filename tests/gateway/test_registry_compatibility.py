"""The registry's compatibility rules per format, each case checked against the format's own
library resolving real data: an Avro reader schema reading a writer's bytes (fastavro), a JSON
document valid under the writer schema validated under the reader (jsonschema), a Protobuf message
encoded with the writer's descriptor parsed with the reader's (protobuf). No processes."""

from __future__ import annotations

import io
import json

import fastavro
import jsonschema
import pytest
from google.protobuf import descriptor_pool, message_factory

from odradek.gateway.registry import schemas as sc
from odradek.gateway.registry import state as st

REC = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}


def _avro(*fields, name="R") -> dict:
    return {"type": "record", "name": name, "fields": [{"name": "a", "type": "int"}, *fields]}


# (writer, reader, a record the writer writes, compatible?)
AVRO_CASES = [
    ("field added with a default", REC, _avro({"name": "b", "type": "string", "default": "x"}), {"a": 1}, True),
    ("field added without a default", REC, _avro({"name": "b", "type": "string"}), {"a": 1}, False),
    ("field removed", _avro({"name": "b", "type": "string"}), REC, {"a": 1, "b": "y"}, True),
    ("int promoted to long", REC, {**REC, "fields": [{"name": "a", "type": "long"}]}, {"a": 1}, True),
    ("long narrowed to int", {**REC, "fields": [{"name": "a", "type": "long"}]}, REC, {"a": 1}, False),
    ("type changed to string", REC, {**REC, "fields": [{"name": "a", "type": "string"}]}, {"a": 1}, False),
    ("union widened", REC, {**REC, "fields": [{"name": "a", "type": ["null", "int"]}]}, {"a": 1}, True),
    ("enum symbol removed", {"type": "enum", "name": "E", "symbols": ["A", "B"]},
     {"type": "enum", "name": "E", "symbols": ["A"]}, "B", False),
    ("enum symbol added", {"type": "enum", "name": "E", "symbols": ["A"]},
     {"type": "enum", "name": "E", "symbols": ["A", "B"]}, "A", True),
    ("record renamed", REC, {**REC, "name": "S"}, {"a": 1}, False),
]


@pytest.mark.parametrize("case", AVRO_CASES, ids=[c[0] for c in AVRO_CASES])
def test_avro_rules_agree_with_a_reader_reading_writer_data(case):
    _, writer, reader, datum, compatible = case
    parsed = [sc.parse(sc.Schema(sc.AVRO, json.dumps(s)), {}) for s in (writer, reader)]
    assert (parsed[1].incompatibilities(parsed[0]) == []) is compatible
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(writer), datum)
    out.seek(0)
    if compatible:
        fastavro.schemaless_reader(out, fastavro.parse_schema(writer), fastavro.parse_schema(reader))
    else:
        with pytest.raises(Exception):
            fastavro.schemaless_reader(out, fastavro.parse_schema(writer), fastavro.parse_schema(reader))


OBJ = {"type": "object", "properties": {"a": {"type": "integer"}}}
CLOSED = {**OBJ, "additionalProperties": False}
# (writer, reader, a document valid under the writer (for the incompatible: one the reader refuses))
JSON_CASES = [
    ("type widened to number", OBJ, {"type": "object", "properties": {"a": {"type": "number"}}}, {"a": 1}, True),
    ("type narrowed to integer", {"type": "object", "properties": {"a": {"type": "number"}}}, OBJ, {"a": 1.5}, False),
    ("required property added", OBJ, {**OBJ, "required": ["a"]}, {}, False),
    ("optional property added to a closed model", CLOSED,
     {**CLOSED, "properties": {**CLOSED["properties"], "b": {"type": "string"}}}, {"a": 1}, True),
    ("property added to an open model", OBJ, {**OBJ, "properties": {**OBJ["properties"], "b": {"type": "string"}}},
     {"a": 1, "b": 2}, False),
    ("property removed from an open model", {**OBJ, "properties": {**OBJ["properties"], "b": {"type": "string"}}},
     OBJ, {"a": 1, "b": "x"}, True),
    ("property removed from a closed model", {**CLOSED, "properties": {**OBJ["properties"], "b": {"type": "string"}}},
     CLOSED, {"a": 1, "b": "x"}, False),
    ("additional properties closed", OBJ, CLOSED, {"a": 1, "z": True}, False),
    ("maximum added", OBJ, {"type": "object", "properties": {"a": {"type": "integer", "maximum": 5}}}, {"a": 9}, False),
    ("maximum relaxed", {"type": "object", "properties": {"a": {"type": "integer", "maximum": 5}}}, OBJ, {"a": 4}, True),
    ("enum widened", {"enum": ["x"]}, {"enum": ["x", "y"]}, "x", True),
    ("enum narrowed", {"enum": ["x", "y"]}, {"enum": ["x"]}, "y", False),
    ("array items narrowed", {"type": "array", "items": {"type": "number"}},
     {"type": "array", "items": {"type": "integer"}}, [1.5], False),
]


@pytest.mark.parametrize("case", JSON_CASES, ids=[c[0] for c in JSON_CASES])
def test_json_schema_rules_agree_with_validating_writer_documents(case):
    _, writer, reader, document, compatible = case
    parsed = [sc.parse(sc.Schema(sc.JSON, json.dumps(s)), {}) for s in (writer, reader)]
    assert (parsed[1].incompatibilities(parsed[0]) == []) is compatible
    jsonschema.validate(document, writer)
    assert jsonschema.Draft202012Validator(reader).is_valid(document) is compatible


PROTO = 'syntax = "proto3";\npackage p;\nmessage M {{\n{}\n}}\nmessage N {{ string s = 1; }}\n'
# (writer fields, reader fields, compatible?)
PROTO_CASES = [
    ("field added", "int32 a = 1;", "int32 a = 1; string b = 2;", True),
    ("field removed", "int32 a = 1; string b = 2;", "int32 a = 1;", True),
    ("int32 to int64", "int32 a = 1;", "int64 a = 1;", True),
    ("string to bytes", "string a = 1;", "bytes a = 1;", True),
    ("int32 to string", "int32 a = 1;", "string a = 1;", False),
    ("scalar to message", "string a = 1;", "N a = 1;", False),
    ("int32 to sint32", "int32 a = 1;", "sint32 a = 1;", False),
]


def _message(fields: str):
    parsed = sc.parse(sc.Schema(sc.PROTOBUF, PROTO.format(fields)), {})
    pool = descriptor_pool.DescriptorPool()
    pool.Add(parsed.value.file)
    return parsed, message_factory.GetMessageClass(pool.FindMessageTypeByName("p.M"))


@pytest.mark.parametrize("case", PROTO_CASES, ids=[c[0] for c in PROTO_CASES])
def test_protobuf_rules_agree_with_parsing_writer_bytes(case):
    _, writer_fields, reader_fields, compatible = case
    writer, writer_class = _message(writer_fields)
    reader, reader_class = _message(reader_fields)
    assert (reader.incompatibilities(writer) == []) is compatible
    field = writer_class.DESCRIPTOR.fields_by_number[1]
    value = -3 if field.type in (field.TYPE_INT32, field.TYPE_INT64) else b"\xff\xfe" if field.type == field.TYPE_BYTES \
        else "\xe9t\xe9"
    wire = writer_class(**{field.name: value}).SerializeToString()
    if compatible:
        got = getattr(reader_class.FromString(wire), reader_class.DESCRIPTOR.fields_by_number[1].name)
        assert got == value or got == value.encode()
    else:   # the reader fails, or reads something else than was written
        try:
            got = getattr(reader_class.FromString(wire), reader_class.DESCRIPTOR.fields_by_number[1].name)
        except Exception:
            return
        assert got != value


def _history(*versions: list[dict]) -> list[sc.Parsed]:
    return [sc.parse(sc.Schema(sc.AVRO, json.dumps({"type": "record", "name": "R", "fields": f})), {}) for f in versions]


A, A_DEFAULT = {"name": "a", "type": "int"}, {"name": "a", "type": "int", "default": 0}
B, B_DEFAULT = {"name": "b", "type": "string"}, {"name": "b", "type": "string", "default": "x"}
# v3 follows v2 but not v1. "backward": v3 (b, no default) reads v2's data (which has b) but not
# v1's. "forward": v2 (a has a default) reads v3's data (no a) but v1 (a, no default) does not,
# and v3 (b with a default) reads both, so FULL passes where FULL_TRANSITIVE fails.
HISTORIES = {"backward": ([A], [A, B_DEFAULT], [B]), "forward": ([A], [A_DEFAULT, B_DEFAULT], [B_DEFAULT])}


@pytest.mark.parametrize("level,history,compatible", [
    ("BACKWARD", "backward", True), ("BACKWARD_TRANSITIVE", "backward", False),
    ("FORWARD", "backward", False), ("FULL_TRANSITIVE", "backward", False), ("NONE", "backward", True),
    ("FORWARD", "forward", True), ("FORWARD_TRANSITIVE", "forward", False),
    ("FULL", "forward", True), ("FULL_TRANSITIVE", "forward", False), ("BACKWARD_TRANSITIVE", "forward", True)])
def test_levels_compare_the_last_or_every_version(level, history, compatible):
    *earlier, new = _history(*HISTORIES[history])
    assert (sc.check(level, new, earlier) == []) is compatible


def test_records_replay_into_the_same_state_as_confluent_writes_them():
    s = st.RegistryState()
    schema = sc.Schema(sc.AVRO, json.dumps(REC))
    s.apply(st.schema_key("t-value", 1), st.schema_value(st.Version("t-value", 1, 7), schema))
    s.apply(st.config_key(None), st.config_value("FULL"))
    s.apply(st.mode_key("t-value"), st.mode_value("READONLY"))
    assert st.schema_key("t-value", 1) == b'{"keytype":"SCHEMA","subject":"t-value","version":1,"magic":1}'
    assert (s.versions("t-value")[0].id, s.level("x"), s.mode("t-value"), s.max_id) == (7, "FULL", "READONLY", 7)
    s.apply(st.delete_subject_key("t-value"), st.delete_subject_value("t-value", 1))   # Karapace's soft delete
    assert s.versions("t-value") == [] and s.versions("t-value", deleted=True)[0].deleted
    s.apply(st.schema_key("t-value", 1), None)
    assert "t-value" not in s.subjects and s.schemas[7] == schema
