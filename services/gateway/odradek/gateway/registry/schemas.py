"""Schemas as the registry holds them: a type (AVRO, JSON, PROTOBUF), the text the client
registered, and its references; ``parse`` checks one (42201 when invalid) and ``incompatibilities``
says why a reader schema cannot read a writer schema's data, per format (``avro_schemas``,
``json_schemas``, ``proto_schemas``). The compatibility levels (BACKWARD... FULL_TRANSITIVE) are
``check`` here: which earlier versions are compared, and in which direction."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

from odradek.gateway.registry import avro_schemas, json_schemas, proto_schemas
from odradek.gateway.registry.errors import InvalidSchema

AVRO, JSON, PROTOBUF = "AVRO", "JSON", "PROTOBUF"
TYPES = (AVRO, JSON, PROTOBUF)
LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")


@dataclass(frozen=True)
class Reference:
    name: str        # Avro: the referenced type's full name; JSON: its $ref URL; Protobuf: the import path
    subject: str
    version: int

    def to_json(self) -> dict:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class Schema:
    """A schema as registered: what the client sent and what it refers to."""
    type: str
    text: str
    references: tuple[Reference, ...] = ()


class Format(Protocol):
    def parse(self, text: str, referenced: dict[str, str]) -> object: ...
    def canonical(self, parsed: object) -> str: ...
    def incompatibilities(self, reader: object, writer: object) -> list[str]: ...


FORMATS: dict[str, Format] = {AVRO: avro_schemas, JSON: json_schemas, PROTOBUF: proto_schemas}


@dataclass(frozen=True)
class Parsed:
    schema: Schema
    value: object = field(compare=False)
    canonical: str

    def incompatibilities(self, writer: "Parsed") -> list[str]:
        if writer.schema.type != self.schema.type:
            return [f"Incompatible schema type {self.schema.type}, expected {writer.schema.type}"]
        return FORMATS[self.schema.type].incompatibilities(self.value, writer.value)


def parse(schema: Schema, referenced: dict[str, str]) -> Parsed:
    """``referenced``: reference name -> the referenced schema's text (transitively resolved)."""
    if schema.type not in FORMATS:
        raise InvalidSchema(f"Invalid schema type {schema.type}")
    kind = FORMATS[schema.type]
    try:
        value = kind.parse(schema.text, referenced)
    except InvalidSchema:
        raise
    except Exception as e:   # each library has its own exceptions for a bad schema
        raise InvalidSchema(f"Invalid {schema.type} schema: {e}") from None
    return Parsed(schema, value, kind.canonical(value))


def check(level: str, new: Parsed, earlier: list[Parsed]) -> list[str]:
    """Why ``new`` may not follow ``earlier`` (oldest first) under ``level``; empty: it may."""
    if level == "NONE" or not earlier:
        return []
    compared = earlier if level.endswith("_TRANSITIVE") else earlier[-1:]
    directions: list[Callable[[Parsed, Parsed], list[str]]] = []
    if level.startswith(("BACKWARD", "FULL")):    # the new schema reads data written with the old ones
        directions.append(lambda old, _new=new: _new.incompatibilities(old))
    if level.startswith(("FORWARD", "FULL")):     # the old schemas read data written with the new one
        directions.append(lambda old, _new=new: old.incompatibilities(_new))
    messages = []
    for old in reversed(compared):
        for direction in directions:
            messages += direction(old)
    return messages
