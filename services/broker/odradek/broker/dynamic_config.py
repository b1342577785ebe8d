"""This broker's dynamic configs (Kafka's DynamicBrokerConfig, ZooKeeper mode).

``/config/brokers/<default>`` (the cluster-wide default) and ``/config/brokers/<id>`` hold
``{"version":1,"config":{...}}`` under Kafka broker names; a change writes the znode and a
``/config/changes`` notification (``config_changes``), on which every broker re-reads the
entity. ``DynamicBrokerConfig`` keeps the layers now in force (``odradek.config.dynamic``) and
applies them live: the broker-wide topic defaults to every log (retention, segment size...) and
the connection limits to the listener. What a broker started with is its static layer; the
dynamic ones are read again at start-up, so a change survives a restart.

The broker that receives the change applies it at once, before answering, so that a client
reads its own write from it; the others follow the notification (milliseconds). Layers are
replaced whole on the event loop; ZooKeeper is read in worker threads or kazoo's.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Mapping

from odradek.broker.config import BrokerConfig
from odradek.broker.config_changes import ConfigChangeListener
from odradek.broker.zk.configs import EntityConfigs
from odradek.cluster.zk_data import BROKERS, DEFAULT as DEFAULT_ENTITY
from odradek.config.dynamic import BrokerLayers
from odradek.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)


class DynamicBrokerConfig:
    def __init__(self, config: BrokerConfig, configs: EntityConfigs | None) -> None:
        self._config = config
        self._configs = configs   # None: a test without ZooKeeper
        self.layers = BrokerLayers(config.broker_id, {**config.given_settings, **config.group_settings},
                                   dict(config.topic_defaults))
        self._appliers: list[Callable[[BrokerLayers], None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def own_entity(self) -> str:
        return str(self._config.broker_id)

    def on_apply(self, applier: Callable[[BrokerLayers], None]) -> None:
        """Call ``applier`` with the new layers after each change (on the event loop)."""
        self._appliers.append(applier)

    def listen(self, changes: ConfigChangeListener, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        changes.register(BROKERS, self._on_change)

    def _on_change(self, entity: str | None) -> None:
        """A notification (kazoo's thread): read the entity again, install it on the loop."""
        if self._configs is None or self._loop is None:
            return
        wanted = (DEFAULT_ENTITY, self.own_entity) if entity is None else (entity,)
        for name in wanted:
            if name in (DEFAULT_ENTITY, self.own_entity):
                config, _ = self._configs.read(BROKERS, name)
                self._loop.call_soon_threadsafe(self._install, name, config)

    def _install(self, entity: str, config: Mapping[str, str]) -> None:
        if entity == DEFAULT_ENTITY:
            layers = self.layers.with_dynamic(default=config)
        else:
            layers = self.layers.with_dynamic(broker=config)
        if layers == self.layers:
            return
        self.layers = layers
        log.info("dynamic broker config %s: %s", entity, dict(config) or "none")
        for applier in self._appliers:
            applier(layers)

    async def alter(self, entity: str, change: Callable[[dict[str, str]], Mapping[str, str]]) -> None:
        """Change the entity's znode (``change`` maps its config to the new one), notify every
        broker, and apply it here before returning."""
        if self._configs is None:
            raise KafkaError(ErrorCode.unknown_server_error, "not connected to ZooKeeper")
        written = await asyncio.to_thread(self._configs.alter, BROKERS, entity, change)
        self._install(entity, written)

    def current(self, entity: str) -> dict[str, str]:
        """The entity's dynamic config as this broker holds it."""
        return dict(self.layers.dynamic_default if entity == DEFAULT_ENTITY else self.layers.dynamic_broker)
