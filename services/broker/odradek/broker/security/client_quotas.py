"""DescribeClientQuotas (API 48, v0-1): the quota settings Kafka's ZooKeeper mode keeps in
``/config/users/<user>``, ``/config/users/<user>/clients/<client-id>``,
``/config/clients/<client-id>`` and ``/config/ips/<ip>`` (``<default>`` names the default
entity), read from the same znodes as the SCRAM credentials.

Odradek does not enforce quotas and has no AlterClientQuotas; this answers what is stored, so
that Kafka's tools that read quotas work (``kafka-configs --describe --entity-type users`` asks
for a user's quotas before its SCRAM credentials). Filters are Kafka's: per component EXACT (0),
DEFAULT (1) or ANY (2) of an entity type; ``strict`` keeps only entities with exactly the
requested types. Kafka requires DESCRIBE_CONFIGS on the cluster.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from typing import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from odradek.broker.security.authorizer import CLUSTER_DENIED
from odradek.errors import ErrorCode
from odradek.protocol.codec import Schemas, make

DESCRIBE_CLIENT_QUOTAS = 48
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate",
              "connection_creation_rate")
DEFAULT = "<default>"
EXACT, MATCH_DEFAULT, ANY = 0, 1, 2
ZERO = datetime.timedelta(0)
Entity = tuple[tuple[str, str | None], ...]   # ((entity_type, name or None for the default), ...)


class ClientQuotas:
    def __init__(self, zk: Callable[[], KazooClient | None]) -> None:
        self._zk = zk
        # the authorizer's verdict on DESCRIBE_CONFIGS of the cluster (set by the broker)
        self.describe_configs_allowed: Callable[[], bool] = lambda: True

    def _quotas(self, zk: KazooClient, path: str) -> dict[str, float]:
        try:
            data, _ = zk.get(path)
            config = json.loads(data or b"{}").get("config", {})
        except (NoNodeError, ValueError):
            return {}
        return {k: float(v) for k, v in config.items() if k in QUOTA_KEYS}

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

        def name(n: str) -> str | None:
            return None if n == DEFAULT else n
        found: list[tuple[Entity, dict[str, float]]] = []
        for user in self._children(zk, "/config/users"):
            found.append(((("user", name(user)),), self._quotas(zk, f"/config/users/{user}")))
            for client in self._children(zk, f"/config/users/{user}/clients"):
                found.append(((("user", name(user)), ("client-id", name(client))),
                              self._quotas(zk, f"/config/users/{user}/clients/{client}")))
        for kind, root in (("client-id", "/config/clients"), ("ip", "/config/ips")):
            for n in self._children(zk, root):
                found.append((((kind, name(n)),), self._quotas(zk, f"{root}/{n}")))
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

    async def describe(self, header, request) -> object:
        s = Schemas(DESCRIBE_CLIENT_QUOTAS, header.api_version)
        if not self.describe_configs_allowed():
            return make(s.DescribeClientQuotasResponse, throttle_time=ZERO,
                        error_code=ErrorCode.cluster_authorization_failed, error_message=CLUSTER_DENIED, entries=None)
        if any(c.match_type not in (EXACT, MATCH_DEFAULT, ANY) for c in request.components):
            return make(s.DescribeClientQuotasResponse, throttle_time=ZERO, error_code=ErrorCode.invalid_request,
                        error_message="Unexpected match type", entries=None)
        stored = await asyncio.to_thread(self.stored)
        entries = tuple(
            make(s.EntryData, entity=tuple(make(s.EntityData, entity_type=t, entity_name=n) for t, n in entity),
                 values=tuple(make(s.ValueData, key=k, value=v) for k, v in sorted(values.items())))
            for entity, values in stored if self.matches(entity, request.components, request.strict))
        return make(s.DescribeClientQuotasResponse, throttle_time=ZERO, error_code=ErrorCode.none,
                    error_message=None, entries=entries)

    def table(self) -> dict:
        return {DESCRIBE_CLIENT_QUOTAS: (0, 1, self.describe)}
