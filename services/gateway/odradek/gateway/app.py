"""The gateway's FastAPI application: lifespan (Kafka clients per principal, consumer-instance registry,
the schema registry's store), middleware (metrics, body limit), the routes of ``routes`` and of
``registry.routes``, and the one place domain errors become HTTP answers (``edge``'s handlers,
registered here)."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from odradek.gateway import edge, metrics, routes
from odradek.gateway.auth import RequireToken, Tokens
from odradek.gateway.broker_metrics import BrokerMetrics
from odradek.gateway.errors import GatewayError
from odradek.gateway.instances import ConsumerInstances
from odradek.gateway.principals import KafkaClients, ReleaseLeases
from odradek.gateway.registry import app as registry_app
from odradek.gateway.registry import routes as registry_routes
from odradek.gateway.settings import GatewaySettings

log = logging.getLogger("odradek.gateway")


def create_app(settings: GatewaySettings) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.clients = KafkaClients(settings)
        app.state.kafka = app.state.clients.own    # the gateway's own principal (readiness, metrics)
        app.state.consumers = ConsumerInstances(settings)
        await app.state.clients.start()
        await app.state.consumers.start()
        registry_app.start_in_background(app, settings)
        log.info("gateway %s serving %s for cluster %s (%s)", settings.replica_id, settings.base_url,
                 settings.bootstrap_servers, settings.kafka_security_protocol)
        try:
            yield
        finally:  # graceful: close consumers (leave groups, commit nothing unasked), flush produces
            await app.state.consumers.close()
            await registry_app.stop(app)
            await app.state.clients.close()
            log.info("gateway %s stopped", settings.replica_id)

    app = FastAPI(title="Odradek gateway", version="1", lifespan=lifespan,
                  description="Confluent REST Proxy v2 compatible produce/consume, v3 topic admin, "
                              "group-less range reads (JSON or Arrow) for Spark, and a Confluent-compatible "
                              "schema registry.")
    app.state.settings = settings
    app.state.broker_metrics = BrokerMetrics(settings.broker_metrics_urls)
    app.state.tokens = Tokens(settings.auth_file, settings.kafka_security_protocol) if settings.auth_file else None
    # every error answers {"error_code", "message"}: domain errors through edge's one table
    app.add_exception_handler(GatewayError, edge.domain_error)
    app.add_exception_handler(StarletteHTTPException, edge.http_error)
    app.add_exception_handler(RequestValidationError, edge.invalid_request)
    app.add_exception_handler(Exception, edge.unexpected)
    app.middleware("http")(metrics.middleware)
    app.add_middleware(edge.BodyLimit, limit=settings.max_request_bytes)
    app.add_middleware(ReleaseLeases)
    if settings.require_auth:   # outermost: nothing else runs for a request without a token
        app.add_middleware(RequireToken)
    routes.install(app)
    registry_routes.install(app)
    return app
