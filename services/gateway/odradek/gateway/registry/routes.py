"""The registry's HTTP API: Confluent Schema Registry's paths, bodies and error codes, as its
clients call them (``confluent_kafka.schema_registry``, the Java serializers, Karapace's tests),
answered as ``application/vnd.schemaregistry.v1+json``. Served at the gateway's root, beside the
REST Proxy's paths (none overlap), as Karapace serves both.

Rights (``access``): who may read or write a subject follows Confluent's topic-based authorizer,
on the gateway's token rights or, for a mapped user without rights of its own, the brokers' ACLs
on the subject's topic; writes run on the primary (``forward``)."""

from __future__ import annotations

import functools
import inspect
import json

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse

from odradek.gateway.registry import access
from odradek.gateway.registry import app as registry_app
from odradek.gateway.registry import schemas as sc
from odradek.gateway.registry.errors import NotFound, RegistryError
from odradek.gateway.registry.forward import on_primary
from odradek.gateway.registry.service import Registration, Registry
from odradek.gateway.registry.state import Version

MEDIA = "application/vnd.schemaregistry.v1+json"


class RegistryResponse(JSONResponse):
    media_type = MEDIA


async def _started(request: Request) -> None:
    await registry_app.wait_started(request.app)


def _registry(request: Request) -> Registry:
    registry = getattr(request.app.state, "registry", None)
    if registry is None:
        raise RegistryError("The schema registry is not running in this gateway (--schema-registry false, or "
                            "its topic could not be had: the gateway's log says why)", 500, 50001)
    return registry


def _fresh(handler):
    """A read's route whose "not found" is answered only after this replica has caught up with
    ``_schemas`` (``Registry.fresh``): a client that got an id or version from any replica finds it here."""
    signature = inspect.signature(handler)

    @functools.wraps(handler)
    async def read(*args, **kwargs):
        try:
            return await handler(*args, **kwargs)
        except NotFound:
            request = signature.bind(*args, **kwargs).arguments["request"]
            return await _registry(request).fresh(lambda: handler(*args, **kwargs))
    return read


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() == "true"


async def _body(request: Request) -> dict:
    raw = await request.body()
    try:
        body = json.loads(raw or b"{}")
    except ValueError as e:
        raise RegistryError(f"Unrecognized JSON: {e}", 400, 400) from None
    if not isinstance(body, dict):
        raise RegistryError("The body is a JSON object", 422, 422)
    return body


def _schema_of(body: dict) -> sc.Schema:
    text = body.get("schema")
    if not isinstance(text, str) or not text:
        raise RegistryError("Empty schema", 422, 42201)
    try:
        refs = tuple(sc.Reference(r["name"], r["subject"], int(r["version"])) for r in body.get("references") or ())
    except (KeyError, TypeError, ValueError):
        raise RegistryError("Invalid schema references", 422, 42201) from None
    kind = body.get("schemaType") or sc.AVRO
    if not isinstance(kind, str):
        raise RegistryError(f"Invalid schema type {kind}", 422, 42201)
    return sc.Schema(kind.upper(), text, refs)


def _number(body: dict, name: str) -> int | None:
    """IMPORT mode's ``id`` and ``version``: positive integers."""
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise RegistryError(f"Invalid {name} {value!r}", 422, 42201 if name == "id" else 42202)
    return value


def _schema_json(schema: sc.Schema, text: str | None = None) -> dict:
    out: dict = {"schema": text if text is not None else schema.text}
    if schema.type != sc.AVRO:
        out["schemaType"] = schema.type
    if schema.references:
        out["references"] = [r.to_json() for r in schema.references]
    return out


def _version_json(registry: Registry, v: Version) -> dict:
    return {"subject": v.subject, "version": v.version, "id": v.id, **_schema_json(registry.schema(v.id))}


# -- schemas by id ------------------------------------------------------------------------------------
async def schema_types(request: Request) -> list:
    return list(sc.TYPES)


@_fresh
async def schema_by_id(schema_id: int, request: Request) -> dict:
    registry = _registry(request)
    access.reader(request)
    schema = registry.schema(schema_id)
    await access.check_any_subject(request, registry.state.uses_of(schema_id, deleted=True))
    text = None
    if request.query_params.get("format") == "serialized" and schema.type == sc.PROTOBUF:
        text = (await registry.parsed(schema_id)).value.serialized()
    return _schema_json(schema, text)


async def raw_schema_by_id(schema_id: int, request: Request):
    schema_json = await schema_by_id(schema_id, request)
    return RegistryResponse(json.loads(schema_json["schema"]) if _is_json(schema_json) else schema_json["schema"])


def _is_json(schema_json: dict) -> bool:
    return schema_json.get("schemaType", sc.AVRO) in (sc.AVRO, sc.JSON)


@_fresh
async def subjects_of_id(schema_id: int, request: Request) -> list:
    access.reader(request)
    registry = _registry(request)
    registry.schema(schema_id)
    uses = registry.state.uses_of(schema_id, deleted=_flag(request, "deleted"))
    return sorted({v.subject for v in await access.visible(request, uses)})


@_fresh
async def versions_of_id(schema_id: int, request: Request) -> list:
    access.reader(request)
    registry = _registry(request)
    registry.schema(schema_id)
    uses = registry.state.uses_of(schema_id, deleted=_flag(request, "deleted"))
    return [{"subject": v.subject, "version": v.version} for v in await access.visible(request, uses)]


# -- subjects ---------------------------------------------------------------------------------------------
async def list_subjects(request: Request) -> list:
    access.reader(request)
    registry = _registry(request)
    found = registry.subjects(_flag(request, "deleted"), request.query_params.get("subjectPrefix", ""))
    allowed = await access.readable(request, found)
    return [s for s in found if s in allowed]


@_fresh
async def list_versions(subject: str, request: Request) -> list:
    await access.subject(request, subject, access.SUBJECT_READ)
    return [v.version for v in _registry(request).versions(subject, _flag(request, "deleted"))]


@_fresh
async def get_version(subject: str, version: str, request: Request) -> dict:
    await access.subject(request, subject, access.SUBJECT_READ)
    registry = _registry(request)
    return _version_json(registry, registry.version(subject, version, _flag(request, "deleted")))


async def get_raw_version(subject: str, version: str, request: Request):
    found = await get_version(subject, version, request)
    return RegistryResponse(json.loads(found["schema"]) if _is_json(found) else found["schema"])


@_fresh
async def referenced_by(subject: str, version: str, request: Request) -> list:
    await access.subject(request, subject, access.SUBJECT_READ)
    return _registry(request).referenced_by(subject, version)


async def register(subject: str, request: Request):
    await access.subject(request, subject, access.SUBJECT_WRITE)
    body = await _body(request)
    registration = Registration(_schema_of(body), _number(body, "id"), _number(body, "version"))

    async def write() -> dict:
        return {"id": (await _registry(request).register(subject, registration)).id}
    return await on_primary(request, write)


@_fresh
async def lookup(subject: str, request: Request) -> dict:
    await access.subject(request, subject, access.SUBJECT_READ)
    registry = _registry(request)
    v = await registry.lookup(subject, _schema_of(await _body(request)), _flag(request, "deleted"))
    return _version_json(registry, v)


async def delete_subject(subject: str, request: Request):
    await access.subject(request, subject, access.SUBJECT_DELETE)
    return await on_primary(request, lambda: _registry(request).delete_subject(subject, _flag(request, "permanent")))


async def delete_version(subject: str, version: str, request: Request):
    await access.subject(request, subject, access.SUBJECT_DELETE)
    return await on_primary(request, lambda: _registry(request).delete_version(subject, version,
                                                                               _flag(request, "permanent")))


# -- compatibility, config, mode --------------------------------------------------------------------------
@_fresh
async def check_version(subject: str, version: str, request: Request) -> dict:
    return await _compatible(subject, version, request)


@_fresh
async def check_all(subject: str, request: Request) -> dict:
    return await _compatible(subject, None, request)


async def _compatible(subject: str, version: str | None, request: Request) -> dict:
    await access.subject(request, subject, access.COMPATIBILITY_CHECK)
    registry = _registry(request)
    if version is not None and not registry.state.versions(subject):
        registry.versions(subject)            # 40401 for a subject with no versions
    messages = await registry.compatibility(subject, _schema_of(await _body(request)), version)
    out: dict = {"is_compatible": not messages}
    if _flag(request, "verbose"):
        out["messages"] = messages
    return out


@_fresh
async def get_config(request: Request, subject: str | None = None) -> dict:
    await _may_read(request, subject)
    return {"compatibilityLevel": _registry(request).level(subject, _flag(request, "defaultToGlobal"))}


async def _may_read(request: Request, subject: str | None) -> None:
    if subject is None:
        access.reader(request)
    else:
        await access.subject(request, subject, access.SUBJECT_CONFIG_READ)


async def put_config(request: Request, subject: str | None = None):
    await access.configure(request, subject)
    level = (await _body(request)).get("compatibility")

    async def write() -> dict:
        return {"compatibility": await _registry(request).set_level(subject, level)}
    return await on_primary(request, write)


async def delete_config(request: Request, subject: str | None = None):
    await access.configure(request, subject)

    async def write() -> dict:
        return {"compatibilityLevel": await _registry(request).delete_level(subject)}
    return await on_primary(request, write)


@_fresh
async def get_mode(request: Request, subject: str | None = None) -> dict:
    await _may_read(request, subject)
    return {"mode": _registry(request).mode(subject, _flag(request, "defaultToGlobal"))}


async def put_mode(request: Request, subject: str | None = None):
    await access.configure(request, subject)
    mode = (await _body(request)).get("mode")

    async def write() -> dict:
        return {"mode": await _registry(request).set_mode(subject, mode, _flag(request, "force"))}
    return await on_primary(request, write)


async def delete_mode(subject: str, request: Request):
    await access.configure(request, subject)

    async def write() -> dict:
        return {"mode": await _registry(request).delete_mode(subject)}
    return await on_primary(request, write)


SUBJECT = "/subjects/{subject}"
VERSION = SUBJECT + "/versions/{version}"
ROUTES = (
    ("GET", "/schemas/types", schema_types),
    ("GET", "/schemas/ids/{schema_id}", schema_by_id),
    ("GET", "/schemas/ids/{schema_id}/schema", raw_schema_by_id),
    ("GET", "/schemas/ids/{schema_id}/subjects", subjects_of_id),
    ("GET", "/schemas/ids/{schema_id}/versions", versions_of_id),
    ("GET", "/subjects", list_subjects),
    ("POST", SUBJECT, lookup),
    ("DELETE", SUBJECT, delete_subject),
    ("GET", SUBJECT + "/versions", list_versions),
    ("POST", SUBJECT + "/versions", register),
    ("GET", VERSION, get_version),
    ("GET", VERSION + "/schema", get_raw_version),
    ("GET", VERSION + "/referencedby", referenced_by),
    ("DELETE", VERSION, delete_version),
    ("POST", "/compatibility" + VERSION, check_version),
    ("POST", "/compatibility" + SUBJECT + "/versions", check_all),
    ("GET", "/config", get_config),
    ("PUT", "/config", put_config),
    ("DELETE", "/config", delete_config),
    ("GET", "/config/{subject}", get_config),
    ("PUT", "/config/{subject}", put_config),
    ("DELETE", "/config/{subject}", delete_config),
    ("GET", "/mode", get_mode),
    ("PUT", "/mode", put_mode),
    ("GET", "/mode/{subject}", get_mode),
    ("PUT", "/mode/{subject}", put_mode),
    ("DELETE", "/mode/{subject}", delete_mode),
)


def install(app: FastAPI) -> None:
    router = APIRouter(tags=["schema registry"], default_response_class=RegistryResponse,
                       dependencies=[Depends(_started)])
    for method, path, handler in ROUTES:
        router.add_api_route(path, handler, methods=[method])
    app.include_router(router)
