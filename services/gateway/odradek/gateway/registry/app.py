"""The registry's start in the gateway's lifespan: its ``_schemas`` log on the gateway's own
Kafka principal, read to its end before the gateway serves (every schema written before a
restart is there at the first request)."""

from __future__ import annotations

from odradek.gateway.registry.log import LogSettings, SchemasLog
from odradek.gateway.registry.service import Registry
from odradek.gateway.settings import GatewaySettings


async def start(settings: GatewaySettings) -> Registry:
    log = SchemasLog(LogSettings(settings.bootstrap_servers, settings.client_config(), settings.base_url,
                                 settings.schema_registry_topic, settings.schema_registry_group))
    await log.start()
    await log.caught_up()
    return Registry(log)
