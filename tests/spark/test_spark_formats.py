"""keyFormat/valueFormat without Spark or a cluster: ``odradek.serde``'s codecs against
Confluent's own serializers (confluent_kafka with its in-memory ``mock://`` registry), byte for
byte where the format is deterministic; Spark types derived from Avro, JSON Schema and Protobuf
schemas and Avro schemas from Spark types; the driver's planning and the executors' decoding
over a stub registry."""

from __future__ import annotations

import datetime
import decimal
import json

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format, timestamp_pb2

from odradek.serde import codecs, wire
from odradek.serde import registry as registry_module
from odradek.serde.registry import RegisteredSchema, SchemaRegistry
from odradek.spark import formats, schemas
from odradek.spark.options import OptionError

CTX = SerializationContext("orders", MessageField.VALUE)
UTC = datetime.timezone.utc
ORDER = json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
        {"name": "sku", "type": "string"}, {"name": "qty", "type": ["int", "long"]}]}}},
    {"name": "tags", "type": {"type": "map", "values": "double"}},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}}]})
ORDER_VALUE = {"id": 7, "note": None, "at": datetime.datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=UTC),
               "price": decimal.Decimal("12.50"), "lines": [{"sku": "x", "qty": 2}],
               "tags": {"a": 1.5}, "kind": "B"}
PROTO = '''
name: "shop.proto" package: "shop" syntax: "proto3" dependency: "google/protobuf/timestamp.proto"
message_type { name: "Other" field { name: "x" number: 1 type: TYPE_INT32 label: LABEL_OPTIONAL } }
message_type { name: "Order"
  field { name: "id" number: 1 type: TYPE_INT64 label: LABEL_OPTIONAL }
  field { name: "at" number: 2 type: TYPE_MESSAGE type_name: ".google.protobuf.Timestamp" label: LABEL_OPTIONAL }
  field { name: "lines" number: 3 type: TYPE_MESSAGE type_name: ".shop.Order.Line" label: LABEL_REPEATED }
  field { name: "kind" number: 4 type: TYPE_ENUM type_name: ".shop.Order.Kind" label: LABEL_OPTIONAL }
  field { name: "attrs" number: 5 type: TYPE_MESSAGE type_name: ".shop.Order.AttrsEntry" label: LABEL_REPEATED }
  nested_type { name: "Line" field { name: "sku" number: 1 type: TYPE_STRING label: LABEL_OPTIONAL } }
  nested_type { name: "AttrsEntry" options { map_entry: true }
    field { name: "key" number: 1 type: TYPE_STRING label: LABEL_OPTIONAL }
    field { name: "value" number: 2 type: TYPE_STRING label: LABEL_OPTIONAL } }
  enum_type { name: "Kind" value { name: "A" number: 0 } value { name: "B" number: 1 } }
}'''


def confluent_registry():
    return SchemaRegistryClient.new_client({"url": "mock://odradek-tests"})


def test_avro_as_confluents_serializers_write_and_read_it():
    registry = confluent_registry()
    framed = AvroSerializer(registry, ORDER)(ORDER_VALUE, CTX)
    schema_id, payload = wire.unframe(framed)
    codec = codecs.AvroCodec(registry.get_schema(schema_id).schema_str)
    assert codec.decode(payload) == ORDER_VALUE
    assert wire.frame(schema_id, codec.encode(ORDER_VALUE)) == framed
    assert AvroDeserializer(registry)(wire.frame(schema_id, codec.encode(ORDER_VALUE)), CTX) == ORDER_VALUE
    with pytest.raises(codecs.SchemaError, match="does not fit the Avro schema"):
        codec.encode({"id": "seven"})
    with pytest.raises(wire.WireFormatError, match="not in the Confluent wire format"):
        wire.unframe(b"plain json")


def test_avro_reads_older_writer_data_through_the_planned_reader_schema():
    writer = codecs.AvroCodec(json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}))
    reader = codecs.AvroCodec(json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "long"}, {"name": "b", "type": "string", "default": "-"}]}))
    assert writer.decode(writer.encode({"a": 1}), reader) == {"a": 1, "b": "-"}


def proto_file():
    proto = text_format.Parse(PROTO, descriptor_pb2.FileDescriptorProto())
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    return proto.SerializeToString(), pool.AddSerializedFile(proto.SerializeToString())


def test_protobuf_as_confluents_serializers_write_and_read_it_with_message_indexes():
    serialized, file = proto_file()
    order_class = message_factory.GetMessageClass(file.message_types_by_name["Order"])
    order = order_class(id=5, lines=[order_class.Line(sku="a")], kind=1)
    order.at.FromDatetime(datetime.datetime(2026, 1, 1, tzinfo=UTC))
    order.attrs["k"] = "v"
    registry = confluent_registry()
    framed = ProtobufSerializer(order_class, registry, {"use.deprecated.format": False})(order, CTX)
    codec = codecs.ProtobufCodec(serialized)
    schema_id, payload = wire.unframe(framed)
    value = codec.decode(payload)
    assert value == {"id": 5, "at": datetime.datetime(2026, 1, 1, tzinfo=UTC), "lines": [{"sku": "a"}], "kind": "B",
                     "attrs": {"k": "v"}}
    assert wire.frame(schema_id, codec.encode(value, "Order")) == framed, "message indexes [1], as Confluent's"
    assert ProtobufDeserializer(order_class, {"use.deprecated.format": False})(framed, CTX) == order
    nested = codec.encode({"sku": "q"}, "shop.Order.Line")
    assert nested[:4] == wire.message_indexes([1, 0]) + b"\x0a" and codec.decode(nested) == {"sku": "q"}
    assert wire.read_message_indexes(memoryview(b"\x00rest"))[0] == [0]


def test_json_schema_as_confluents_serializers_write_and_read_it_and_checked_before_writing():
    schema = json.dumps({"type": "object", "properties": {
        "id": {"type": "integer"}, "name": {"type": ["string", "null"]}, "tags": {"type": "array", "items": {"type": "string"}},
        "extra": {"type": "object", "additionalProperties": {"type": "number"}}}, "required": ["id"]})
    registry = confluent_registry()
    document = {"id": 1, "name": "n", "tags": ["a"], "extra": {"p": 1.5}}
    schema_id, payload = wire.unframe(JSONSerializer(schema, registry)(document, CTX))
    codec = codecs.JsonCodec(schema)
    assert codec.decode(payload) == document
    assert JSONDeserializer(schema)(wire.frame(schema_id, codec.encode(document)), CTX) == document
    with pytest.raises(codecs.SchemaError, match="'id' is a required property"):
        codec.encode({"name": "no id"})
    assert schemas.spark_type(codec).simpleString() == \
        "struct<id:bigint,name:string,tags:array<string>,extra:map<string,double>>"


def test_spark_types_as_spark_derives_them():
    avro = schemas.spark_type(codecs.AvroCodec(ORDER))
    assert avro.simpleString() == ("struct<id:bigint,note:string,at:timestamp,price:decimal(9,2),"
                                   "lines:array<struct<sku:string,qty:bigint>>,tags:map<string,double>,kind:string>")
    assert [f.nullable for f in avro.fields] == [False, True, False, False, False, False, False]
    round_trip = schemas.spark_type(codecs.AvroCodec(json.dumps(schemas.avro_schema(avro))))
    assert round_trip == avro, "Spark type -> Avro (to_avro's naming) -> the same Spark type"
    assert schemas.spark_type(codecs.ProtobufCodec(proto_file()[0]), "Order").simpleString() == (
        "struct<id:bigint,at:timestamp,lines:array<struct<sku:string>>,kind:string,attrs:map<string,string>>")
    with pytest.raises(codecs.SchemaError, match="union .* of several types"):
        schemas.spark_type(codecs.AvroCodec('["string", "int"]'))
    with pytest.raises(codecs.SchemaError, match="recursive"):
        schemas.spark_type(codecs.AvroCodec(json.dumps({"type": "record", "name": "Node", "fields": [
            {"name": "next", "type": ["null", "Node"]}]})))


class StubRegistry:
    """The registry's answers from a dict (subject -> [(id, schema)])."""

    def __init__(self, monkeypatch, subjects: dict[str, list[tuple[int, str]]]):
        self.subjects, self.registered = subjects, []
        monkeypatch.setattr(registry_module, "_CACHE", {})   # ids here are this test's alone
        by_id = {i: s for versions in subjects.values() for i, s in versions}
        monkeypatch.setattr(SchemaRegistry, "schema", lambda _, i: RegisteredSchema(codecs.AVRO, by_id[i], id=i))
        monkeypatch.setattr(SchemaRegistry, "version", lambda _, s, v="latest": RegisteredSchema(
            codecs.AVRO, subjects[s][-1][1], id=subjects[s][-1][0]))

        def register(_, subject, kind, text):
            self.registered.append((subject, kind, json.loads(text)))
            subjects.setdefault(subject, []).append((100 + len(self.registered), text))
            by_id[100 + len(self.registered)] = text
            return 100 + len(self.registered)
        monkeypatch.setattr(SchemaRegistry, "register", register)


def test_planning_takes_the_topics_subject_an_id_or_a_named_subject(monkeypatch):
    StubRegistry(monkeypatch, {"orders-value": [(1, '"string"'), (2, ORDER)], "other": [(3, '"long"')]})
    base = {"gateway": "http://gw", "subscribe": "orders", "valueFormat": "avro"}
    field = formats.read_columns(base)["value"]
    assert field.metadata[formats.META] == 2 and field.dataType.simpleString().startswith("struct<id:bigint")
    assert formats.read_columns({**base, "valueSchemaId": "1"})["value"].dataType.simpleString() == "string"
    assert formats.read_columns({**base, "valueSchemaSubject": "other"})["value"].metadata[formats.META] == 3
    with pytest.raises(OptionError, match="needs one topic"):
        formats.read_columns({**base, "subscribe": "a,b"})
    with pytest.raises(OptionError, match="the formats are binary"):
        formats.read_columns({**base, "valueFormat": "thrift"})
    with pytest.raises(OptionError, match="asks for PROTOBUF but schema 2 is AVRO"):
        formats.read_columns({**base, "valueFormat": "protobuf"})
    schema = formats.base_schema(False, formats.read_columns(base))
    assert formats.read_formats(base, schema).sides == (formats.Side("value", codecs.AVRO, 2, None,
                                                                     schema["value"].dataType.json()),)


def test_executors_decode_framed_values_into_the_planned_type(monkeypatch):
    StubRegistry(monkeypatch, {"orders-value": [(1, ORDER)]})
    options = {"gateway": "http://gw", "subscribe": "orders", "valueFormat": "avro"}
    plan = formats.read_formats(options, formats.base_schema(False, formats.read_columns(options)))
    codec = codecs.AvroCodec(ORDER)
    batch = pa.RecordBatch.from_arrays([pa.array([b"k", None]), pa.array([wire.frame(1, codec.encode(ORDER_VALUE)), None])],
                                       names=["key", "value"])
    with plan.client() as registry:
        decoded = formats.decode_batch(batch, plan, registry)
        assert decoded.column("key").to_pylist() == [b"k", None]
        assert decoded.column("value").to_pylist()[1] is None
        row = decoded.column("value").to_pylist()[0]
        assert {k: v for k, v in row.items() if k != "tags"} == {k: v for k, v in ORDER_VALUE.items() if k != "tags"}
        with pytest.raises(wire.WireFormatError):
            formats.decode_batch(pa.RecordBatch.from_arrays([pa.array([b"{}"])], names=["value"]), plan, registry)


def test_a_write_registers_the_columns_avro_schema_when_asked(monkeypatch):
    stub = StubRegistry(monkeypatch, {"out-value": [(5, ORDER)]})
    dtype = schemas.spark_type(codecs.AvroCodec(ORDER))
    df_schema = formats.base_schema(False, {})
    df_schema = type(df_schema)([f if f.name != "value" else type(f)("value", dtype) for f in df_schema.fields])
    options = {"gateway": "http://gw", "topic": "out", "valueFormat": "avro"}
    assert formats.write_formats(options, df_schema).sides[0].schema_id == 5, "the subject's latest"
    assert formats.write_formats({**options, "valueSchemaId": "5"}, df_schema).sides[0].schema_id == 5
    registered = formats.write_formats({**options, "autoRegisterSchemas": "true"}, df_schema).sides[0]
    assert stub.registered[0][:2] == ("out-value", codecs.AVRO) and registered.schema_id == 101
    assert stub.registered[0][2]["name"] == "topLevelRecord"
    with formats.registry_client(options) as registry:
        framed = formats.encode(ORDER_VALUE, registered, registry)
        assert wire.unframe(framed)[0] == 101
    with pytest.raises(OptionError, match="autoRegisterSchemas derives Avro and JSON schemas only"):
        formats.write_formats({**options, "valueFormat": "protobuf", "autoRegisterSchemas": "true"}, df_schema)
