"""Protobuf data as REST clients send and read it: protobuf's JSON mapping with the .proto field
names and every field printed, as Confluent's ``ProtobufSchemaUtils.toJson`` answers them, to and
from the message indexes and binary message of the wire format. The dynamic messages are
``odradek.serde.codecs.ProtobufCodec``'s, built from the registry's descriptors
(``registry.proto_schemas.ProtoSchema``); the indexes are ``odradek.serde.wire``'s. The REST Proxy
writes the file's first message, as Confluent's does."""

from __future__ import annotations

from google.protobuf import json_format, message_factory
from google.protobuf.message import DecodeError

from odradek.gateway.serde.errors import SerdeError
from odradek.serde import wire
from odradek.serde.codecs import ProtobufCodec

FIRST = [0]


def codec(schema, referenced: dict[str, str]) -> ProtobufCodec:
    return ProtobufCodec(schema.file.SerializeToString(), tuple(f.SerializeToString() for f in schema.dependencies))


def encode(codec: ProtobufCodec, value) -> bytes:
    try:
        message = json_format.ParseDict(value, message_factory.GetMessageClass(codec.at(FIRST))())
    except json_format.ParseError as e:
        raise SerdeError(str(e)) from None
    return wire.message_indexes(FIRST) + message.SerializeToString()


def decode(codec: ProtobufCodec, data: bytes):
    indexes, body = wire.read_message_indexes(memoryview(data))
    try:
        message = message_factory.GetMessageClass(codec.at(indexes)).FromString(bytes(body))
    except DecodeError as e:
        raise SerdeError(f"Invalid Protobuf data for the schema: {e}") from None
    return json_format.MessageToDict(message, preserving_proto_field_name=True,
                                     always_print_fields_with_no_presence=True)
