"""JSON Schema: validation of registered schemas by ``jsonschema`` (its meta-schema check for the
draft the schema names), and compatibility checked by hand, because no Python library answers
"does every document valid under the writer schema validate under the reader schema": the rules
are Confluent's (its JSON Schema compatibility table: types narrowed, properties added to an open
content model, required properties added, bounds tightened, enums shrunk...; names of the
differences as Confluent's ``Difference.Type``). Conservative where the question is undecidable:
a change it cannot prove safe is reported."""

from __future__ import annotations

import json

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

from odradek.gateway.registry.errors import InvalidSchema

LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
EXACT = ("pattern", "const", "format", "multipleOf", "uniqueItems")
COMBINED = ("oneOf", "anyOf", "allOf")


def parse(text: str, referenced: dict[str, str]) -> dict | bool:
    try:
        document = json.loads(text)
    except ValueError as e:
        raise InvalidSchema(f"Invalid schema: {e}") from None
    if not isinstance(document, (dict, bool)):
        raise InvalidSchema("Invalid schema: a JSON Schema is an object or a boolean")
    try:
        jsonschema.validators.validator_for(document).check_schema(document)
    except jsonschema.exceptions.SchemaError as e:
        raise InvalidSchema(f"Invalid JSON schema: {e.message}") from None
    return document


def canonical(document) -> str:
    return json.dumps(document, separators=(",", ":"), sort_keys=True)


def incompatibilities(reader, writer) -> list[str]:
    return _Diff(reader, writer).compare(reader, writer, "#")


def _types(schema: dict) -> set[str] | None:
    kind = schema.get("type")
    if kind is None:
        return None
    return {kind} if isinstance(kind, str) else set(kind)


def _open(schema: dict) -> bool:
    return schema.get("additionalProperties", True) is not False


class _Diff:
    """One comparison: the roots are kept to resolve local ``$ref``s (#/definitions/..., #/$defs/...)."""

    def __init__(self, reader_root, writer_root):
        self.roots = (reader_root, writer_root)
        self.seen: set[tuple[int, int]] = set()

    def _resolve(self, schema, root):
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#/"):
            target = root
            for part in schema["$ref"][2:].split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            schema = target
        return schema

    def compare(self, reader, writer, path: str) -> list[str]:
        reader, writer = self._resolve(reader, self.roots[0]), self._resolve(writer, self.roots[1])
        if (id(reader), id(writer)) in self.seen:     # a recursive definition: compared once
            return []
        self.seen.add((id(reader), id(writer)))
        if reader is True or reader == {}:
            return []
        if writer is False:
            return []
        if reader is False or writer is True:
            return [f"SCHEMA_NARROWED at {path}"]
        if "$ref" in reader or "$ref" in writer:      # references to other subjects: kept as they were
            same = reader.get("$ref") == writer.get("$ref")
            return [] if same else [f"REFERENCE_CHANGED at {path}"]
        return (self._types(reader, writer, path) + self._bounds(reader, writer, path)
                + self._enum(reader, writer, path) + self._object(reader, writer, path)
                + self._array(reader, writer, path) + self._combined(reader, writer, path))

    @staticmethod
    def _types(reader: dict, writer: dict, path: str) -> list[str]:
        wanted, given = _types(reader), _types(writer)
        if wanted is None:
            return []
        if given is None:
            return [f"TYPE_NARROWED at {path}: {sorted(wanted)} from any type"]
        if "number" in wanted:
            wanted = wanted | {"integer"}
        lost = given - wanted
        return [f"TYPE_NARROWED at {path}: {sorted(lost)} no longer allowed"] if lost else []

    @staticmethod
    def _bounds(reader: dict, writer: dict, path: str) -> list[str]:
        out = []
        for key in LOWER_BOUNDS:
            if key in reader and (key not in writer or reader[key] > writer[key]):
                out.append(f"{key.upper()}_{'ADDED' if key not in writer else 'INCREASED'} at {path}")
        for key in UPPER_BOUNDS:
            if key in reader and (key not in writer or reader[key] < writer[key]):
                out.append(f"{key.upper()}_{'ADDED' if key not in writer else 'DECREASED'} at {path}")
        for key in EXACT:
            if key in reader and reader.get(key) != writer.get(key):
                out.append(f"{key.upper()}_{'ADDED' if key not in writer else 'CHANGED'} at {path}")
        return out

    @staticmethod
    def _enum(reader: dict, writer: dict, path: str) -> list[str]:
        if "enum" not in reader:
            return []
        if "enum" not in writer:
            return [f"ENUM_ADDED at {path}"]
        lost = [v for v in writer["enum"] if v not in reader["enum"]]
        return [f"ENUM_ARRAY_NARROWED at {path}: {lost}"] if lost else []

    def _object(self, reader: dict, writer: dict, path: str) -> list[str]:
        out = []
        r_props, w_props = reader.get("properties", {}), writer.get("properties", {})
        added_required = set(reader.get("required", ())) - set(writer.get("required", ()))
        for name in sorted(added_required):
            out.append(f"REQUIRED_PROPERTY_ADDED at {path}/properties/{name}")
        for name, schema in w_props.items():
            where = f"{path}/properties/{name}"
            if name in r_props:
                out += self.compare(r_props[name], schema, where)
            elif not _open(reader):
                out.append(f"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL at {where}")
            elif isinstance(reader.get("additionalProperties"), dict):
                out += self.compare(reader["additionalProperties"], schema, where)
        for name, schema in r_props.items():
            if name in w_props:
                continue
            where = f"{path}/properties/{name}"
            if _open(writer) and self.compare(schema, writer.get("additionalProperties", True), where):
                # the writer's data may hold this name with a value the new property refuses
                out.append(f"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL at {where}")
        if _open(writer) and not _open(reader):
            out.append(f"ADDITIONAL_PROPERTIES_REMOVED at {path}")
        elif isinstance(reader.get("additionalProperties"), dict):
            out += self.compare(reader["additionalProperties"], writer.get("additionalProperties", True),
                                f"{path}/additionalProperties")
        return out

    def _array(self, reader: dict, writer: dict, path: str) -> list[str]:
        if "items" not in reader:
            return []
        return self.compare(reader["items"], writer.get("items", True), f"{path}/items")

    def _combined(self, reader: dict, writer: dict, path: str) -> list[str]:
        out = []
        for key in COMBINED:
            if key not in reader:
                continue
            if key not in writer:
                out.append(f"COMBINED_TYPE_ADDED at {path}/{key}")
                continue
            r, w = reader[key], writer[key]
            if key == "allOf" and len(r) > len(w) or key != "allOf" and len(r) < len(w):
                out.append(f"COMBINED_TYPE_SUBSCHEMAS_CHANGED at {path}/{key}")
            for i, (rs, ws) in enumerate(zip(r, w)):
                out += self.compare(rs, ws, f"{path}/{key}/{i}")
        return out
