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
from .replication import AlterPartition
from .service import Controller

log = logging.getLogger(__name__)

PREFIX = "/internal/v1"
_STATUS = {ErrorCode.not_controller: 503, ErrorCode.request_timed_out: 503,
           ErrorCode.topic_already_exists: 409, ErrorCode.unknown_topic_or_partition: 404,
           ErrorCode.broker_not_available: 404, ErrorCode.unknown_server_error: 500,
           # the caller's view is stale: it must refresh (metadata, registration) and retry
           ErrorCode.not_leader_or_follower: 409, ErrorCode.fenced_leader_epoch: 409,
           ErrorCode.invalid_update_version: 409, ErrorCode.stale_broker_epoch: 409}


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


def parse_alter_partition(body: Mapping) -> AlterPartition:
    isr = _field(body, "isr", list)
    try:
        isr_ids = tuple(_int(r) for r in isr)
    except TypeError:
        raise _bad("'isr' must be a list of broker ids") from None
    return AlterPartition(_field(body, "broker_id", int), _field(body, "broker_epoch", int, -1),
                          _field(body, "topic", str), _field(body, "partition", int),
                          _field(body, "leader_epoch", int), _field(body, "partition_epoch", int), isr_ids)


def _topic_partition(entry: Any, what: str) -> tuple[str, int]:
    if not isinstance(entry, dict):
        raise _bad(f"each of '{what}' must be an object with 'topic' and 'partition'")
    return _field(entry, "topic", str), _field(entry, "partition", int)


def parse_elect_leaders(body: Mapping) -> tuple[int, list[tuple[str, int]] | None]:
    partitions = _field(body, "partitions", list, None, nullable=True)
    return (_field(body, "election_type", int),
            None if partitions is None else [_topic_partition(e, "partitions") for e in partitions])


def parse_reassignments(body: Mapping) -> list[tuple[str, int, tuple[int, ...] | None]]:
    entries = []
    for e in _field(body, "reassignments", list):
        topic, partition = _topic_partition(e, "reassignments")
        if "replicas" not in e:
            raise _bad("each reassignment needs 'replicas' (a list of broker ids, or null to cancel)")
        replicas = e["replicas"]
        try:
            entries.append((topic, partition, None if replicas is None else tuple(_int(r) for r in replicas)))
        except TypeError:
            raise _bad("'replicas' must be a list of broker ids or null") from None
    keys = [(t, p) for t, p, _ in entries]
    if len(set(keys)) != len(keys):
        raise _bad("a partition appears more than once in 'reassignments'")
    return entries


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
                                  "active": controller.active, "epoch": controller.epoch,
                                  **controller.health()})

    @routes.get(PREFIX + "/cluster")
    async def cluster(request: web.Request) -> web.Response:
        body = controller.metadata().to_json()
        body["under_replicated_partitions"] = controller.health()["under_replicated_partitions"]
        return web.json_response(body)

    @routes.post(PREFIX + "/alter-partition")
    async def alter_partition(request: web.Request) -> web.Response:
        return web.json_response(await controller.alter_partition(parse_alter_partition(await _body(request))))

    @routes.post(PREFIX + "/brokers/{id}/controlled-shutdown")
    async def controlled_shutdown(request: web.Request) -> web.Response:
        try:
            broker_id = int(request.match_info["id"])
        except ValueError:
            raise _bad("the broker id in the path must be an integer") from None
        remaining = await controller.controlled_shutdown(
            broker_id, _field(await _body(request), "broker_epoch", int, -1))
        return web.json_response({"remaining_leaderships": remaining})

    @routes.post(PREFIX + "/producer-ids")
    async def producer_ids(request: web.Request) -> web.Response:
        broker_id = _field(await _body(request), "broker_id", int)
        return web.json_response(await controller.allocate_producer_ids(broker_id))

    @routes.post(PREFIX + "/elect-leaders")
    async def elect_leaders(request: web.Request) -> web.Response:
        election_type, partitions = parse_elect_leaders(await _body(request))
        return web.json_response({"results": await controller.elect_leaders(election_type, partitions)})

    @routes.post(PREFIX + "/reassignments")
    async def reassign(request: web.Request) -> web.Response:
        entries = parse_reassignments(await _body(request))
        return web.json_response({"results": await controller.reassign(entries)})

    @routes.get(PREFIX + "/reassignments")
    async def reassignments(request: web.Request) -> web.Response:
        return web.json_response({"reassignments": controller.reassignments()})

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
