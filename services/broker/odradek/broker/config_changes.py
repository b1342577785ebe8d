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
are ``odradek.broker.zk.configs``'; the notification's format is ``odradek.cluster.zk_data``'s.
"""

from __future__ import annotations

import logging
from typing import Callable

from odradek.broker.zk.znodes import NoZooKeeper, Znodes
from odradek.cluster.zk_data import CONFIG_CHANGE

log = logging.getLogger(__name__)

Handler = Callable[[str | None], None]   # entity name, or None: (re)load every entity of the type
_seq = CONFIG_CHANGE.sequence


class ConfigChangeListener:
    def __init__(self, znodes: Znodes) -> None:
        self._znodes = znodes
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
        znodes = self._znodes
        znodes.ensure(CONFIG_CHANGE.root)
        self._seen = max((_seq(c) for c in znodes.children(CONFIG_CHANGE.root)), default=-1)
        self._started = True
        for entity_type, handlers in self._handlers.items():
            for handler in handlers:
                self._call(handler, entity_type, None)
        znodes.watch_children(CONFIG_CHANGE.root, self._on_changes)

    @staticmethod
    def _call(handler: Handler, entity_type: str, entity: str | None) -> None:
        try:
            handler(entity)
        except Exception:  # noqa: BLE001 - one handler's bug must not stop the others' notifications
            log.exception("config change handler for %s/%s failed", entity_type, entity)

    def _on_changes(self, children: list[str]) -> None:
        try:
            self._follow(children)
        except NoZooKeeper:   # the session is closing
            return

    def _follow(self, children: list[str]) -> None:
        znodes = self._znodes
        for child in sorted(children, key=_seq):
            seq = _seq(child)
            if seq <= self._seen:
                continue
            self._seen = seq
            found = znodes.get(f"{CONFIG_CHANGE.root}/{child}")
            if found is None:
                continue
            try:
                entity_type, entity = CONFIG_CHANGE.decode(found[0])
            except (ValueError, KeyError) as e:
                log.warning("ignoring unreadable config change %s: %s", child, e)
                continue
            for handler in self._handlers.get(entity_type, ()):
                self._call(handler, entity_type, entity)
        znodes.purge_expired(CONFIG_CHANGE.root, children)
