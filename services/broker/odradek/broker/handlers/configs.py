"""DescribeConfigs, IncrementalAlterConfigs and AlterConfigs (legacy, v0-2) for topics; the
BROKER and BROKER_LOGGER resources are ``broker_configs``'.

Topic overrides live in ZooKeeper (``/config/topics/<t>``) and change only through the
controller; this broker forwards the change and answers with the controller's verdict. A
topic is described from ZooKeeper, as Kafka's ZooKeeper mode does, so that a client reads its
own write at once (the controller's push to this broker may still be on its way).
What is described (values, sources, synonyms, types, docs) comes from the config registry
(``odradek.config.describe``); this module only translates requests and responses.
"""

from __future__ import annotations

import asyncio

from odradek.broker.context import BrokerContext
from odradek.broker.handlers.answer import ZERO
from odradek.broker.handlers import broker_configs
from odradek.broker.handlers.broker_configs import BROKER, BROKER_LOGGER
from odradek.broker.security.acl import Operation, ResourceType
from odradek.broker.security.authorizer import allowed, require_cluster
from odradek.cluster import control_plane as cp
from odradek.cluster.zk_data import TOPICS
from odradek.config import TOPIC_CONFIGS, ConfigType
from odradek.config.describe import Described, describe_topic
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make

TOPIC = 2
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


async def describe_configs(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.DESCRIBE_CONFIGS, header.api_version)
    results = []
    for res in req.resources:
        try:
            _authorize(ctx, Operation.DESCRIBE_CONFIGS, res)
            entries = await _entries(ctx, res)
            wanted = set(res.configuration_keys) if res.configuration_keys is not None else None
            synonyms = getattr(req, "include_synonyms", False)
            configs = tuple(_describe(s, e, synonyms) for e in entries if wanted is None or e.name in wanted)
            error, message = ErrorCode.none, None
        except KafkaError as e:
            configs, error, message = (), e.code, e.message
        results.append(make(s.DescribeConfigsResult, error_code=error, error_message=message,
                            resource_type=res.resource_type, resource_name=res.resource_name,
                            configs=configs))
    return make(s.DescribeConfigsResponse, throttle_time=ZERO, results=tuple(results))


def _authorize(ctx: BrokerContext, op: Operation, res) -> None:
    """Kafka's check: ``op`` on the topic (TOPIC_AUTHORIZATION_FAILED) or, for a broker, on the
    cluster (CLUSTER_AUTHORIZATION_FAILED)."""
    if ctx.authorizer is None:
        return
    if res.resource_type == TOPIC and not allowed(ctx, op, ResourceType.TOPIC, res.resource_name):
        raise KafkaError(ErrorCode.topic_authorization_failed, "Topic authorization failed.")
    if res.resource_type in (BROKER, BROKER_LOGGER):
        require_cluster(ctx, op)


async def _entries(ctx: BrokerContext, res) -> list[Described]:
    if res.resource_type == TOPIC:
        meta = ctx.replicas.topic(res.resource_name)
        if meta is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic {res.resource_name} does not exist")
        return describe_topic(await _stored_overrides(ctx, res.resource_name, meta.configs), _layers(ctx))
    if res.resource_type in (BROKER, BROKER_LOGGER):
        return broker_configs.describe(ctx, res.resource_type, res.resource_name)
    raise KafkaError(ErrorCode.invalid_request, f"unsupported resource type {res.resource_type}")


async def _stored_overrides(ctx: BrokerContext, topic: str, pushed):
    """The topic's overrides as ZooKeeper holds them now (what the controller last wrote)."""
    if ctx.configs is None:
        return pushed
    stored, version = await asyncio.to_thread(ctx.configs.read, TOPICS, topic)
    return stored if version >= 0 else pushed


def _layers(ctx: BrokerContext):
    return ctx.dynamic.layers if ctx.dynamic is not None else ctx.config.topic_defaults


def topic_entries(ctx: BrokerContext, overrides) -> list[tuple[str, str, int]]:
    """(name, value, source) of every topic config, as Kafka describes them."""
    return [(e.name, e.value, e.source) for e in describe_topic(overrides, _layers(ctx))]


def _describe(s, entry: Described, with_synonyms: bool):
    synonyms = tuple(make(s.DescribeConfigsSynonym, name=n, value=v, source=src)
                     for n, v, src in entry.synonyms) if with_synonyms else ()
    return make(s.DescribeConfigsResourceResult, name=entry.name, value=entry.value, read_only=entry.read_only,
                config_source=entry.source, is_sensitive=False, synonyms=synonyms,
                config_type=entry.key.type.code, documentation=entry.key.doc)


async def incremental_alter_configs(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.INCREMENTAL_ALTER_CONFIGS, header.api_version)
    responses = await _alter_each(ctx, s, req, _alter_incremental)
    return make(s.IncrementalAlterConfigsResponse, throttle_time=ZERO, responses=responses)


async def alter_configs(ctx: BrokerContext, header, req):
    """AlterConfigs (legacy): each resource's dynamic config becomes exactly the one given."""
    s = Schemas(ApiKey.ALTER_CONFIGS, header.api_version)
    responses = await _alter_each(ctx, s, req, _alter_legacy)
    return make(s.AlterConfigsResponse, throttle_time=ZERO, responses=responses)


async def _alter_each(ctx: BrokerContext, s, req, alter) -> tuple:
    """``alter(ctx, resource, validate_only)`` for each resource (authorized first), answered
    one by one with its error."""
    responses = []
    for res in req.resources:
        try:
            _authorize(ctx, Operation.ALTER_CONFIGS, res)
            await alter(ctx, res, req.validate_only)
            error, message = ErrorCode.none, None
        except KafkaError as e:
            error, message = e.code, e.message
        responses.append(make(s.AlterConfigsResourceResponse, error_code=error, error_message=message,
                              resource_type=res.resource_type, resource_name=res.resource_name))
    return tuple(responses)


async def _alter_incremental(ctx: BrokerContext, res, validate_only: bool) -> None:
    if res.resource_type in (BROKER, BROKER_LOGGER):
        await broker_configs.alter_incremental(ctx, res, validate_only)
    else:
        await _alter(ctx, res, validate_only)


async def _alter_legacy(ctx: BrokerContext, res, validate_only: bool) -> None:
    if res.resource_type == BROKER:
        await broker_configs.alter_legacy(ctx, res, validate_only)
    elif res.resource_type == TOPIC:
        await _replace_topic_configs(ctx, res, validate_only)
    else:
        raise KafkaError(ErrorCode.invalid_request, f"AlterConfigs is only supported for topics and brokers, "
                                                    f"but resource type is {res.resource_type}")


async def _replace_topic_configs(ctx: BrokerContext, res, validate_only: bool) -> None:
    meta = ctx.replicas.topic(res.resource_name)
    current = await _stored_overrides(ctx, res.resource_name, meta.configs if meta else {})
    wanted = {c.name: c.value for c in res.configs}
    deletes = tuple(n for n in current if n not in wanted)
    await ctx.controller.call(cp.alter_configs(res.resource_name, cp.AlterConfigs(wanted, deletes, validate_only)))


async def _alter(ctx: BrokerContext, res, validate_only: bool) -> None:
    if res.resource_type != TOPIC:
        raise KafkaError(ErrorCode.invalid_request, f"unsupported resource type {res.resource_type}")
    meta = ctx.replicas.topic(res.resource_name)
    current = dict(meta.configs) if meta else {}
    changes: dict[str, str] = {}
    deletes: list[str] = []
    for c in res.configs:
        if c.config_operation == SET:
            changes[c.name] = c.value
        elif c.config_operation == DELETE:
            deletes.append(c.name)
        elif c.config_operation in (APPEND, SUBTRACT) and _is_list(c.name):
            items = [x for x in current.get(c.name, TOPIC_CONFIGS[c.name].default).split(",") if x]
            value = [x for x in (c.value or "").split(",") if x]
            items = items + [v for v in value if v not in items] if c.config_operation == APPEND \
                else [x for x in items if x not in value]
            changes[c.name] = ",".join(items)
        else:
            raise KafkaError(ErrorCode.invalid_config,
                             f"operation {c.config_operation} is not valid for config {c.name}")
    await ctx.controller.call(cp.alter_configs(res.resource_name,
                                               cp.AlterConfigs(changes, tuple(deletes), validate_only)))


def _is_list(name: str) -> bool:
    key = TOPIC_CONFIGS.get(name)
    return key is not None and key.type.code == ConfigType.LIST
