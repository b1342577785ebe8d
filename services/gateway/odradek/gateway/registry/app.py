"""The registry's start in the gateway's lifespan: its ``_schemas`` log on the gateway's own
Kafka principal, read to its end before the gateway serves (every schema written before a
restart is there at the first request)."""

from __future__ import annotations

import logging

from confluent_kafka import KafkaException

from odradek.gateway.errors import GatewayError
from odradek.gateway.registry.log import LogSettings, SchemasLog
from odradek.gateway.registry.service import Registry
from odradek.gateway.settings import GatewaySettings

log = logging.getLogger("odradek.gateway.registry")


async def start(settings: GatewaySettings) -> Registry | None:
    """The registry, or None when its topic cannot be had (e.g. the gateway's principal may not
    create or read it): the gateway then serves without it and says why in its log and in the
    registry's answers (``routes``), rather than not serving at all."""
    schemas = SchemasLog(LogSettings(settings.bootstrap_servers, settings.client_config(), settings.base_url,
                                     settings.schema_registry_topic, settings.schema_registry_group))
    try:
        await schemas.start()
        await schemas.caught_up()
    except (KafkaException, GatewayError) as e:
        log.error("schema registry not started: %s", e)
        await schemas.close()
        return None
    return Registry(schemas)
