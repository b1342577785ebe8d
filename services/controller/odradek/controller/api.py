"""The controller's half of the internal HTTP API (docs/control-plane.md), on aiohttp.

Owns: routes, request-body parsing (malformed -> INVALID_REQUEST) and the mapping of
``KafkaError`` to HTTP statuses. Every error body is ``KafkaError.to_json()``. Business
decisions live in ``admin`` and ``service``; handlers only translate.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from aiohttp import web

from odradek.errors import ErrorCode, KafkaError

from .admin import CreateTopic
from .service import Controller

log = logging.getLogger(__name__)

PREFIX = "/internal/v1"
_STATUS = {ErrorCode.not_controller: 503, ErrorCode.topic_already_exists: 409,
           ErrorCode.unknown_topic_or_partition: 404, ErrorCode.unknown_server_error: 500}


def _bad(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_request, message)


def _field(body: Mapping, name: str, kind: type, default: Any = ..., nullable: bool = False) -> Any:
    if name not in body:
        if default is ...:
            raise _bad(f"missing field '{name}'")
        return default
    value = body[name]
    if value is None and nullable:
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _bad(f"field '{name}' must be {kind.__name__}")
    return value


async def _body(request: web.Request) -> Mapping:
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError):
        raise _bad("request body is not JSON") from None
    if not isinstance(body, dict):
        raise _bad("request body must be a JSON object")
    return body


def _configs(value: Mapping, what: str) -> dict[str, str | None]:
    if not all(isinstance(k, str) and (v is None or isinstance(v, (str, int, float, bool)))
               for k, v in value.items()):
        raise _bad(f"'{what}' must map config names to string values")
    return {k: (None if v is None else str(v).lower() if isinstance(v, bool) else str(v))
            for k, v in value.items()}


def parse_create(body: Mapping) -> CreateTopic:
    assignments = _field(body, "assignments", dict, None, nullable=True)
    parsed = None
    if assignments:
        try:
            parsed = {int(p): tuple(_int(r) for r in replicas) for p, replicas in assignments.items()}
        except (TypeError, ValueError):
            raise _bad("'assignments' must map partition numbers to lists of broker ids") from None
    return CreateTopic(
        name=_field(body, "name", str),
        partitions=_field(body, "partitions", int, -1),
        replication_factor=_field(body, "replication_factor", int, -1),
        assignments=parsed,
        configs=_configs(_field(body, "configs", dict, {}, nullable=True), "configs"),
        validate_only=_field(body, "validate_only", bool, False))


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(value)
    return value


@web.middleware
async def _errors(request: web.Request, handler):
    try:
        return await handler(request)
    except KafkaError as e:
        if e.code != ErrorCode.not_controller:
            log.info("%s %s -> %s: %s", request.method, request.path, e.code.name.upper(), e.message)
        return web.json_response(e.to_json(), status=_STATUS.get(e.code, 400))
    except web.HTTPException:
        raise
    except Exception as e:  # a bug: answer Kafka's UNKNOWN_SERVER_ERROR, keep the traceback
        log.exception("%s %s failed", request.method, request.path)
        error = KafkaError(ErrorCode.unknown_server_error, f"{type(e).__name__}: {e}")
        return web.json_response(error.to_json(), status=500)


def make_app(controller: Controller) -> web.Application:
    routes = web.RouteTableDef()

    @routes.get(PREFIX + "/health")
    async def health(request: web.Request) -> web.Response:
        return web.json_response({"id": controller.settings.id, "url": controller.settings.url,
                                  "active": controller.active, "epoch": controller.epoch})

    @routes.get(PREFIX + "/cluster")
    async def cluster(request: web.Request) -> web.Response:
        return web.json_response(controller.metadata().to_json())

    @routes.post(PREFIX + "/topics")
    async def create_topic(request: web.Request) -> web.Response:
        req = parse_create(await _body(request))
        topic = await controller.create_topic(req)
        return web.json_response(topic.to_json(), status=200 if req.validate_only else 201)

    @routes.delete(PREFIX + "/topics/{name}")
    async def delete_topic(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        await controller.delete_topic(name)
        return web.json_response({"name": name})

    @routes.post(PREFIX + "/topics/{name}/partitions")
    async def create_partitions(request: web.Request) -> web.Response:
        body = await _body(request)
        topic = await controller.create_partitions(request.match_info["name"], _field(body, "count", int),
                                                   _field(body, "validate_only", bool, False))
        return web.json_response(topic.to_json())

    @routes.patch(PREFIX + "/topics/{name}/configs")
    async def alter_configs(request: web.Request) -> web.Response:
        body = await _body(request)
        delete = _field(body, "delete", list, [], nullable=True)
        if not all(isinstance(k, str) for k in delete):
            raise _bad("'delete' must be a list of config names")
        configs = await controller.alter_configs(
            request.match_info["name"], _configs(_field(body, "set", dict, {}, nullable=True), "set"),
            delete, _field(body, "validate_only", bool, False))
        return web.json_response({"configs": configs})

    app = web.Application(middlewares=[_errors])
    app.add_routes(routes)
    return app
