"""Client quota admin APIs over Kafka's ZooKeeper-mode layout: DescribeClientQuotas (v0-1) and
AlterClientQuotas (v0-1).

Quotas live where Kafka's ZooKeeper mode keeps them (``zk_data.QUOTA_ENTITY``, read and written
by the quota store, ``odradek.broker.quotas.store``), beside the users' SCRAM credentials. As
Kafka's ZooKeeper-mode brokers do (ZkAdminManager), the broker that receives AlterClientQuotas
writes the znode itself and a ``/config/changes`` notification; every broker then applies the new
quotas (docs/quotas.md); this one reloads before answering, so that the quota is in force here
when the client hears back.

Filters are Kafka's: per component EXACT (0), DEFAULT (1) or ANY (2) of an entity type;
``strict`` keeps only entities with exactly the requested types. Describing requires
DESCRIBE_CONFIGS on the cluster, altering ALTER_CONFIGS (CLUSTER_AUTHORIZATION_FAILED else);
an invalid entity or key is INVALID_REQUEST with Kafka's message, per entry. Keys and their
types are the registry's (``odradek.config.quotas``).
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import socket

from odradek.broker.context import BrokerContext
from odradek.broker.security.acl import Operation, ResourceType
from odradek.broker.security.authorizer import CLUSTER_DENIED, allowed
from odradek.cluster.zk_data import CLIENT_ID, DEFAULT, ENTITY_CONFIG, IP, QUOTA_ENTITY, USER, QuotaEntity
from odradek.config import ConfigKey, ConfigType
from odradek.config.quotas import IP_QUOTAS, USER_CLIENT_QUOTAS
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make

EXACT, MATCH_DEFAULT, ANY = 0, 1, 2
ENTITY_TYPES = (USER, CLIENT_ID, IP)
ZERO = datetime.timedelta(0)


def matches(entity: QuotaEntity, components, strict: bool) -> bool:
    names = dict(entity)
    for c in components:
        if c.entity_type not in names:
            return False
        n = names[c.entity_type]
        if (c.match_type == EXACT and n != c.match) or (c.match_type == MATCH_DEFAULT and n is not None):
            return False
    return not strict or set(names) == {c.entity_type for c in components}


def filter_error(components) -> tuple[ErrorCode, str] | None:
    """Kafka's checks of a DescribeClientQuotas filter (ZkAdminManager.describeClientQuotas)."""
    seen = set()
    for c in components:
        if c.match_type not in (EXACT, MATCH_DEFAULT, ANY):
            return ErrorCode.invalid_request, "Unexpected match type"
        if c.entity_type == "":
            return ErrorCode.invalid_request, "Unexpected empty filter component entity type"
        if c.entity_type not in ENTITY_TYPES:
            return ErrorCode.unsupported_version, f"Custom entity type '{c.entity_type}' not supported"
        if c.entity_type in seen:
            word = {USER: "user", CLIENT_ID: "client", IP: "ip"}[c.entity_type]
            return ErrorCode.invalid_request, f"Duplicate {word} filter component entity type"
        seen.add(c.entity_type)
    if IP in seen and len(seen) > 1:
        return (ErrorCode.invalid_request, "Invalid entity filter component combination, IP filter component "
                "should not be used with user or clientId filter component.")
    return None


async def describe_client_quotas(ctx: BrokerContext, header, request) -> object:
    s = Schemas(ApiKey.DESCRIBE_CLIENT_QUOTAS, header.api_version)
    if not allowed(ctx, Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER):
        return make(s.DescribeClientQuotasResponse, throttle_time=ZERO,
                    error_code=ErrorCode.cluster_authorization_failed, error_message=CLUSTER_DENIED, entries=None)
    problem = filter_error(request.components)
    if problem is not None:
        return make(s.DescribeClientQuotasResponse, throttle_time=ZERO, error_code=problem[0],
                    error_message=problem[1], entries=None)
    stored = await asyncio.to_thread(ctx.quota_store.read)
    entries = tuple(
        make(s.EntryData, entity=tuple(make(s.EntityData, entity_type=t, entity_name=n) for t, n in entity),
             values=tuple(make(s.ValueData, key=k, value=v) for k, v in sorted(values.items())))
        for entity, values in stored.entries if matches(entity, request.components, request.strict))
    return make(s.DescribeClientQuotasResponse, throttle_time=ZERO, error_code=ErrorCode.none,
                error_message=None, entries=entries)


async def alter_client_quotas(ctx: BrokerContext, header, request) -> object:
    s = Schemas(ApiKey.ALTER_CLIENT_QUOTAS, header.api_version)
    permitted = allowed(ctx, Operation.ALTER_CONFIGS, ResourceType.CLUSTER)
    results, changed = [], False
    for entry in request.entries:
        if not permitted:
            code, message = ErrorCode.cluster_authorization_failed, CLUSTER_DENIED
        else:
            try:
                changed |= await asyncio.to_thread(_alter_entry, ctx, entry, request.validate_only)
                code, message = ErrorCode.none, None
            except KafkaError as e:
                code, message = e.code, e.message
        results.append(make(s.EntryData, error_code=code, error_message=message, entity=tuple(
            make(s.EntityData, entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity)))
    if changed:
        await ctx.quota_store.reload()
    return make(s.AlterClientQuotasResponse, throttle_time=ZERO, entries=tuple(results))


def _alter_entry(ctx: BrokerContext, entry, validate_only: bool) -> bool:
    """Validate one entry as Kafka does and write it (unless ``validate_only``); True if written."""
    path, keys = entity_of(entry.entity)
    sets = {op.key: _typed(op.key, op.value, keys) for op in entry.ops if not op.remove}
    removes = [op.key for op in entry.ops if op.remove]
    if validate_only:
        return False

    def change(config: dict[str, str]) -> dict[str, str]:
        for key in removes:
            config.pop(key, None)
        return {**config, **sets}
    ctx.quota_store.alter(path, change)
    return True


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_request, message)


def entity_of(components) -> tuple[str, dict[str, ConfigKey]]:
    """An AlterClientQuotas entity -> (its entity path, the keys it takes), or INVALID_REQUEST
    with Kafka's message (ZkAdminManager.parseAndSanitizeQuotaEntity / alterClientQuotas)."""
    if not components:
        raise _invalid("Invalid empty client quota entity")
    names: dict[str, str | None] = {}
    for c in components:
        if c.entity_type not in ENTITY_TYPES:
            raise _invalid(f"Unhandled client quota entity type: {c.entity_type}")
        if c.entity_name is not None and c.entity_name == "":
            raise _invalid(f"Empty {c.entity_type} not supported")
        names[c.entity_type] = c.entity_name
    path = QUOTA_ENTITY.entity_path(tuple(names.items()))
    if IP in names:
        if USER in names or CLIENT_ID in names:
            raise _invalid("Invalid quota entity combination, IP entity should not be used with user/client ID entity.")
        if not _valid_ip_entity(ENTITY_CONFIG.sanitize(names[IP])):
            raise _invalid(f"{names[IP]} is not a valid IP or resolvable host.")
        return path, IP_QUOTAS
    return path, USER_CLIENT_QUOTAS


def _valid_ip_entity(sanitized: str) -> bool:
    if sanitized == DEFAULT:
        return True
    host = ENTITY_CONFIG.desanitize(sanitized)
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(host, None)
        return True
    except (OSError, UnicodeError):
        return False


def _typed(key: str, value: float, keys: dict[str, ConfigKey]) -> str:
    """The string Kafka stores for a quota value: integral for LONG / INT keys."""
    if key not in keys:
        raise _invalid(f"Invalid configuration key {key}")
    kind = keys[key].type.code
    if kind == ConfigType.DOUBLE:
        return repr(float(value))
    whole = int(value + 1e-6)
    if abs(whole - value) > 1e-6:
        raise _invalid(f"Configuration {key} must be a {kind.name} value")
    return str(whole)
