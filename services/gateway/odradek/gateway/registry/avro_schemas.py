"""Avro schemas through Apache Avro's Python library (the specification's reference
implementation): parsing with named types from references, the Parsing Canonical Form, and
reader/writer compatibility by its ``ReaderWriterCompatibilityChecker`` (a port of Java Avro's
``SchemaCompatibility``, which Confluent's registry uses). Nothing here is written by hand but
the mapping of references to named types."""

from __future__ import annotations

import json

import avro.compatibility
import avro.errors
import avro.name
import avro.schema

from odradek.gateway.registry.errors import InvalidSchema


def parse(text: str, referenced: dict[str, str]) -> avro.schema.Schema:
    try:
        document = json.loads(text)
    except ValueError as e:
        raise InvalidSchema(f"Invalid schema: {e}") from None
    names = avro.name.Names()
    for ref_text in referenced.values():     # references define named types the schema uses
        avro.schema.make_avsc_object(json.loads(ref_text), names)
    try:
        return avro.schema.make_avsc_object(document, names)
    except (avro.errors.AvroException, TypeError, KeyError) as e:
        raise InvalidSchema(f"Invalid schema {text}: {e}") from None


def canonical(schema: avro.schema.Schema) -> str:
    return json.dumps(schema.to_json(), separators=(",", ":"), sort_keys=True)


def incompatibilities(reader: avro.schema.Schema, writer: avro.schema.Schema) -> list[str]:
    result = avro.compatibility.ReaderWriterCompatibilityChecker().get_compatibility(reader, writer)
    if result.compatibility is avro.compatibility.SchemaCompatibilityType.compatible:
        return []
    kinds = ", ".join(sorted(i.name.upper() for i in result.incompatibilities))
    return [f"{kinds}: {'; '.join(sorted(map(str, result.messages)))} at {', '.join(sorted(result.locations))}"]
