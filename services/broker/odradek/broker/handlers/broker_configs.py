"""The BROKER and BROKER_LOGGER config resources of DescribeConfigs, AlterConfigs (legacy) and
IncrementalAlterConfigs, as Kafka's ZooKeeper mode answers them.

BROKER: the resource name is this broker's id (its own dynamic config) or "" (the cluster-wide
default); values and sources come from the broker's layers (``odradek.config.describe``),
changes go through ``DynamicBrokerConfig`` (ZooKeeper, then applied here before answering).
BROKER_LOGGER: this broker's loggers (``odradek.broker.loggers``), changed live only.
"""

from __future__ import annotations

from typing import Callable

from odradek.broker import loggers
from odradek.broker.context import BrokerContext
from odradek.cluster.paths import DEFAULT_ENTITY
from odradek.config.describe import ConfigSource, Described, describe_broker
from odradek.config.dynamic import DYNAMIC_TOPIC_DEFAULTS, validate_dynamic
from odradek.config.keys import ConfigKey, ConfigType
from odradek.config.security import TEXT
from odradek.errors import ErrorCode, KafkaError

BROKER, BROKER_LOGGER = 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_LOGGER_KEY = ConfigKey("logger", TEXT, "", "a logger's level")


def check_broker(ctx: BrokerContext, name: str, allow_default: bool = True) -> None:
    if name == "" and allow_default:
        return
    if name != str(ctx.config.broker_id):
        expected = f"{ctx.config.broker_id} or empty string" if allow_default else str(ctx.config.broker_id)
        raise KafkaError(ErrorCode.invalid_request,
                         f"Unexpected broker id, expected {expected}, but received {name}")


def describe(ctx: BrokerContext, resource_type: int, name: str) -> list[Described]:
    if resource_type == BROKER_LOGGER:
        check_broker(ctx, name, allow_default=False)
        return [Described(n, level, ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, _LOGGER_KEY)
                for n, level in loggers.loggers().items()]
    check_broker(ctx, name)
    return describe_broker(ctx.dynamic.layers, per_broker=name != "")


def _entity(name: str) -> str:
    return DEFAULT_ENTITY if name == "" else name


async def alter_incremental(ctx: BrokerContext, res, validate_only: bool) -> None:
    if res.resource_type == BROKER_LOGGER:
        return _alter_loggers(ctx, res, validate_only)
    check_broker(ctx, res.resource_name)
    changes = {c.name: (c.config_operation, c.value) for c in res.configs}
    _validate(changes, res.resource_name, ErrorCode.invalid_config)
    if not validate_only:
        await ctx.dynamic.alter(_entity(res.resource_name), _incremental(changes))


async def alter_legacy(ctx: BrokerContext, res, validate_only: bool) -> None:
    """AlterConfigs: the resource's dynamic config becomes exactly the given one."""
    check_broker(ctx, res.resource_name)
    wanted = {c.name: c.value for c in res.configs}
    _validate({n: (SET, v) for n, v in wanted.items()}, res.resource_name, ErrorCode.invalid_request)
    if not validate_only:
        await ctx.dynamic.alter(_entity(res.resource_name), lambda _: wanted)


def _validate(changes: dict[str, tuple[int, str | None]], entity: str, code: ErrorCode) -> None:
    for name, (op, _) in changes.items():
        if op in (APPEND, SUBTRACT) and not _is_list(name):
            raise KafkaError(ErrorCode.invalid_config, f"Config value append is not allowed for config key: {name}")
    try:
        validate_dynamic({n: v if op == SET else None for n, (op, v) in changes.items()}, entity)
    except KafkaError as e:
        raise KafkaError(code, e.message) from None


def _is_list(name: str) -> bool:
    key = DYNAMIC_TOPIC_DEFAULTS.get(name)
    return key is not None and key.type.code == ConfigType.LIST


def _incremental(changes: dict[str, tuple[int, str | None]]) -> Callable[[dict[str, str]], dict[str, str]]:
    def apply(config: dict[str, str]) -> dict[str, str]:
        for name, (op, value) in changes.items():
            if op == SET:
                config[name] = value or ""
            elif op == DELETE:
                config.pop(name, None)
            else:
                items = [x for x in config.get(name, DYNAMIC_TOPIC_DEFAULTS[name].default).split(",") if x]
                given = [x for x in (value or "").split(",") if x]
                items = items + [v for v in given if v not in items] if op == APPEND \
                    else [x for x in items if x not in given]
                config[name] = ",".join(items)
        return config
    return apply


def _alter_loggers(ctx: BrokerContext, res, validate_only: bool) -> None:
    check_broker(ctx, res.resource_name, allow_default=False)
    for c in res.configs:  # all checked before any is applied, as Kafka
        if c.config_operation == SET:
            loggers.check_set(c.name, c.value)
        elif c.config_operation == DELETE:
            loggers.check_delete(c.name)
        else:
            op = "APPEND" if c.config_operation == APPEND else "SUBTRACT"
            raise KafkaError(ErrorCode.invalid_request,
                             f"{op} operation is not allowed for the BROKER_LOGGER resource")
    if validate_only:
        return
    for c in res.configs:
        if c.config_operation == SET:
            loggers.set_level(c.name, c.value)
        else:
            loggers.unset_level(c.name)
