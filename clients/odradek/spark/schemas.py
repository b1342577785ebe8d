"""Spark SQL types from registered schemas, and schemas from Spark SQL types, as Spark's own
``from_avro``/``to_avro`` (``SchemaConverters``) and ``from_protobuf`` map them: the typed
``key``/``value`` columns of a read, the schema registered for a write. Pure functions over
parsed schemas (fastavro's, JSON Schema dicts, Protobuf descriptors)."""

from __future__ import annotations

import json

from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, ByteType, DataType, DateType, DecimalType,
                               DoubleType, FloatType, IntegerType, LongType, MapType, ShortType, StringType,
                               StructField, StructType, TimestampNTZType, TimestampType)

from odradek.serde import codecs

AVRO_PRIMITIVES = {"boolean": BooleanType(), "int": IntegerType(), "long": LongType(), "float": FloatType(),
                   "double": DoubleType(), "bytes": BinaryType(), "string": StringType()}
AVRO_LOGICAL = {"date": DateType(), "timestamp-millis": TimestampType(), "timestamp-micros": TimestampType(),
                "local-timestamp-millis": TimestampNTZType(), "local-timestamp-micros": TimestampNTZType(),
                "uuid": StringType()}


def spark_type(codec, message: str | None = None) -> DataType:
    """The column type of values written with ``codec``'s schema."""
    if codec.type == codecs.AVRO:
        return avro_type(codec.parsed, codec.named)[0]
    if codec.type == codecs.JSON:
        return json_type(codec.schema, codec.schema)[0]
    return protobuf_type(codec.message(message))


# -- Avro -----------------------------------------------------------------------------------------------
def avro_type(schema, named: dict, seen: tuple = ()) -> tuple[DataType, bool]:
    """(type, nullable): a union with null is its other branch, nullable."""
    if isinstance(schema, str):
        if schema in AVRO_PRIMITIVES:
            return AVRO_PRIMITIVES[schema], False
        if schema in seen:
            raise codecs.SchemaError(f"the Avro type {schema} is recursive: Spark has no recursive types")
        if schema not in named:
            raise codecs.SchemaError(f"unknown Avro type {schema}")
        return avro_type(named[schema], named, seen)
    if isinstance(schema, list):
        return _avro_union(schema, named, seen)
    kind, logical = schema["type"], schema.get("logicalType")
    if logical == "decimal":
        return DecimalType(schema["precision"], schema.get("scale", 0)), False
    if logical in AVRO_LOGICAL:
        return AVRO_LOGICAL[logical], False
    if logical in ("time-millis", "time-micros"):
        raise codecs.SchemaError(f"the Avro logical type {logical} has no Spark type")
    if kind == "record":
        inner = (*seen, schema["name"])
        fields = [StructField(f["name"], *avro_type(f["type"], named, inner)) for f in schema["fields"]]
        return StructType(fields), False
    if kind == "enum":
        return StringType(), False
    if kind == "fixed":
        return BinaryType(), False
    if kind == "array":
        items, nullable = avro_type(schema["items"], named, seen)
        return ArrayType(items, nullable), False
    if kind == "map":
        values, nullable = avro_type(schema["values"], named, seen)
        return MapType(StringType(), values, nullable), False
    return avro_type(kind, named, seen)


def _avro_union(branches: list, named: dict, seen: tuple) -> tuple[DataType, bool]:
    others = [b for b in branches if b != "null"]
    nullable = len(others) < len(branches)
    if len(others) == 1:
        return avro_type(others[0], named, seen)[0], nullable
    if set(others) <= {"int", "long"}:
        return LongType(), nullable
    if set(others) <= {"float", "double"}:
        return DoubleType(), nullable
    raise codecs.SchemaError(f"the Avro union {json.dumps(branches)} of several types is not supported "
                             "(only unions with null, int/long and float/double)")


def avro_schema(dtype: DataType, name: str = "topLevelRecord", namespace: str = "") -> dict | str | list:
    """Spark's ``to_avro`` schema of a column: records named after their field under the
    top-level ``topLevelRecord``; a nullable field is a union with null first (default null, so
    later versions can drop it)."""
    if isinstance(dtype, StructType):
        inner = f"{namespace}.{name}" if namespace else name
        fields = []
        for f in dtype.fields:
            field_type = avro_schema(f.dataType, f.name, inner)
            fields.append({"name": f.name, "type": ["null", field_type], "default": None} if f.nullable
                          else {"name": f.name, "type": field_type})
        record = {"type": "record", "name": name, "fields": fields}
        return {**record, "namespace": namespace} if namespace else record
    if isinstance(dtype, ArrayType):
        items = avro_schema(dtype.elementType, name, namespace)
        return {"type": "array", "items": ["null", items] if dtype.containsNull else items}
    if isinstance(dtype, MapType):
        if not isinstance(dtype.keyType, StringType):
            raise codecs.SchemaError("Avro maps have string keys only")
        values = avro_schema(dtype.valueType, name, namespace)
        return {"type": "map", "values": ["null", values] if dtype.valueContainsNull else values}
    return _avro_scalar(dtype)


def _avro_scalar(dtype: DataType):
    if isinstance(dtype, (ByteType, ShortType, IntegerType)):
        return "int"
    if isinstance(dtype, DecimalType):
        return {"type": "bytes", "logicalType": "decimal", "precision": dtype.precision, "scale": dtype.scale}
    if isinstance(dtype, TimestampType):
        return {"type": "long", "logicalType": "timestamp-micros"}
    if isinstance(dtype, TimestampNTZType):
        return {"type": "long", "logicalType": "local-timestamp-micros"}
    if isinstance(dtype, DateType):
        return {"type": "int", "logicalType": "date"}
    for primitive, spark in AVRO_PRIMITIVES.items():
        if type(dtype) is type(spark):
            return primitive
    raise codecs.SchemaError(f"no Avro type for Spark's {dtype.simpleString()}")


# -- JSON Schema ----------------------------------------------------------------------------------------
JSON_SCALARS = {"string": StringType(), "integer": LongType(), "number": DoubleType(), "boolean": BooleanType()}


def _json_ref(schema: dict, root: dict) -> dict:
    ref = schema.get("$ref")
    if not ref:
        return schema
    if not ref.startswith("#/"):
        raise codecs.SchemaError(f"the JSON Schema reference {ref} is not local")
    target = root
    for part in ref[2:].split("/"):
        target = target[part]
    return _json_ref(target, root)


def json_type(schema, root: dict) -> tuple[DataType, bool]:
    """(type, nullable): an object with properties is a struct, one with only
    ``additionalProperties`` a map; what has no one Spark type (no type, several types, a
    ``oneOf``) is its JSON text as a string."""
    if not isinstance(schema, dict):
        return StringType(), True
    schema = _json_ref(schema, root)
    types = schema.get("type")
    types = [types] if isinstance(types, str) else list(types or [])
    nullable = "null" in types
    others = [t for t in types if t != "null"]
    if others == ["integer", "number"] or others == ["number", "integer"]:
        others = ["number"]
    if len(others) != 1:
        return StringType(), True
    kind = others[0]
    if kind == "object":
        properties = schema.get("properties") or {}
        if not properties and isinstance(schema.get("additionalProperties"), dict):
            return MapType(StringType(), json_type(schema["additionalProperties"], root)[0]), nullable
        return StructType([StructField(n, json_type(s, root)[0], True) for n, s in properties.items()]), nullable
    if kind == "array":
        return ArrayType(json_type(schema.get("items", {}), root)[0]), nullable
    return JSON_SCALARS.get(kind, StringType()), nullable


def json_schema(dtype: DataType) -> dict:
    """A JSON Schema (draft 7) of a Spark column, for registering a write's schema."""
    if isinstance(dtype, StructType):
        return {"type": "object", "properties": {f.name: _nullable(json_schema(f.dataType), f.nullable)
                                                 for f in dtype.fields},
                "required": [f.name for f in dtype.fields if not f.nullable]}
    if isinstance(dtype, ArrayType):
        return {"type": "array", "items": _nullable(json_schema(dtype.elementType), dtype.containsNull)}
    if isinstance(dtype, MapType):
        return {"type": "object", "additionalProperties": _nullable(json_schema(dtype.valueType),
                                                                   dtype.valueContainsNull)}
    if isinstance(dtype, (ByteType, ShortType, IntegerType, LongType)):
        return {"type": "integer"}
    if isinstance(dtype, (FloatType, DoubleType, DecimalType)):
        return {"type": "number"}
    if isinstance(dtype, BooleanType):
        return {"type": "boolean"}
    if isinstance(dtype, (TimestampType, TimestampNTZType)):
        return {"type": "string", "format": "date-time"}
    if isinstance(dtype, DateType):
        return {"type": "string", "format": "date"}
    return {"type": "string"}


def _nullable(schema: dict, nullable: bool) -> dict:
    return {**schema, "type": [schema["type"], "null"]} if nullable else schema


def conform(value, dtype: DataType):
    """A decoded JSON document shaped to its column type (Arrow takes the rest as it is): the
    JSON text of what has no one type, ISO dates and date-times parsed."""
    if value is None:
        return None
    if isinstance(dtype, StructType):
        if not isinstance(value, dict):
            raise codecs.SchemaError(f"expected a JSON object, got {json.dumps(value)[:80]}")
        return {f.name: conform(value.get(f.name), f.dataType) for f in dtype.fields}
    if isinstance(dtype, ArrayType):
        return [conform(v, dtype.elementType) for v in value]
    if isinstance(dtype, MapType):
        return {k: conform(v, dtype.valueType) for k, v in value.items()}
    if isinstance(dtype, StringType) and not isinstance(value, str):
        return json.dumps(value)
    return value


# -- Protobuf -------------------------------------------------------------------------------------------
def _protobuf_scalars() -> dict:
    from google.protobuf.descriptor import FieldDescriptor as F
    return {F.TYPE_DOUBLE: DoubleType(), F.TYPE_FLOAT: FloatType(), F.TYPE_INT64: LongType(),
            F.TYPE_UINT64: LongType(), F.TYPE_INT32: IntegerType(), F.TYPE_FIXED64: LongType(),
            F.TYPE_FIXED32: IntegerType(), F.TYPE_BOOL: BooleanType(), F.TYPE_STRING: StringType(),
            F.TYPE_BYTES: BinaryType(), F.TYPE_UINT32: IntegerType(), F.TYPE_SFIXED32: IntegerType(),
            F.TYPE_SFIXED64: LongType(), F.TYPE_SINT32: IntegerType(), F.TYPE_SINT64: LongType(),
            F.TYPE_ENUM: StringType()}


def protobuf_type(descriptor, seen: tuple = ()) -> StructType:
    """Spark's ``from_protobuf`` types: a message is a struct, an enum its name, a map field a
    map, a repeated field an array, ``google.protobuf.Timestamp`` a timestamp."""
    if descriptor.full_name in seen:
        raise codecs.SchemaError(f"the message {descriptor.full_name} is recursive: Spark has no recursive types")
    return StructType([StructField(f.name, _protobuf_field(f, (*seen, descriptor.full_name)), True)
                       for f in descriptor.fields])


def _protobuf_field(field, seen: tuple) -> DataType:
    if codecs.is_map(field):
        entry = field.message_type.fields_by_name
        return MapType(_protobuf_single(entry["key"], seen), _protobuf_single(entry["value"], seen))
    single = _protobuf_single(field, seen)
    return ArrayType(single) if field.is_repeated else single


def _protobuf_single(field, seen: tuple) -> DataType:
    if field.message_type is None:
        return _protobuf_scalars()[field.type]
    if field.message_type.full_name == codecs.TIMESTAMP:
        return TimestampType()
    return protobuf_type(field.message_type, seen)
