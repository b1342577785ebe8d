"""``keyFormat``/``valueFormat`` (avro, protobuf, jsonschema): registry-framed keys and values
as typed columns, and typed columns written registry-framed (docs/spark.md, "Schemas").

Reading: in the driver, the column's type comes from one schema (``valueSchemaId``, else the
latest version of ``valueSchemaSubject``, else of ``<topic>-value``), and its id travels in the
column's metadata to the reader; executors decode each record with its writer's schema (fetched
by the id in its wire header, cached per process) into that type, an Avro record through Avro's
schema resolution with the planned schema as the reader's, as Spark's ``from_avro`` with a reader
schema. Writing: in the driver, the schema id to write with (``valueSchemaId``, else the
subject's latest, or with ``autoRegisterSchemas=true`` the column's own type registered under the
subject, as Confluent's serializers' ``auto.register.schemas``); executors encode each row."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (ArrayType, BinaryType, DataType, IntegerType, LongType, StringType, StructField,
                               StructType, TimestampType)

from odradek.serde import codecs, wire
from odradek.serde.registry import SchemaRegistry
from odradek.spark import schemas
from odradek.spark.options import OptionError

FORMATS = {"avro": codecs.AVRO, "protobuf": codecs.PROTOBUF, "jsonschema": codecs.JSON}
COLUMNS = ("key", "value")
META = "odradek.schemaId"


@dataclass(frozen=True)
class Side:
    """How one column (key or value) is framed: its format and the schema id that types it."""
    column: str
    type: str               # codecs.AVRO / JSON / PROTOBUF
    schema_id: int
    message: str | None     # Protobuf: the message (default the schema's first)
    spark_type: str = ""    # the column's DataType as JSON (reads)


@dataclass(frozen=True)
class Formats:
    """Picklable: travels from the driver to the executors in the input partitions and writers."""
    registry: str
    token: str | None
    ca_file: str | None
    sides: tuple[Side, ...]

    def client(self) -> SchemaRegistry:
        return SchemaRegistry(self.registry, self.token, self.ca_file)


def _formats_asked(options) -> dict[str, str]:
    asked = {}
    for column in COLUMNS:
        name = str(options.get(f"{column}Format") or "binary").lower()
        if name == "binary":
            continue
        if name not in FORMATS:
            raise OptionError(f"{column}Format={name}: the formats are binary (the default), "
                              f"{', '.join(sorted(FORMATS))}")
        asked[column] = FORMATS[name]
    return asked


def registry_client(options) -> SchemaRegistry:
    url = options.get("schemaRegistry") or options.get("gateway")
    if not url:
        raise OptionError("the option 'gateway' (or 'schemaRegistry') is required for keyFormat/valueFormat")
    return SchemaRegistry(url, options.get("token"), options.get("caFile"))


def _subject(options, column: str, topic: str | None) -> str:
    subject = options.get(f"{column}SchemaSubject")
    if subject:
        return subject
    if not topic:
        raise OptionError(f"{column}Format needs one topic for the subject <topic>-{column}; with several "
                          f"give {column}SchemaSubject or {column}SchemaId")
    return f"{topic}-{column}"


def _read_topic(options) -> str | None:
    topics = [t.strip() for t in str(options.get("subscribe") or "").split(",") if t.strip()]
    return topics[0] if len(topics) == 1 else None


def read_columns(options) -> dict[str, StructField]:
    """Driver: the typed key/value fields, their schema id in the field's metadata."""
    asked = _formats_asked(options)
    if not asked:
        return {}
    fields = {}
    with registry_client(options) as registry:
        for column, kind in asked.items():
            given = options.get(f"{column}SchemaId")
            schema_id = (int(given) if given
                         else registry.version(_subject(options, column, _read_topic(options))).id)
            codec = _codec(registry, schema_id, column, kind)
            message = options.get(f"{column}MessageName")
            dtype = schemas.spark_type(codec, message)
            fields[column] = StructField(column, dtype, True,
                                         {META: schema_id, "odradek.format": kind, "odradek.message": message or ""})
    return fields


def _codec(registry: SchemaRegistry, schema_id: int, column: str, kind: str):
    """The codec of a schema id (by id: the registry serializes Protobuf only there), of the format asked."""
    codec = registry.codec(schema_id)
    if codec.type != kind:
        raise OptionError(f"{column}Format asks for {kind} but schema {schema_id} is {codec.type}")
    return codec


def base_schema(headers: bool, typed: dict[str, StructField]) -> StructType:
    fields = [typed.get("key") or StructField("key", BinaryType()),
              typed.get("value") or StructField("value", BinaryType()),
              StructField("topic", StringType()), StructField("partition", IntegerType()),
              StructField("offset", LongType()), StructField("timestamp", TimestampType()),
              StructField("timestampType", IntegerType())]
    if headers:
        fields.append(StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                                   StructField("value", BinaryType())]))))
    return StructType(fields)


def read_formats(options, schema: StructType) -> Formats | None:
    """Driver, planning a read: the formats the reader's schema carries (``read_columns``)."""
    asked = _formats_asked(options)
    if not asked:
        return None
    sides = []
    for column, kind in asked.items():
        field = schema[column]
        if META not in field.metadata:   # a schema given with .schema(): its type, the planned schema id
            field = StructField(column, field.dataType, True, read_columns(options)[column].metadata)
        sides.append(Side(column, kind, int(field.metadata[META]), field.metadata.get("odradek.message") or None,
                          field.dataType.json()))
    return Formats(options.get("schemaRegistry") or options["gateway"], options.get("token"), options.get("caFile"),
                   tuple(sides))


def decode_batch(batch: pa.RecordBatch, formats: Formats, registry: SchemaRegistry) -> pa.RecordBatch:
    """Executors: the batch with its framed columns decoded into their planned types."""
    columns = {n: batch.column(n) for n in batch.schema.names}
    for side in formats.sides:
        dtype = _parse_type(side.spark_type)
        reader = registry.codec(side.schema_id)
        values = [None if raw is None else _decode(raw, side, reader, registry, dtype)
                  for raw in columns[side.column].to_pylist()]
        columns[side.column] = pa.array(values, type=to_arrow_type(dtype, timezone="UTC"))
    return pa.RecordBatch.from_arrays(list(columns.values()), names=list(columns))


def _parse_type(text: str) -> DataType:
    from pyspark.sql.types import _parse_datatype_json_string
    return _parse_datatype_json_string(text)


def _decode(raw: bytes, side: Side, reader, registry: SchemaRegistry, dtype: DataType):
    schema_id, payload = wire.unframe(raw)
    writer = registry.codec(schema_id)
    if writer.type != side.type:
        raise codecs.SchemaError(f"a {side.column} written with schema {schema_id} ({writer.type}) where "
                                 f"{side.type} was asked")
    value = writer.decode(payload, reader)
    return schemas.conform(value, dtype) if side.type == codecs.JSON else value


# -- writing ----------------------------------------------------------------------------------------
def write_formats(options, df_schema: StructType) -> Formats | None:
    """Driver, before the tasks: the schema id each framed column is written with."""
    asked = _formats_asked(options)
    if not asked:
        return None
    auto = str(options.get("autoRegisterSchemas", "false")).lower() == "true"
    sides = []
    with registry_client(options) as registry:
        for column, kind in asked.items():
            if column not in df_schema.names:
                raise OptionError(f"{column}Format is set but the DataFrame has no '{column}' column")
            given = options.get(f"{column}SchemaId")
            if given:
                schema_id = int(given)
            elif auto:
                schema_id = registry.register(_subject(options, column, options.get("topic")), kind,
                                              _schema_text(kind, df_schema[column].dataType))
            else:
                schema_id = registry.version(_subject(options, column, options.get("topic"))).id
            _codec(registry, schema_id, column, kind)
            sides.append(Side(column, kind, schema_id, options.get(f"{column}MessageName")))
    return Formats(options.get("schemaRegistry") or options["gateway"], options.get("token"), options.get("caFile"),
                   tuple(sides))


def _schema_text(kind: str, dtype: DataType) -> str:
    if kind == codecs.AVRO:
        return json.dumps(schemas.avro_schema(dtype))
    if kind == codecs.JSON:
        return json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", **schemas.json_schema(dtype)})
    raise OptionError("autoRegisterSchemas derives Avro and JSON schemas only: register the Protobuf schema and "
                      "give valueSchemaId or valueSchemaSubject")


def _python(value):
    """A Spark value as the codecs take it: rows as dicts. (Spark hands timestamps over as naive
    local times: fastavro and the Protobuf codec read a naive datetime as local, too.)"""
    if hasattr(value, "asDict"):
        return {k: _python(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {k: _python(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_python(v) for v in value]
    return value


def encode(value, side: Side, registry: SchemaRegistry) -> bytes | None:
    if value is None:
        return None
    codec = registry.codec(side.schema_id)
    payload = (codec.encode(_python(value), side.message) if side.type == codecs.PROTOBUF
               else codec.encode(_python(value)))
    return wire.frame(side.schema_id, payload)
