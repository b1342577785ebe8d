"""DescribeConfigs and IncrementalAlterConfigs for topics (and a read-only view of the broker).

Topic overrides live in ZooKeeper (``/config/topics/<t>``) and change only through the
controller; this broker forwards the change and answers with the controller's verdict.
Dynamic broker configs are not supported: altering a BROKER resource is INVALID_REQUEST.
"""

from __future__ import annotations

from odradek.broker.context import BrokerContext
from odradek.broker.dispatch import ZERO
from odradek.config import TOPIC_CONFIGS
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.codec import Schemas, make

TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_LIST_KEYS = {"cleanup.policy"}
_LONG_MAX = "9223372036854775807"

# Kafka's broker-level synonym of each topic config and the broker default it reports as the
# DEFAULT_CONFIG synonym (LogConfig's TopicConfigSynonyms). retention.ms, segment.ms and
# segment.jitter.ms default through *.hours settings, which Kafka 3.9 does not list as
# synonyms (checked against it by tests/compat). A broker-wide value set with --config is
# reported as STATIC_BROKER_CONFIG under the name in _STATIC_NAMES (or the default's name).
_DEFAULT_SYNONYMS: dict[str, tuple[str, str] | None] = {
    "cleanup.policy": ("log.cleanup.policy", "delete"),
    "compression.type": ("compression.type", "producer"),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms", "86400000"),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms", "60000"),
    "flush.messages": ("log.flush.interval.messages", _LONG_MAX),
    "flush.ms": ("log.flush.scheduler.interval.ms", _LONG_MAX),
    "index.interval.bytes": ("log.index.interval.bytes", "4096"),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms", _LONG_MAX),
    "max.message.bytes": ("message.max.bytes", "1048588"),
    "message.timestamp.type": ("log.message.timestamp.type", "CreateTime"),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio", "0.5"),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms", "0"),
    "min.insync.replicas": ("min.insync.replicas", "1"),
    "preallocate": ("log.preallocate", "false"),
    "retention.bytes": ("log.retention.bytes", "-1"),
    "retention.ms": None,
    "segment.bytes": ("log.segment.bytes", "1073741824"),
    "segment.index.bytes": ("log.index.size.max.bytes", "10485760"),
    "segment.jitter.ms": None,
    "segment.ms": None,
    "unclean.leader.election.enable": ("unclean.leader.election.enable", "false"),
}
_STATIC_NAMES = {"retention.ms": "log.retention.ms", "segment.ms": "log.roll.ms",
                 "segment.jitter.ms": "log.roll.jitter.ms", "flush.ms": "log.flush.interval.ms"}


def _config_type(name: str, default: str) -> int:
    if name in _LIST_KEYS:
        return 7
    if default in ("true", "false"):
        return 1
    try:
        int(default)
        return 5
    except ValueError:
        pass
    try:
        float(default)
        return 6
    except ValueError:
        return 2


async def describe_configs(ctx: BrokerContext, header, req):
    s = Schemas(32, header.api_version)
    results = []
    for res in req.resources:
        try:
            entries = _entries(ctx, res)
            wanted = set(res.configuration_keys) if res.configuration_keys is not None else None
            configs = tuple(_describe(s, n, v, src, ctx, req) for n, v, src in entries
                            if wanted is None or n in wanted)
            error, message = ErrorCode.none, None
        except KafkaError as e:
            configs, error, message = (), e.code, e.message
        results.append(make(s.DescribeConfigsResult, error_code=error, error_message=message,
                            resource_type=res.resource_type, resource_name=res.resource_name,
                            configs=configs))
    return make(s.DescribeConfigsResponse, throttle_time=ZERO, results=tuple(results))


def _entries(ctx: BrokerContext, res) -> list[tuple[str, str, int]]:
    if res.resource_type == TOPIC:
        meta = ctx.replicas.topic(res.resource_name)
        if meta is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic {res.resource_name} does not exist")
        return topic_entries(ctx, meta.configs)
    if res.resource_type == BROKER:
        _check_broker(ctx, res.resource_name)
        cfg = ctx.config
        static = {"broker.id": str(cfg.broker_id), "auto.create.topics.enable": str(cfg.auto_create_topics).lower(),
                  "socket.request.max.bytes": str(cfg.socket_request_max_bytes)}
        static.update({f"log.{k}" if not k.startswith("log.") else k: v for k, v in cfg.topic_defaults.items()})
        return [(n, v, STATIC_BROKER_CONFIG) for n, v in sorted(static.items())]
    raise KafkaError(ErrorCode.invalid_request, f"unsupported resource type {res.resource_type}")


def topic_entries(ctx: BrokerContext, overrides) -> list[tuple[str, str, int]]:
    """(name, value, source) of every topic config, as Kafka describes them."""
    defaults = ctx.config.topic_defaults
    out = []
    for name, key in sorted(TOPIC_CONFIGS.items()):
        if name in overrides:
            out.append((name, overrides[name], DYNAMIC_TOPIC_CONFIG))
        elif name in defaults:
            out.append((name, defaults[name], STATIC_BROKER_CONFIG))
        else:
            out.append((name, key.default, DEFAULT_CONFIG))
    return out


def _synonyms(ctx: BrokerContext, name: str, value: str, source: int) -> list[tuple[str, str, int]]:
    """The chain Kafka reports: the topic's own value, the broker's static value, the default."""
    chain = [(name, value, source)] if source == DYNAMIC_TOPIC_CONFIG else []
    default = _DEFAULT_SYNONYMS.get(name)
    if name in ctx.config.topic_defaults:
        static_name = _STATIC_NAMES.get(name) or (default[0] if default else name)
        chain.append((static_name, ctx.config.topic_defaults[name], STATIC_BROKER_CONFIG))
    if default is not None:
        chain.append((default[0], default[1], DEFAULT_CONFIG))
    return chain


def _check_broker(ctx: BrokerContext, name: str) -> None:
    if name not in ("", str(ctx.config.broker_id)):
        raise KafkaError(ErrorCode.invalid_request,
                         f"Unexpected broker id, expected {ctx.config.broker_id} or empty string, but received {name}")


def _describe(s, name, value, source, ctx, req):
    default = TOPIC_CONFIGS[name].default if name in TOPIC_CONFIGS else value
    synonyms = ()
    if getattr(req, "include_synonyms", False) and name in TOPIC_CONFIGS:
        synonyms = tuple(make(s.DescribeConfigsSynonym, name=n, value=v, source=src)
                         for n, v, src in _synonyms(ctx, name, value, source))
    return make(s.DescribeConfigsResourceResult, name=name, value=value, read_only=source != DYNAMIC_TOPIC_CONFIG
                and source != DEFAULT_CONFIG, config_source=source, is_sensitive=False, synonyms=synonyms,
                config_type=_config_type(name, default),
                documentation=TOPIC_CONFIGS[name].doc if name in TOPIC_CONFIGS else None)


async def incremental_alter_configs(ctx: BrokerContext, header, req):
    s = Schemas(44, header.api_version)
    responses = []
    for res in req.resources:
        try:
            await _alter(ctx, res, req.validate_only)
            error, message = ErrorCode.none, None
        except KafkaError as e:
            error, message = e.code, e.message
        responses.append(make(s.AlterConfigsResourceResponse, error_code=error, error_message=message,
                              resource_type=res.resource_type, resource_name=res.resource_name))
    return make(s.IncrementalAlterConfigsResponse, throttle_time=ZERO, responses=tuple(responses))


async def _alter(ctx: BrokerContext, res, validate_only: bool) -> None:
    if res.resource_type == BROKER:
        _check_broker(ctx, res.resource_name)
        raise KafkaError(ErrorCode.invalid_request, "dynamic broker configs are not supported; "
                                                    "set them in the broker's configuration")
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
        elif c.config_operation in (APPEND, SUBTRACT) and c.name in _LIST_KEYS:
            items = [x for x in current.get(c.name, TOPIC_CONFIGS[c.name].default).split(",") if x]
            value = [x for x in (c.value or "").split(",") if x]
            items = items + [v for v in value if v not in items] if c.config_operation == APPEND \
                else [x for x in items if x not in value]
            changes[c.name] = ",".join(items)
        else:
            raise KafkaError(ErrorCode.invalid_config,
                             f"operation {c.config_operation} is not valid for config {c.name}")
    await ctx.controller.call("PATCH", f"/internal/v1/topics/{res.resource_name}/configs",
                                 {"set": changes, "delete": deletes, "validate_only": validate_only})
