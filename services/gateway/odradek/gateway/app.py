"""The gateway's FastAPI application: routers, errors, auth, metrics, health and lifespan."""

from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from odradek.gateway import admin, consumers, errors, metrics, topics
from odradek.gateway.auth import Tokens
from odradek.gateway.kafka import KafkaBridge
from odradek.gateway.settings import GatewaySettings

log = logging.getLogger("odradek.gateway")


def create_app(settings: GatewaySettings) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.kafka = KafkaBridge(settings.bootstrap_servers, settings.max_record_bytes,
                                      settings.produce_timeout_ms)
        app.state.consumers = consumers.ConsumerInstances(app)
        await app.state.consumers.start()
        log.info("gateway %s serving %s for cluster %s", settings.replica_id, settings.base_url,
                 settings.bootstrap_servers)
        try:
            yield
        finally:  # graceful: close consumers (leave groups, commit nothing unasked), flush produces
            await app.state.consumers.close()
            await app.state.kafka.close()
            log.info("gateway %s stopped", settings.replica_id)

    app = FastAPI(title="Odradek gateway", version="1", lifespan=lifespan,
                  description="Confluent REST Proxy v2 compatible produce/consume, v3 topic admin, "
                              "and group-less range reads (JSON or Arrow) for Spark.")
    app.state.settings = settings
    app.state.tokens = Tokens(settings.auth_file) if settings.auth_file else None
    errors.install(app)
    app.middleware("http")(metrics.middleware)
    app.add_middleware(_BodyLimit, limit=settings.max_request_bytes)
    app.include_router(topics.router)
    app.include_router(consumers.router)
    app.include_router(admin.router)
    app.add_api_route("/metrics", metrics.endpoint, include_in_schema=False)
    app.add_api_route("/healthz", _healthz, methods=["GET"])
    app.add_api_route("/readyz", _readyz, methods=["GET"])
    app.add_api_route("/", _root, methods=["GET"], include_in_schema=False)
    return app


class _BodyLimit:
    """413 at once for a Content-Length above ``limit`` (chunked bodies are counted while read:
    ``topics.read_body``)."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        length = dict(scope.get("headers", ())).get(b"content-length", b"")
        if scope["type"] == "http" and length.isdigit() and int(length) > self.limit:
            response = JSONResponse(errors.body(413, errors.too_large_message(int(length), self.limit)), 413)
            return await response(scope, receive, send)
        await self.app(scope, receive, send)


async def _healthz() -> dict:
    return {"status": "ok"}


async def _readyz(request: Request) -> JSONResponse:
    try:
        md = await asyncio.wait_for(request.app.state.kafka.metadata(fresh=True), 15)
    except Exception as e:  # noqa: BLE001 - any failure means not ready; said in the body
        return JSONResponse({"status": "unavailable", "reason": str(e)}, status_code=503)
    return JSONResponse({"status": "ready", "cluster_id": md.cluster_id, "brokers": len(md.brokers)})


async def _root() -> dict:
    return {}
