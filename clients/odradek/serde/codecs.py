"""Payload bytes to Python values and back, given a registered schema, one codec per schema
type as Confluent's serializers write them: Avro binary by fastavro (a reader schema resolves
writer data as Avro's schema resolution says), JSON documents checked against a JSON Schema by
jsonschema when written (``$ref``s to the schema's references resolved through ``referencing``),
Protobuf messages as dynamic messages of the schema's file descriptor (the registry's
``?format=serialized`` answer; imports from the schema's references or protobuf's well-known
types) with the wire format's message indexes. The one implementation of each: the Spark source
uses the codecs' Python values, the gateway (``odradek.gateway.serde``) converts the parsed schemas,
validators and message descriptors held here to and from REST Proxy's JSON shapes.

Values: Avro's as fastavro gives and takes them (records as dicts, timestamps as aware
datetimes); Protobuf messages as dicts (enums by name, ``google.protobuf.Timestamp`` as an aware
datetime, an unset message field as None). Codecs hold parsed schemas only: thread-safe."""

from __future__ import annotations

import base64
import datetime
import decimal
import importlib
import io
import json

import fastavro
import jsonschema
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT7

from odradek.serde import wire

AVRO, JSON, PROTOBUF = "AVRO", "JSON", "PROTOBUF"


class SchemaError(ValueError):
    """A schema this module cannot use, or a value it does not fit."""


class AvroCodec:
    type = AVRO

    def __init__(self, text: str | None = None, named: dict | None = None, *, raw=None):
        """The schema as JSON ``text`` or already loaded (``raw``). ``named``: the named types of
        the schema's references (fastavro's ``named_schemas``; the schema's own named types are
        added to it)."""
        self.raw = json.loads(text) if raw is None else raw
        self.named = {} if named is None else named
        self.parsed = fastavro.parse_schema(self.raw, named_schemas=self.named)

    def decode(self, payload, reader: "AvroCodec | None" = None):
        """The value written with this schema, as ``reader`` (default: this one) reads it."""
        resolved = None if reader is None or reader is self else reader.parsed
        return fastavro.schemaless_reader(io.BytesIO(payload), self.parsed, resolved)

    def encode(self, value) -> bytes:
        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, self.parsed, value)
        except (ValueError, TypeError) as e:
            raise SchemaError(f"the value does not fit the Avro schema: {e}") from None
        return out.getvalue()


def _json_default(value):
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, decimal.Decimal):
        return float(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


class JsonCodec:
    type = JSON

    def __init__(self, text: str | None = None, *, document=None, references: dict[str, str] | None = None):
        """The schema as JSON ``text`` or already loaded (``document``); ``references``: reference
        name -> schema text, as the registry resolves them, for the schema's ``$ref``s."""
        self.schema = json.loads(text) if document is None else document
        cls = jsonschema.validators.validator_for(self.schema)
        try:
            cls.check_schema(self.schema)
        except jsonschema.SchemaError as e:
            raise SchemaError(f"not a JSON Schema: {e.message}") from None
        registry = Registry().with_resources(
            (name, Resource.from_contents(json.loads(ref), default_specification=DRAFT7))
            for name, ref in (references or {}).items())
        self.validator = cls(self.schema, registry=registry)

    def decode(self, payload, reader=None):
        return json.loads(bytes(payload))

    def encode(self, value) -> bytes:
        """Checked against the schema first, as Confluent's JSONSerializer does."""
        document = json.loads(json.dumps(value, default=_json_default))
        problem = self.problem(document)
        if problem is not None:
            raise SchemaError(f"the value does not validate against the JSON Schema: {problem}")
        return json.dumps(document, separators=(",", ":")).encode()

    def problem(self, document) -> str | None:
        """Why ``document`` (JSON-shaped) does not validate (jsonschema's best match, and where), or None."""
        try:
            error = jsonschema.exceptions.best_match(self.validator.iter_errors(document))
        except Unresolvable as e:
            return f"Unresolvable $ref in the schema: {e}"
        if error is None:
            return None
        where = "/".join(map(str, error.absolute_path))
        return f"{error.message}{f' at /{where}' if where else ''}"


class ProtobufCodec:
    type = PROTOBUF

    def __init__(self, serialized: bytes, dependencies: tuple[bytes, ...] = ()):
        """``serialized``: a ``FileDescriptorProto``; its imports (and theirs) must be well-known
        types (protobuf's own) or among ``dependencies`` (serialized descriptors, imports first)."""
        pool = descriptor_pool.DescriptorPool()
        protos = [descriptor_pb2.FileDescriptorProto.FromString(f) for f in (*dependencies, serialized)]
        given = {p.name for p in protos}
        for proto, file in zip(protos, (*dependencies, serialized)):
            for name in set(proto.dependency) - given:
                _add_well_known(pool, name)
            if not _has(pool, proto.name):     # a well-known type given as a reference, added already
                pool.AddSerializedFile(file)
        self.file = pool.FindFileByName(proto.name)
        if not self.file.message_types_by_name:
            raise SchemaError(f"the Protobuf schema {proto.name} has no message")

    def message(self, name: str | None = None):
        """A message of the file by full or simple name; the first one when no name is given."""
        top = list(self.file.message_types_by_name.values())
        if name is None:
            return top[0]
        found = [d for d in _all_messages(top) if name in (d.full_name, d.name)]
        if not found:
            raise SchemaError(f"no message {name} in the Protobuf schema {self.file.name}")
        return found[0]

    def decode(self, payload, reader=None):
        indexes, body = wire.read_message_indexes(memoryview(payload))
        descriptor = self.at(indexes)
        return to_python(message_factory.GetMessageClass(descriptor).FromString(bytes(body)))

    def encode(self, value, message: str | None = None) -> bytes:
        descriptor = self.message(message)
        try:
            body = from_python(descriptor, value).SerializeToString()
        except (ValueError, TypeError, AttributeError, KeyError) as e:
            raise SchemaError(f"the value does not fit the Protobuf message {descriptor.full_name}: {e}") from None
        return wire.message_indexes(_indexes(descriptor)) + body

    def at(self, indexes: list[int]):
        """The message the wire format's message indexes point at (declaration order, then nested)."""
        try:
            descriptor = list(self.file.message_types_by_name.values())[indexes[0]]
            for i in indexes[1:]:
                descriptor = descriptor.nested_types[i]
        except IndexError:
            raise wire.WireFormatError(f"message indexes {indexes} name no message of {self.file.name}") from None
        return descriptor


def _has(pool, name: str) -> bool:
    try:
        pool.FindFileByName(name)
        return True
    except KeyError:
        return False


def _add_well_known(pool, name: str) -> None:
    """Adds the well-known type file ``name`` (and its imports) to ``pool`` unless it is there."""
    if _has(pool, name):
        return
    known = _well_known(name)
    for dependency in known.dependencies:
        _add_well_known(pool, dependency.name)
    pool.AddSerializedFile(known.serialized_pb)


def _well_known(name: str):
    """protobuf's own descriptor of a well-known type (importing its generated module puts it in
    the default pool); Confluent's serializers may import them without a reference."""
    if name.startswith("google/protobuf/"):
        try:
            importlib.import_module("google.protobuf." + name.removeprefix("google/protobuf/").replace(".proto", "_pb2"))
            return descriptor_pool.Default().FindFileByName(name)
        except (ImportError, KeyError):
            pass
    raise SchemaError(f"the Protobuf schema imports {name}, which is neither a well-known type nor among its references")


def _all_messages(descriptors):
    for d in descriptors:
        yield d
        yield from _all_messages(d.nested_types)


def _indexes(descriptor) -> list[int]:
    path = []
    while descriptor is not None:
        siblings = (list(descriptor.containing_type.nested_types) if descriptor.containing_type
                    else list(descriptor.file.message_types_by_name.values()))
        path.insert(0, [s.full_name for s in siblings].index(descriptor.full_name))
        descriptor = descriptor.containing_type
    return path


TIMESTAMP = "google.protobuf.Timestamp"


def is_map(field) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def _scalar_out(field, value):
    if field.enum_type is not None:
        known = field.enum_type.values_by_number.get(value)
        return known.name if known else str(value)
    if field.message_type is not None:
        if field.message_type.full_name == TIMESTAMP:
            return value.ToDatetime(tzinfo=datetime.timezone.utc)
        return to_python(value)
    return value


def to_python(message) -> dict:
    out = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if is_map(field):
            out[field.name] = {k: _scalar_out(field.message_type.fields_by_name["value"], v) for k, v in value.items()}
        elif field.is_repeated:
            out[field.name] = [_scalar_out(field, v) for v in value]
        elif field.message_type is not None and not message.HasField(field.name):
            out[field.name] = None
        else:
            out[field.name] = _scalar_out(field, value)
    return out


def _scalar_in(field, value):
    if field.enum_type is not None and isinstance(value, str):
        return field.enum_type.values_by_name[value].number
    return value


def _set_message(field, target, value) -> None:
    if field.message_type.full_name == TIMESTAMP:
        target.FromDatetime(value if value.tzinfo else value.astimezone())
    else:
        target.CopyFrom(from_python(field.message_type, value))


def from_python(descriptor, value: dict):
    message = message_factory.GetMessageClass(descriptor)()
    for name, item in value.items():
        field = descriptor.fields_by_name.get(name)
        if field is None:
            raise KeyError(f"the message {descriptor.full_name} has no field {name}")
        if item is None:
            continue
        target = getattr(message, name)
        if is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            for k, v in item.items():
                if value_field.message_type is not None:
                    _set_message(value_field, target[k], v)
                else:
                    target[k] = _scalar_in(value_field, v)
        elif field.is_repeated and field.message_type is not None:
            for v in item:
                _set_message(field, target.add(), v)
        elif field.is_repeated:
            target.extend(_scalar_in(field, v) for v in item)
        elif field.message_type is not None:
            _set_message(field, target, item)
        else:
            setattr(message, name, _scalar_in(field, item))
    return message
