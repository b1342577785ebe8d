"""A broker process: Kafka listener, internal control-plane API, ZooKeeper registration,
log maintenance. ``Broker.run`` owns their lifetimes in one asyncio loop (uvloop if present).
"""

from __future__ import annotations

import asyncio
import json
import logging

from aiohttp import web

from odradek.broker.config import BrokerConfig
from odradek.broker.controller_client import ControllerClient
from odradek.broker.dispatch import Dispatcher
from odradek.broker.handlers import table
from odradek.broker.partitions import ReplicaManager
from odradek.broker.storage import LogManager
from odradek.broker.zk import BrokerRegistration
from odradek.cluster.model import BrokerInfo, ClusterMetadata
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.connection import KafkaConnection

log = logging.getLogger(__name__)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.logs = LogManager(config.data_dir, config.topic_defaults)
        self.replicas = ReplicaManager(config.broker_id, self.logs)
        self.registration: BrokerRegistration | None = None
        self.controller = ControllerClient(lambda: self.registration.controller_url if self.registration else None)
        self.dispatcher = Dispatcher(table(self))
        self.kafka_port = config.port
        self.internal_port = config.internal_port

    @property
    def cluster_id(self) -> str | None:
        return self.replicas.metadata.cluster_id if self.replicas.metadata else None

    async def run(self, stop: asyncio.Event) -> None:
        cfg = self.config
        self.logs.open_all()
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: KafkaConnection(self.dispatcher, max_frame_bytes=cfg.socket_request_max_bytes),
            cfg.host, cfg.port, reuse_address=True, backlog=1024)
        self.kafka_port = server.sockets[0].getsockname()[1]
        runner = web.AppRunner(self._internal_app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, cfg.internal_host, cfg.internal_port)
        await site.start()
        self.internal_port = site._server.sockets[0].getsockname()[1]
        info = BrokerInfo(cfg.broker_id, cfg.advertised_host or cfg.host, cfg.advertised_port or self.kafka_port,
                          f"http://{cfg.internal_host}:{self.internal_port}", cfg.rack)
        self.registration = BrokerRegistration(cfg.zookeeper, cfg.cluster, info)
        await asyncio.to_thread(self.registration.start)
        log.info("broker %d serving Kafka on %s:%d, internal API on %s", cfg.broker_id, cfg.host,
                 self.kafka_port, info.internal_url)
        maintenance = asyncio.create_task(self.logs.run(stop))
        try:
            await stop.wait()
        finally:
            log.info("broker %d shutting down", cfg.broker_id)
            await asyncio.to_thread(self.registration.stop)
            server.close()
            await maintenance
            await runner.cleanup()
            await self.controller.close()
            self.logs.close()

    # -- /internal/v1 ----------------------------------------------------------------------
    def _internal_app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/internal/v1/metadata", self._on_metadata)
        app.router.add_get("/internal/v1/status", self._on_status)
        return app

    async def _on_metadata(self, request: web.Request) -> web.Response:
        try:
            snapshot = ClusterMetadata.from_json(await request.json())
        except (ValueError, KeyError, TypeError) as e:
            error = KafkaError(ErrorCode.invalid_request, f"bad metadata snapshot: {e}")
            return web.json_response(error.to_json(), status=400)
        try:
            self.replicas.apply(snapshot)
        except KafkaError as e:
            return web.json_response(e.to_json(), status=409)
        return web.json_response({"accepted": True})

    async def _on_status(self, request: web.Request) -> web.Response:
        partitions = [{"topic": lg.topic, "partition": lg.partition, "log_start_offset": lg.log_start_offset,
                       "log_end_offset": lg.log_end_offset, "high_watermark": lg.high_watermark}
                      for lg in self.logs.logs()]
        meta = self.replicas.metadata
        return web.Response(text=json.dumps({
            "broker_id": self.config.broker_id, "kafka_port": self.kafka_port,
            "controller_epoch": meta.controller_epoch if meta else None, "partitions": partitions}),
            content_type="application/json")
