"""The client quotas ZooKeeper holds, read in one walk, and their reload into the parts that
enforce them.

Kafka's ZooKeeper layout (``zk_data.QUOTA_ENTITY``): ``/config/users/<user>``,
``/config/users/<user>/clients/<client-id>``, ``/config/clients/<client-id>`` and
``/config/ips/<ip>`` (``<default>`` the default entity, names sanitized). ``QuotaStore.read``
walks that tree once into a ``QuotaSnapshot`` (every entity with a quota key set, values typed
by the registry ``odradek.config.quotas``); the client quota manager, the connection rates and
DescribeClientQuotas all take what they need from it. ``reload`` (at start, on a users /
clients / ips change notification, and after this broker's own AlterClientQuotas) reads it
and installs it; ``alter`` writes one entity (``EntityConfigs.alter``: compare-and-set and the
change notification). Reads and writes block: ``reload`` runs them in a thread.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Callable, Mapping

from odradek.broker.zk.configs import EntityConfigs
from odradek.cluster.zk_data import CLIENT_ID, CLIENTS, ENTITY_CONFIG, IP, IPS, QUOTA_ENTITY, USER, USERS, QuotaEntity
from odradek.config.quotas import IP_QUOTAS, USER_CLIENT_QUOTAS
from odradek.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class QuotaSnapshot:
    """Every quota entity with at least one quota key, and its values."""
    entries: tuple[tuple[QuotaEntity, Mapping[str, float]], ...] = ()

    def of_types(self, *types: str) -> list[tuple[dict[str, str | None], Mapping[str, float]]]:
        """The entries whose entity names exactly these types, as {type: name or None}."""
        wanted = set(types)
        return [(dict(entity), values) for entity, values in self.entries if {t for t, _ in entity} == wanted]


class QuotaStore:
    def __init__(self, configs: EntityConfigs | None,
                 installers: tuple[Callable[[QuotaSnapshot], None], ...] = ()) -> None:
        self._configs = configs   # None: a test without ZooKeeper
        self._installers = installers
        self._reloads: set[asyncio.Task] = set()

    def read(self) -> QuotaSnapshot:
        """The one walk of the quota tree (blocking)."""
        configs = self._configs
        if configs is None:
            return QuotaSnapshot()
        name = ENTITY_CONFIG.desanitize
        found: list[QuotaEntity] = []
        for user in configs.entities(USERS):
            found.append(((USER, name(user)),))
            found.extend(((USER, name(user)), (CLIENT_ID, name(client)))
                         for client in configs.entities(f"{USERS}/{user}/clients"))
        found.extend(((CLIENT_ID, name(client)),) for client in configs.entities(CLIENTS))
        found.extend(((IP, name(ip)),) for ip in configs.entities(IPS))
        entries = tuple((entity, values) for entity in found if (values := self._values(entity)))
        return QuotaSnapshot(entries)

    def _values(self, entity: QuotaEntity) -> dict[str, float]:
        path = QUOTA_ENTITY.entity_path(entity)
        config, _ = self._configs.read(*path.split("/", 1))
        keys = IP_QUOTAS if entity[0][0] == IP else USER_CLIENT_QUOTAS
        values = {}
        for key in keys:
            if key in config:
                try:
                    values[key] = float(config[key])
                except ValueError:
                    log.warning("ignoring quota %s=%r of %s: not a number", key, config[key], path)
        return values

    def alter(self, entity_path: str, change: Callable[[dict[str, str]], Mapping[str, str]]) -> None:
        """Write one entity's quotas (``<type>/<entity>``; blocking)."""
        if self._configs is None:
            raise KafkaError(ErrorCode.unknown_server_error, "not connected to ZooKeeper")
        self._configs.alter(*entity_path.split("/", 1), change)

    async def reload(self) -> None:
        """Read the quotas and install them in every part that enforces them."""
        snapshot = await asyncio.to_thread(self.read)
        for install in self._installers:
            install(snapshot)

    def reload_soon(self) -> asyncio.Task:
        """``reload`` as a task of the running loop, held until done (the loop keeps only weak references)."""
        task = asyncio.get_running_loop().create_task(self.reload())
        self._reloads.add(task)
        task.add_done_callback(self._reloads.discard)
        return task
