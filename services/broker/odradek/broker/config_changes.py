"""Dynamic configs' change notifications, as Kafka's ZooKeeper mode has them (ZkConfigManager).

An entity's config lives in ``/config/<entity type>/<entity>`` (``/config/brokers/<default>``,
``/config/brokers/1``, ``/config/users/alice``, ``/config/users/alice/clients/app``,
``/config/clients/<default>``...), each znode ``{"version":1,"config":{key: value}}``. Whoever
changes one writes the znode, then a persistent sequential notification
``/config/changes/config_change_<seq>`` holding ``{"version":2,"entity_path":"<type>/<entity>"}``
(version 1, ``{"entity_type":..,"entity_name":..}``, is read too).

Every broker runs one ``ConfigChangeListener``: a part interested in an entity type registers a
handler for it (``register("brokers", on_change)``); at start-up each handler is called once
with ``None`` (load everything), then with the entity's name (``"<default>"``,
``"alice/clients/app"``) for each notification, in sequence order. Handlers run on kazoo's
thread: they re-read the znode and hand the result to whoever owns it. Notifications older
than 15 minutes are removed, as Kafka does. The writer's side, and the reading of one entity,
are ``odradek.cluster.entity_config``'s.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Iterable, Mapping

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.recipe.watchers import ChildrenWatch

from odradek.cluster import paths
from odradek.cluster.entity_config import parse_notification

log = logging.getLogger(__name__)

CHANGE_EXPIRY_S = 15 * 60
Handler = Callable[[str | None], None]   # entity name, or None: (re)load every entity of the type


def _seq(child: str) -> int:
    prefix = paths.CONFIG_CHANGE_PREFIX
    return int(child[len(prefix):]) if child.startswith(prefix) and child[len(prefix):].isdigit() else -1


class ConfigChangeListener:
    def __init__(self, zk: Callable[[], KazooClient | None]) -> None:
        self._zk = zk
        self._handlers: dict[str, list[Handler]] = {}
        self._seen = -1
        self._started = False

    def register(self, entity_type: str, handler: Handler) -> None:
        """Call ``handler`` for changes of ``entity_type`` ("brokers", "users", "clients"...);
        registered after ``start``, it is called at once with None."""
        self._handlers.setdefault(entity_type, []).append(handler)
        if self._started:
            self._call(handler, entity_type, None)

    def start(self) -> None:
        """Load every registered type, then follow the notifications (once the session is up)."""
        zk = self._zk()
        zk.ensure_path(paths.CONFIG_CHANGES)
        self._seen = max((_seq(c) for c in zk.get_children(paths.CONFIG_CHANGES)), default=-1)
        self._started = True
        for entity_type, handlers in self._handlers.items():
            for handler in handlers:
                self._call(handler, entity_type, None)
        ChildrenWatch(zk, paths.CONFIG_CHANGES, self._on_changes)

    @staticmethod
    def _call(handler: Handler, entity_type: str, entity: str | None) -> None:
        try:
            handler(entity)
        except Exception:  # noqa: BLE001 - one handler's bug must not stop the others' notifications
            log.exception("config change handler for %s/%s failed", entity_type, entity)

    def _on_changes(self, children: list[str]) -> None:
        zk = self._zk()
        if zk is None:
            return
        for child in sorted(children, key=_seq):
            seq = _seq(child)
            if seq <= self._seen:
                continue
            self._seen = seq
            try:
                data, _ = zk.get(f"{paths.CONFIG_CHANGES}/{child}")
                entity_type, entity = parse_notification(data)
            except NoNodeError:
                continue
            except (ValueError, KeyError) as e:
                log.warning("ignoring unreadable config change %s: %s", child, e)
                continue
            for handler in self._handlers.get(entity_type, ()):
                self._call(handler, entity_type, entity)
        purge_expired(zk, paths.CONFIG_CHANGES, children)


def purge_expired(zk: KazooClient, path: str, children: Iterable[str], expiry_s: float = CHANGE_EXPIRY_S) -> None:
    """Remove the notifications under ``path`` older than ``expiry_s`` (Kafka: 15 minutes)."""
    cutoff = (time.time() - expiry_s) * 1000
    for child in children:
        try:
            if zk.exists(f"{path}/{child}").ctime < cutoff:
                zk.delete(f"{path}/{child}")
        except (NoNodeError, AttributeError):
            continue
