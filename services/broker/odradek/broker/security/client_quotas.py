"""Client quota admin APIs over Kafka's ZooKeeper-mode layout: DescribeClientQuotas (API 48,
v0-1) and AlterClientQuotas (API 49, v0-1).

Quotas live where Kafka's ZooKeeper mode keeps them (``odradek.cluster.entity_config``):
``/config/users/<user>``, ``/config/users/<user>/clients/<client-id>``,
``/config/clients/<client-id>`` and ``/config/ips/<ip>`` (``<default>`` names the default
entity, names sanitized as Kafka's ``Sanitizer``), beside the users' SCRAM credentials. As
Kafka's ZooKeeper-mode brokers do (ZkAdminManager), the broker that receives AlterClientQuotas
writes the znode itself and a ``/config/changes/config_change_<seq>`` notification; every broker
then applies the new quotas (``odradek.broker.quotas``; docs/quotas.md).

Filters are Kafka's: per component EXACT (0), DEFAULT (1) or ANY (2) of an entity type;
``strict`` keeps only entities with exactly the requested types. Describing requires
DESCRIBE_CONFIGS on the cluster, altering ALTER_CONFIGS (CLUSTER_AUTHORIZATION_FAILED else);
an invalid entity or key is INVALID_REQUEST with Kafka's message, per entry.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import socket
from typing import Awaitable, Callable

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from odradek.broker.security.acl import Operation
from odradek.broker.security.authorizer import CLUSTER_DENIED
from odradek.cluster import entity_config as ec
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.codec import Schemas, make

DESCRIBE_CLIENT_QUOTAS = 48
ALTER_CLIENT_QUOTAS = 49
# Kafka's user / client-id quota keys and their types (QuotaConfigs), and the ip one
USER_CLIENT_KEYS = {"producer_byte_rate": "LONG", "consumer_byte_rate": "LONG", "request_percentage": "DOUBLE",
                    "controller_mutation_rate": "DOUBLE"}
IP_KEYS = {"connection_creation_rate": "INT"}
QUOTA_KEYS = (*USER_CLIENT_KEYS, *IP_KEYS)
DEFAULT = ec.DEFAULT
EXACT, MATCH_DEFAULT, ANY = 0, 1, 2
ENTITY_TYPES = ("user", "client-id", "ip")
ZERO = datetime.timedelta(0)
Entity = tuple[tuple[str, str | None], ...]   # ((entity_type, name or None for the default), ...)


class ClientQuotas:
    def __init__(self, zk: Callable[[], KazooClient | None]) -> None:
        self._zk = zk
        # the authorizer's verdict on an operation on the cluster (set by the broker)
        self.cluster_allowed: Callable[[Operation], bool] = lambda op: True
        # told the entity paths an AlterClientQuotas changed (the broker re-reads its quotas; the
        # answer waits for the reload it returns, so the quota is in force on this broker when
        # the client hears back)
        self.changed: Callable[[list[str]], Awaitable[None] | None] = lambda paths: None

    def _quotas(self, zk: KazooClient, path: str, keys) -> dict[str, float]:
        config, _ = ec.read_entity_config(zk, *path.split("/", 1))
        out = {}
        for k, v in config.items():
            if k in keys:
                try:
                    out[k] = float(v)
                except ValueError:
                    continue
        return out

    def _children(self, zk: KazooClient, path: str) -> list[str]:
        try:
            return sorted(zk.get_children(path))
        except NoNodeError:
            return []

    def stored(self) -> list[tuple[Entity, dict[str, float]]]:
        """Every entity with quotas, as Kafka's ZooKeeper layout holds them."""
        zk = self._zk()
        if zk is None:
            return []
        name = ec.desanitize
        found: list[tuple[Entity, dict[str, float]]] = []
        for user in self._children(zk, f"/config/{ec.USERS}"):
            found.append(((("user", name(user)),), self._quotas(zk, f"{ec.USERS}/{user}", USER_CLIENT_KEYS)))
            for client in self._children(zk, f"/config/{ec.USERS}/{user}/clients"):
                found.append(((("user", name(user)), ("client-id", name(client))),
                              self._quotas(zk, f"{ec.USERS}/{user}/clients/{client}", USER_CLIENT_KEYS)))
        for n in self._children(zk, f"/config/{ec.CLIENTS}"):
            found.append(((("client-id", name(n)),), self._quotas(zk, f"{ec.CLIENTS}/{n}", USER_CLIENT_KEYS)))
        for n in self._children(zk, f"/config/{ec.IPS}"):
            found.append(((("ip", name(n)),), self._quotas(zk, f"{ec.IPS}/{n}", IP_KEYS)))
        return [(entity, values) for entity, values in found if values]

    @staticmethod
    def matches(entity: Entity, components, strict: bool) -> bool:
        names = dict(entity)
        for c in components:
            if c.entity_type not in names:
                return False
            n = names[c.entity_type]
            if (c.match_type == EXACT and n != c.match) or (c.match_type == MATCH_DEFAULT and n is not None):
                return False
        return not strict or set(names) == {c.entity_type for c in components}

    @staticmethod
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
                word = {"user": "user", "client-id": "client", "ip": "ip"}[c.entity_type]
                return ErrorCode.invalid_request, f"Duplicate {word} filter component entity type"
            seen.add(c.entity_type)
        if "ip" in seen and len(seen) > 1:
            return (ErrorCode.invalid_request, "Invalid entity filter component combination, IP filter component "
                    "should not be used with user or clientId filter component.")
        return None

    async def describe(self, header, request) -> object:
        s = Schemas(DESCRIBE_CLIENT_QUOTAS, header.api_version)
        if not self.cluster_allowed(Operation.DESCRIBE_CONFIGS):
            return make(s.DescribeClientQuotasResponse, throttle_time=ZERO,
                        error_code=ErrorCode.cluster_authorization_failed, error_message=CLUSTER_DENIED, entries=None)
        problem = self.filter_error(request.components)
        if problem is not None:
            return make(s.DescribeClientQuotasResponse, throttle_time=ZERO, error_code=problem[0],
                        error_message=problem[1], entries=None)
        stored = await asyncio.to_thread(self.stored)
        entries = tuple(
            make(s.EntryData, entity=tuple(make(s.EntityData, entity_type=t, entity_name=n) for t, n in entity),
                 values=tuple(make(s.ValueData, key=k, value=v) for k, v in sorted(values.items())))
            for entity, values in stored if self.matches(entity, request.components, request.strict))
        return make(s.DescribeClientQuotasResponse, throttle_time=ZERO, error_code=ErrorCode.none,
                    error_message=None, entries=entries)

    # -- AlterClientQuotas -------------------------------------------------------------------
    async def alter(self, header, request) -> object:
        s = Schemas(ALTER_CLIENT_QUOTAS, header.api_version)
        allowed = self.cluster_allowed(Operation.ALTER_CONFIGS)
        results, changed = [], []
        for entry in request.entries:
            if not allowed:
                code, message = ErrorCode.cluster_authorization_failed, CLUSTER_DENIED
            else:
                try:
                    path = await asyncio.to_thread(self._alter_entry, entry, request.validate_only)
                    code, message = ErrorCode.none, None
                    if path is not None:
                        changed.append(path)
                except KafkaError as e:
                    code, message = e.code, e.message
            results.append(make(s.EntryData, error_code=code, error_message=message, entity=tuple(
                make(s.EntityData, entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity)))
        if changed and (reloading := self.changed(changed)) is not None:
            await reloading
        return make(s.AlterClientQuotasResponse, throttle_time=ZERO, entries=tuple(results))

    def _alter_entry(self, entry, validate_only: bool) -> str | None:
        """Validate one entry as Kafka does and write it (unless ``validate_only``); the entity
        path written, or None."""
        path, keys = entity_of(entry.entity)
        sets = {op.key: _typed(op.key, op.value, keys) for op in entry.ops if not op.remove}
        removes = [op.key for op in entry.ops if op.remove]
        if validate_only:
            return None
        zk = self._zk()
        if zk is None:
            raise KafkaError(ErrorCode.unknown_server_error, "not connected to ZooKeeper")

        def change(config: dict[str, str]) -> dict[str, str]:
            for key in removes:
                config.pop(key, None)
            return {**config, **sets}
        ec.write_entity_config(zk, *path.split("/", 1), change)
        return path

    def table(self) -> dict:
        return {DESCRIBE_CLIENT_QUOTAS: (0, 1, self.describe), ALTER_CLIENT_QUOTAS: (0, 1, self.alter)}


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_request, message)


def entity_of(components) -> tuple[str, dict[str, str]]:
    """An AlterClientQuotas entity -> (its entity path, the keys it takes), or INVALID_REQUEST
    with Kafka's message (ZkAdminManager.parseAndSanitizeQuotaEntity / alterClientQuotas)."""
    if not components:
        raise _invalid("Invalid empty client quota entity")
    names: dict[str, str] = {}
    for c in components:
        if c.entity_type not in ENTITY_TYPES:
            raise _invalid(f"Unhandled client quota entity type: {c.entity_type}")
        if c.entity_name is not None and c.entity_name == "":
            raise _invalid(f"Empty {c.entity_type} not supported")
        names[c.entity_type] = ec.sanitize(c.entity_name)
    user, client, ip = names.get("user"), names.get("client-id"), names.get("ip")
    if ip is not None:
        if user is not None or client is not None:
            raise _invalid("Invalid quota entity combination, IP entity should not be used with user/client ID entity.")
        if not _valid_ip_entity(ip):
            raise _invalid(f"{ec.desanitize(ip)} is not a valid IP or resolvable host.")
        return f"{ec.IPS}/{ip}", IP_KEYS
    if user is not None:
        return f"{ec.USERS}/{user}" + (f"/clients/{client}" if client is not None else ""), USER_CLIENT_KEYS
    return f"{ec.CLIENTS}/{client}", USER_CLIENT_KEYS


def _valid_ip_entity(sanitized: str) -> bool:
    if sanitized == DEFAULT:
        return True
    host = ec.desanitize(sanitized)
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


def _typed(key: str, value: float, keys: dict[str, str]) -> str:
    """The string Kafka stores for a quota value: integral for LONG / INT keys."""
    kind = keys.get(key)
    if kind is None:
        raise _invalid(f"Invalid configuration key {key}")
    if kind == "DOUBLE":
        return repr(float(value))
    whole = int(value + 1e-6)
    if abs(whole - value) > 1e-6:
        raise _invalid(f"Configuration {key} must be a {kind} value")
    return str(whole)
