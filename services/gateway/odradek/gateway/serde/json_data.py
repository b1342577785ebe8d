"""JSON Schema data: the document's UTF-8 JSON text, validated by ``jsonschema`` (the validator of
the draft the schema names; ``$ref``s to the schema's references resolved through ``referencing``)
before it is written, as Confluent's JSON Schema serializer validates."""

from __future__ import annotations

import json

import jsonschema.exceptions
import jsonschema.validators
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT7

from odradek.gateway.serde.errors import SerdeError


_VALIDATORS: dict[int, tuple[object, tuple, object]] = {}
CACHED = 512


def validator(document, references: dict[str, str] | None = None):
    """``jsonschema``'s validator of ``document``, cached by the document's identity (building one
    costs more than validating a small document)."""
    refs = tuple(sorted((references or {}).items()))
    found = _VALIDATORS.get(id(document))
    if found is None or found[0] is not document or found[1] != refs:
        if len(_VALIDATORS) >= CACHED:
            _VALIDATORS.clear()
        registry = Registry().with_resources(
            (name, Resource.from_contents(json.loads(ref), default_specification=DRAFT7)) for name, ref in refs)
        found = _VALIDATORS[id(document)] = (document, refs, jsonschema.validators.validator_for(document)(
            document, registry=registry))
    return found[2]


def encode(document, value, references: dict[str, str] | None = None) -> bytes:
    try:
        error = jsonschema.exceptions.best_match(validator(document, references).iter_errors(value))
    except Unresolvable as e:
        raise SerdeError(f"Unresolvable $ref in the schema: {e}") from None
    if error is not None:
        where = "/".join(map(str, error.absolute_path))
        raise SerdeError(f"{error.message}{f' at /{where}' if where else ''}")
    return json.dumps(value, separators=(",", ":")).encode()


def decode(document, data: bytes):
    try:
        return json.loads(data)
    except ValueError as e:
        raise SerdeError(f"Invalid JSON data: {e}") from None
