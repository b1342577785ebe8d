"""The schema formats of REST Proxy's produce and consume (v2's ``avro``, ``jsonschema`` and
``protobuf`` embedded formats, v3's AVRO/JSONSCHEMA/PROTOBUF data), through the schema registry
this gateway process runs (no HTTP hop to itself): a produce's schema found by id, by subject
version, or looked up and registered when new under its TopicNameStrategy subject
(``<topic>-key``, ``<topic>-value``; registration runs on the registry's primary, as any); records'
JSON encoded and framed by ``serde``; a consumed record's schema found by the id in its frame.
A schema by id or version that this replica lacks is looked for again once it has caught up with
``_schemas`` (``Registry.fresh``): an id given by another replica is found here too.

Errors are REST Proxy's: 40801 the registry refused or has no such schema, 42205 an invalid
schema, 42203 a record that does not conform (raised before anything is written)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from fastapi import Request
from fastapi.responses import Response

from odradek.gateway import serde
from odradek.gateway.errors import InvalidSchema, RecordConversionFailed, SchemaLookupFailed, UndecodableRecord
from odradek.gateway.registry import access
from odradek.gateway.registry import app as registry_app
from odradek.gateway.registry import errors as registry_errors
from odradek.gateway.registry.forward import on_primary
from odradek.gateway.registry.schemas import AVRO, JSON, PROTOBUF, Parsed, Schema
from odradek.gateway.registry.service import Registration, Registry

FORMATS = {"avro": AVRO, "jsonschema": JSON, "protobuf": PROTOBUF}   # v2 embedded format -> schema type
V3_TYPES = {"AVRO": AVRO, "JSONSCHEMA": JSON, "PROTOBUF": PROTOBUF}


def subject(topic: str, key: bool) -> str:
    return f"{topic}-{'key' if key else 'value'}"


@dataclass(frozen=True)
class Writer:
    """One schema a produce's keys or values are written with."""
    schema_id: int
    parsed: Parsed
    version: int | None = None
    referenced: dict = field(default_factory=dict, compare=False)

    def encode(self, value, where: str = "") -> bytes | None:
        if value is None:
            return None
        try:
            return serde.frame(self.schema_id, serde.encode(self.parsed, value, self.referenced))
        except serde.SerdeError as e:
            raise RecordConversionFailed(f"{where}{e}") from None


async def registry(request: Request) -> Registry:
    await registry_app.wait_started(request.app)
    found = getattr(request.app.state, "registry", None)
    if found is None:
        raise SchemaLookupFailed("the schema registry is not running in this gateway")
    return found


async def by_id(request: Request, schema_id: int, kind: str | None) -> Writer:
    """The schema ``schema_id``, which must be a ``kind`` schema (when given)."""
    reg = await registry(request)
    try:
        schema = await reg.fresh(lambda: reg.schema(schema_id))
    except registry_errors.SchemaNotFound:
        raise SchemaLookupFailed(f"no schema has id {schema_id}") from None
    if kind is not None and schema.type != kind:
        raise InvalidSchema(f"schema {schema_id} is a {schema.type} schema, not {kind}")
    return Writer(schema_id, await reg.parsed(schema_id), None, reg.referenced(schema_id))


async def by_version(request: Request, subject_name: str, version: int | str, kind: str | None,
                     op: access.Op = access.SUBJECT_READ) -> Writer:
    """The schema of ``subject_name``'s ``version`` (``latest`` or -1: its newest); ``op``: the
    registry right this needs (a schema given as text is a registration: found or registered)."""
    reg = await registry(request)
    await access.subject(request, subject_name, op)
    try:
        found = await reg.fresh(lambda: reg.version(subject_name, version))
    except registry_errors.RegistryError as e:
        raise SchemaLookupFailed(e.message) from None
    writer = await by_id(request, found.id, kind)
    return Writer(writer.schema_id, writer.parsed, found.version, writer.referenced)


async def by_text(request: Request, subject_name: str, text: str, kind: str) -> Writer:
    """The schema ``text`` as registered under ``subject_name``: looked up, else registered."""
    reg = await registry(request)
    schema = Schema(kind, text)
    for _ in range(2):     # registered when the lookup finds nothing, then found
        try:
            found = await reg.lookup(subject_name, schema)
            return await by_version(request, subject_name, found.version, kind, access.FOUND_FOR_PRODUCE)
        except (registry_errors.SubjectNotFound, registry_errors.SchemaNotFound):
            pass
        except registry_errors.InvalidSchema as e:
            raise InvalidSchema(e.message) from None
        # v3 may name any subject: the registry's rights
        await access.subject(request, subject_name, access.SUBJECT_WRITE)
        schema_id = await _register(request, reg, subject_name, schema)
    return await by_id(request, schema_id, kind)


async def _register(request: Request, reg: Registry, subject_name: str, schema: Schema) -> int:
    """Registered on the primary: here when this replica is, else through it (a new schema's id
    comes from one place whichever replica the produce reached)."""
    body = json.dumps({"schema": schema.text, "schemaType": schema.type}).encode()
    try:
        out = await on_primary(request, lambda: reg.register(subject_name, Registration(schema)),
                               f"/subjects/{subject_name}/versions", body)
    except registry_errors.InvalidSchema as e:
        raise InvalidSchema(e.message) from None
    except registry_errors.RegistryError as e:
        raise SchemaLookupFailed(e.message) from None
    if not isinstance(out, Response):
        return out.id
    found = json.loads(out.body or b"{}")
    if out.status_code != 200:
        raise SchemaLookupFailed(found.get("message", "registration failed"))
    await reg.log.caught_up()      # the primary's record is read here before the id is used
    return found["id"]


class Reader:
    """Decodes the records of one consume answer (schemas by id, parsed once each)."""

    def __init__(self, reg: Registry, kind: str):
        self.registry, self.kind = reg, kind

    async def decode(self, data: bytes | None):
        if data is None:
            return None
        try:
            schema_id, rest = serde.unframe(data)
            schema = await self.registry.fresh(lambda: self.registry.schema(schema_id))
            if schema.type != self.kind:
                raise serde.SerdeError(f"the record's schema {schema_id} is {schema.type}, not {self.kind}")
            return serde.decode(await self.registry.parsed(schema_id), rest)
        except serde.SerdeError as e:
            raise UndecodableRecord(f"Error deserializing a record: {e}") from None
        except registry_errors.SchemaNotFound:
            raise UndecodableRecord(f"Error deserializing a record: no schema has id {schema_id}") from None
