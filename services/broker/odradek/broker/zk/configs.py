"""``EntityConfigs``: Kafka's ZooKeeper-mode entity configs, the port every config reader and
writer of the broker uses (AdminZkClient's side): ``/config/<entity type>/<entity>`` read, and
changed by one read-modify-write by compare-and-set on the znode version (a concurrent writer,
e.g. a SCRAM credential beside the quotas of the same user, is never overwritten), followed by
the ``/config/changes`` notification the brokers follow. Blocking: run it off the event loop.
What the znodes hold is ``odradek.cluster.zk_data``'s.
"""

from __future__ import annotations

from typing import Callable, Mapping

from odradek.broker.zk.znodes import Znodes
from odradek.cluster.zk_data import CONFIG_CHANGE, ENTITY_CONFIG


class EntityConfigs:
    def __init__(self, znodes: Znodes) -> None:
        self.znodes = znodes

    def read(self, entity_type: str, entity: str) -> tuple[dict[str, str], int]:
        """An entity's config and its znode version (({}, -1): no znode)."""
        found = self.znodes.get(ENTITY_CONFIG.path(entity_type, entity))
        if found is None:
            return {}, -1
        return ENTITY_CONFIG.decode(found[0], f"{entity_type}/{entity}"), found[1]

    def entities(self, path: str) -> list[str]:
        """The (sanitized) entity names under ``<type>`` or ``<type>/<entity>/clients``."""
        return self.znodes.children(f"/config/{path}")

    def alter(self, entity_type: str, entity: str,
              change: Callable[[dict[str, str]], Mapping[str, str]]) -> dict[str, str]:
        """Read-modify-write of an entity's znode (retried on a concurrent change), then the change
        notification, as Kafka's AdminZkClient.changeConfigs; returns the config written."""
        path = ENTITY_CONFIG.path(entity_type, entity)
        while True:
            before, version = self.read(entity_type, entity)
            after = dict(change(dict(before)))
            if self.znodes.put(path, ENTITY_CONFIG.encode(after), version):
                break
        self.znodes.append(CONFIG_CHANGE.prefix, CONFIG_CHANGE.encode(entity_type, entity))
        return after
