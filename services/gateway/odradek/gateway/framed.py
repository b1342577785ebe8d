"""Registry-framed keys and values of the range read decoded for people (the console's message
browser asks ``GET /topics/{t}/partitions/{p}/records?schemas=true``): each key or value that
carries Confluent's wire format (magic byte 0, a 4-byte schema id this gateway's registry knows)
gains ``key_schema`` / ``value_schema``: ``{"id", "type", "subject", "version", "data"}`` (the
decoded JSON-shaped value, as REST Proxy's consumers answer it), or ``{"id", "type", "error"}``
when the bytes do not decode with that schema. The raw base64 ``key`` / ``value`` stay as they
are. Bytes that are not framed, or name an unknown id, are left alone: a browser shows any topic.
A page naming an id this replica lacks catches it up with ``_schemas`` once (``Registry.fresh``'s
reason: the record may have been produced through another replica a moment ago); an id still
unknown then is left alone.

The codecs are ``serde``'s; schemas by id and their parsing are the registry's (``embedded``)."""

from __future__ import annotations

import base64
import json

from fastapi import Request

from odradek.gateway import embedded, serde
from odradek.gateway.errors import SchemaLookupFailed
from odradek.gateway.registry import access
from odradek.gateway.registry.errors import RegistryError
from odradek.gateway.registry.service import READ_WAIT_S, Registry

TYPE_NAMES = {v: k for k, v in embedded.V3_TYPES.items()}   # AVRO, JSONSCHEMA, PROTOBUF as v3 names them


async def decoded_body(request: Request, topic: str, body: bytes) -> bytes:
    """The range read's JSON ``body`` with its framed keys and values decoded."""
    try:
        reg = await embedded.registry(request)
    except SchemaLookupFailed:
        return body          # no registry in this gateway: nothing names a schema
    records = json.loads(body)
    if _frame_ids(records) - reg.state.schemas.keys():
        try:
            await reg.log.caught_up(READ_WAIT_S)
        except RegistryError:
            pass             # the ids not known here stay undecoded, as for any unknown id
    for record in records:
        for part in ("key", "value"):
            found = await _decoded(request, reg, topic, part, record.get(part))
            if found is not None:
                record[f"{part}_schema"] = found
    return json.dumps(records, separators=(",", ":"), default=str).encode()


def _unframed(b64: str | None) -> tuple[int, bytes] | None:
    if not b64:
        return None
    try:
        return serde.unframe(base64.b64decode(b64))
    except serde.SerdeError:
        return None


def _frame_ids(records: list[dict]) -> set[int]:
    return {found[0] for record in records for part in ("key", "value")
            if (found := _unframed(record.get(part))) is not None}


async def _decoded(request: Request, reg: Registry, topic: str, part: str, b64: str | None) -> dict | None:
    found = _unframed(b64)
    if found is None:
        return None
    schema_id, rest = found
    if schema_id not in reg.state.schemas:
        return None
    out = {"id": schema_id, "type": TYPE_NAMES.get(reg.schema(schema_id).type),
           **await _subject_version(request, reg, topic, part, schema_id)}
    try:
        out["data"] = serde.decode(await reg.parsed(schema_id), rest)
    except serde.SerdeError as e:
        out["error"] = str(e)
    return out


async def _subject_version(request: Request, reg: Registry, topic: str, part: str, schema_id: int) -> dict:
    """The subject and version the id is registered under, the topic's own subject first
    (``<topic>-value`` for a value), among those the caller may read."""
    uses = await access.visible(request, reg.state.uses_of(schema_id, deleted=True))
    if not uses:
        return {}
    own = embedded.subject(topic, part == "key")
    best = min(uses, key=lambda v: (v.subject != own, v.deleted, v.subject, v.version))
    return {"subject": best.subject, "version": best.version}
