"""The controller's half of the control plane (docs/control-plane.md), on aiohttp.

Owns: one handler per route of ``odradek.cluster.control_plane`` (which declares the routes
and parses the bodies: malformed -> INVALID_REQUEST) and the mapping of ``KafkaError`` to HTTP
statuses. Every error body is ``KafkaError.to_json()``. Handlers only translate: each calls
the ``Controller`` part that owns the request (``topics``, ``isr``, ``elections``,
``reassigner``, ``maintenance``) or the controller itself.
"""

from __future__ import annotations

import logging
from typing import Mapping

from aiohttp import web

from odradek.cluster import control_plane as cp
from odradek.cluster import control_plane_users as cpu
from odradek.cluster.control_plane_http import server_app
from odradek.errors import ErrorCode, KafkaError

from .service import Controller

log = logging.getLogger(__name__)

_STATUS = {ErrorCode.not_controller: 503, ErrorCode.request_timed_out: 503,
           ErrorCode.topic_already_exists: 409, ErrorCode.unknown_topic_or_partition: 404,
           ErrorCode.broker_not_available: 404, ErrorCode.unknown_server_error: 500,
           # the caller's view is stale: it must refresh (metadata, registration) and retry
           ErrorCode.not_leader_or_follower: 409, ErrorCode.fenced_leader_epoch: 409,
           ErrorCode.invalid_update_version: 409, ErrorCode.stale_broker_epoch: 409}


async def _body(request: web.Request) -> Mapping:
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError):
        raise KafkaError(ErrorCode.invalid_request, "request body is not JSON") from None
    if not isinstance(body, dict):
        raise KafkaError(ErrorCode.invalid_request, "request body must be a JSON object")
    return body


def _broker_id(request: web.Request) -> int:
    try:
        return int(request.match_info["id"])
    except ValueError:
        raise KafkaError(ErrorCode.invalid_request, "the broker id in the path must be an integer") from None


def _answer(model, status: int = 200) -> web.Response:
    return web.json_response(model.to_json(), status=status)


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
    async def health(request: web.Request) -> web.Response:
        return _answer(controller.health())

    async def cluster(request: web.Request) -> web.Response:
        return _answer(cp.ClusterView(controller.metadata(), controller.health().under_replicated_partitions))

    async def alter_partition(request: web.Request) -> web.Response:
        return _answer(await controller.isr.alter_partition(cp.AlterPartition.from_json(await _body(request))))

    async def alter_partitions(request: web.Request) -> web.Response:
        return _answer(await controller.isr.alter_partitions(cp.AlterPartitions.from_json(await _body(request))))

    async def controlled_shutdown(request: web.Request) -> web.Response:
        broker_id = _broker_id(request)
        req = cp.ControlledShutdown.from_json(await _body(request))
        remaining = await controller.elections.controlled_shutdown(broker_id, req.broker_epoch)
        return _answer(cp.RemainingLeaderships(tuple(remaining)))

    async def maintenance(request: web.Request) -> web.Response:
        return _answer(controller.maintenance.status(_broker_id(request)))

    async def enable_maintenance(request: web.Request) -> web.Response:
        return _answer(await controller.maintenance.enable(_broker_id(request)))

    async def disable_maintenance(request: web.Request) -> web.Response:
        return _answer(await controller.maintenance.disable(_broker_id(request)))

    async def producer_ids(request: web.Request) -> web.Response:
        req = cp.ProducerIds.from_json(await _body(request))
        return _answer(await controller.allocate_producer_ids(req.broker_id))

    async def elect_leaders(request: web.Request) -> web.Response:
        req = cp.ElectLeaders.from_json(await _body(request))
        return _answer(cp.PartitionResults(tuple(await controller.elections.elect_leaders(req.election_type,
                                                                                req.partitions))))

    async def reassign(request: web.Request) -> web.Response:
        req = cp.Reassign.from_json(await _body(request))
        return _answer(cp.PartitionResults(tuple(await controller.reassigner.reassign(req.reassignments))))

    async def reassignments(request: web.Request) -> web.Response:
        return _answer(cp.Reassignments(tuple(controller.reassigner.ongoing())))

    async def create_topic(request: web.Request) -> web.Response:
        req = cp.CreateTopic.from_json(await _body(request))
        return _answer(await controller.topics.create(req), status=200 if req.validate_only else 201)

    async def delete_topic(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        await controller.topics.delete(name)
        return _answer(cp.DeletedTopic(name))

    async def create_partitions(request: web.Request) -> web.Response:
        req = cp.CreatePartitions.from_json(await _body(request))
        return _answer(await controller.topics.create_partitions(request.match_info["name"], req.count, req.validate_only))

    async def alter_configs(request: web.Request) -> web.Response:
        req = cp.AlterConfigs.from_json(await _body(request))
        configs = await controller.topics.alter_configs(request.match_info["name"], req.set_configs,
                                                 list(req.delete_configs), req.validate_only)
        return _answer(cp.TopicConfigs(configs))

    async def user(request: web.Request) -> web.Response:
        name, principal = request.match_info["name"], request.query.get("principal")
        return _answer(await controller.users(lambda u: u.describe(name, principal)))

    async def put_user(request: web.Request) -> web.Response:
        name, spec = request.match_info["name"], cpu.UserSpec.from_json(await _body(request))
        return _answer(await controller.users(lambda u: u.sync(name, spec)))

    async def delete_user(request: web.Request) -> web.Response:
        name, principal = request.match_info["name"], request.query.get("principal")
        return _answer(await controller.users(lambda u: u.delete(name, principal)))

    return server_app({
        cp.HEALTH: health, cp.CLUSTER: cluster, cp.ALTER_PARTITION: alter_partition,
        cp.ALTER_PARTITIONS: alter_partitions,
        cp.CONTROLLED_SHUTDOWN: controlled_shutdown, cp.PRODUCER_IDS: producer_ids,
        cp.ELECT_LEADERS: elect_leaders, cp.REASSIGN: reassign, cp.LIST_REASSIGNMENTS: reassignments,
        cp.CREATE_TOPIC: create_topic, cp.DELETE_TOPIC: delete_topic, cp.CREATE_PARTITIONS: create_partitions,
        cp.ALTER_CONFIGS: alter_configs, cp.MAINTENANCE: maintenance, cp.ENABLE_MAINTENANCE: enable_maintenance,
        cp.DISABLE_MAINTENANCE: disable_maintenance,
        cpu.USER: user, cpu.PUT_USER: put_user, cpu.DELETE_USER: delete_user}, middlewares=[_errors],
        version=controller.settings.protocol_version)
