"""The registry's start in the gateway's lifespan: its ``_schemas`` log on the gateway's own
Kafka principal, read to its end before the registry answers (every schema written before a
restart is there at its first request). It starts in the background: the REST proxy serves at
once, even while Kafka is unreachable; a registry request meanwhile waits for the start
(``wait_started``, at most ``START_WAIT_S``)."""

from __future__ import annotations

import asyncio
import logging

from confluent_kafka import KafkaException

from odradek.gateway.errors import GatewayError
from odradek.gateway.registry.kafka_rights import KafkaRights
from odradek.gateway.registry.log import LogSettings, SchemasLog
from odradek.gateway.registry.service import Registry
from odradek.gateway.settings import GatewaySettings

log = logging.getLogger("odradek.gateway.registry")
START_WAIT_S = 60.0


def schemas_log(settings: GatewaySettings) -> SchemasLog:
    return SchemasLog(LogSettings(settings.bootstrap_servers, settings.client_config(), settings.registry_url,
                                  settings.schema_registry_topic, settings.schema_registry_group))


async def start(schemas: SchemasLog) -> Registry | None:
    """The registry, or None when its topic cannot be had (e.g. the gateway's principal may not
    create or read it): the gateway then serves without it and says why in its log and in the
    registry's answers (``routes``), rather than not serving at all."""
    try:
        await schemas.start()
        await schemas.caught_up()
    except (KafkaException, GatewayError) as e:
        log.error("schema registry not started: %s", e)
        await schemas.close()
        return None
    return Registry(schemas)


def start_in_background(app, settings: GatewaySettings) -> None:
    """``app.state.registry`` set once started (None until then, and if it cannot start)."""
    async def run() -> None:
        app.state.registry = await start(app.state.registry_log)

    app.state.registry = None
    app.state.registry_rights = KafkaRights()   # mapped principals' operations, as their brokers say (access)
    app.state.registry_log = schemas_log(settings) if settings.schema_registry else None
    app.state.registry_start = asyncio.create_task(run()) if settings.schema_registry else None


async def wait_started(app) -> None:
    task = getattr(app.state, "registry_start", None)
    if task is not None and not task.done():
        try:
            await asyncio.wait_for(asyncio.shield(task), START_WAIT_S)
        except asyncio.TimeoutError:
            pass   # the route answers 50001: the registry is not running (yet)


async def stop(app) -> None:
    """Stops a started registry, and a start still waiting for Kafka (its log's close ends the wait)."""
    task = getattr(app.state, "registry_start", None)
    if task is not None and not task.done():
        task.cancel()
    schemas = getattr(app.state, "registry_log", None)
    if schemas is not None and (app.state.registry is not None or task is not None and not task.done()):
        await schemas.close()
