"""Protobuf data: the message indexes (which message of the schema's file: Confluent's varint
array, zig-zag encoded, ``[0]`` written as the single byte 0), then the message's binary
encoding. Messages are protobuf's dynamic messages, built from the registry's descriptors
(``registry.proto_schemas.ProtoSchema``); values are protobuf's JSON mapping with the .proto field
names and every field printed, as Confluent's ``ProtobufSchemaUtils.toJson`` answers them. The
REST Proxy writes the file's first message, as Confluent's does."""

from __future__ import annotations

import importlib
from functools import lru_cache

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError

from odradek.gateway.serde.errors import SerdeError

FIRST = (0,)


def _zigzag_varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_zigzag_varint(data: bytes, at: int) -> tuple[int, int]:
    shift = n = 0
    while True:
        if at >= len(data) or shift > 63:
            raise SerdeError("Invalid Protobuf message indexes")
        byte = data[at]
        n |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return (n >> 1) ^ -(n & 1), at
        shift += 7


def write_indexes(indexes: tuple[int, ...]) -> bytes:
    if indexes == FIRST:
        return b"\0"
    return _zigzag_varint(len(indexes)) + b"".join(map(_zigzag_varint, indexes))


def read_indexes(data: bytes) -> tuple[tuple[int, ...], int]:
    """(the message indexes, where the message starts)."""
    count, at = _read_zigzag_varint(data, 0)
    if count == 0:
        return FIRST, at
    indexes = []
    for _ in range(count):
        index, at = _read_zigzag_varint(data, at)
        indexes.append(index)
    return tuple(indexes), at


def _files(schema) -> tuple[bytes, ...]:
    return tuple(f.SerializeToString() for f in (*schema.dependencies, schema.file))


@lru_cache(maxsize=256)
def _pool(files: tuple[bytes, ...]) -> tuple[descriptor_pool.DescriptorPool, str]:
    """A pool holding the schema's file (the last) and its imports; (the pool, the file's name)."""
    pool = descriptor_pool.DescriptorPool()
    protos = [descriptor_pb2.FileDescriptorProto.FromString(f) for f in files]
    added = set()
    for proto in protos:
        for missing in (d for d in proto.dependency if d not in added and d not in {p.name for p in protos}):
            pool.Add(_well_known(missing))     # imported without a reference: protobuf's own types
            added.add(missing)
        pool.Add(proto)
        added.add(proto.name)
    return pool, protos[-1].name


def _well_known(name: str) -> descriptor_pb2.FileDescriptorProto:
    if not name.startswith("google/protobuf/"):
        raise SerdeError(f"The schema imports {name} without a reference to it")
    importlib.import_module("google.protobuf." + name.removeprefix("google/protobuf/").replace(".proto", "_pb2"))
    out = descriptor_pb2.FileDescriptorProto()
    descriptor_pool.Default().FindFileByName(name).CopyToProto(out)
    return out


def message_class(schema, indexes: tuple[int, ...] = FIRST):
    """The dynamic message class of the message ``indexes`` points at in ``schema``'s file."""
    pool, name = _pool(_files(schema))
    file = pool.FindFileByName(name)
    try:
        found = list(file.message_types_by_name.values())[indexes[0]]   # in declaration order
        for index in indexes[1:]:
            found = found.nested_types[index]
    except IndexError:
        raise SerdeError(f"No message at indexes {list(indexes)} in the schema") from None
    return message_factory.GetMessageClass(found)


def encode(schema, value) -> bytes:
    try:
        message = json_format.ParseDict(value, message_class(schema)())
    except json_format.ParseError as e:
        raise SerdeError(str(e)) from None
    return write_indexes(FIRST) + message.SerializeToString()


def decode(schema, data: bytes):
    indexes, at = read_indexes(data)
    try:
        message = message_class(schema, indexes).FromString(data[at:])
    except DecodeError as e:
        raise SerdeError(f"Invalid Protobuf data for the schema: {e}") from None
    return json_format.MessageToDict(message, preserving_proto_field_name=True,
                                     always_print_fields_with_no_presence=True)
