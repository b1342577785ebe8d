"""A broker process: Kafka listener, internal control-plane API, ZooKeeper registration,
log maintenance, replication. ``Broker.run`` owns their lifetimes in one asyncio loop
(uvloop if present). Clients are accepted once the controller's first metadata snapshot is
applied (``_metadata_arrived``), not at registration. The parts request handlers use
(ReplicaManager, controller client, group coordinator, producer-id manager) are built once
here, as the ``BrokerContext``.

Stopping (SIGTERM) is a **controlled shutdown**, as Kafka's: the broker asks the controller
to move its leaderships away (``control_plane.CONTROLLED_SHUTDOWN``),
retrying up to ``controlled.shutdown.max.retries`` times, ``controlled.shutdown.retry.backoff.ms``
apart, while some remain, and keeps serving meanwhile (clients get NOT_LEADER_OR_FOLLOWER,
refresh metadata and retry on the new leaders); then it stops fetching, deregisters, stops
serving and closes its logs. With the controller unreachable the attempts fail and the broker
shuts down anyway, as Kafka's "unclean" shutdown (leaderships not moved): it still flushes its
logs and writes the clean-shutdown marker, and deregistering from an unreachable ZooKeeper is
bounded (``zk.session.STOP_TIMEOUT_S``), so SIGTERM ends the process within about
retries x max(backoff, ``CONTROLLED_SHUTDOWN_TIMEOUT_S``).

When the data directory goes offline (a write failed with an OSError: a full disk, EIO; see
storage.failure) the broker answers KAFKA_STORAGE_ERROR for its partitions and, its only log
directory being offline, shuts down as Kafka does: it writes a log directory event for the
controller (``/log_dir_event_notification``: the controller moves leadership and ISR
membership away from it), stops fetching, deregisters and exits with ``exit_code`` 1 without
writing checkpoints or the clean-shutdown marker, so the next start runs recovery.
"""

from __future__ import annotations

import asyncio
import logging
import time

from aiohttp import web

from odradek import metrics_http
from odradek.ports import report as report_ports
from odradek.broker.config import BrokerConfig
from odradek.broker.config_changes import ConfigChangeListener
from odradek.broker.context import BrokerContext
from odradek.broker.controller_client import ControllerClient
from odradek.broker.dispatch import Dispatcher
from odradek.broker.handlers import table
from odradek.broker.metrics.collector import BrokerCollector
from odradek.broker.metrics.remote import RemoteCollector
from odradek.broker.txn.metrics import TxnCollector
from odradek.broker.metrics.stats import RequestStats, TopicStats
from odradek.broker.partitions import ReplicaManager
from odradek.broker.quotas import connections
from odradek.broker.quotas.manager import ClientQuotaManager
from odradek.broker.quotas.metrics import QuotaCollector
from odradek.broker.quotas.replication import ReplicationQuotas
from odradek.broker.quotas.store import QuotaStore
from odradek.broker.security.authorizer import authorizer_of
from odradek.broker.security.broker_security import BrokerSecurity
from odradek.broker.security.scram_store import ScramStore
from odradek.broker.storage import LogManager, remote_log_manager
from odradek.broker.zk.configs import EntityConfigs
from odradek.broker.zk.session import BrokerSession
from odradek.cluster import control_plane as cp
from odradek.cluster.control_plane_http import serve, server_app
from odradek.cluster.control_plane_tls import scheme
from odradek.cluster.zk_data import CLIENTS, IPS, USERS
from odradek.cluster.model import BrokerInfo, ClusterMetadata
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.listener import KafkaListener

log = logging.getLogger(__name__)
_METADATA_WAIT_LOG_S = 10.0  # how often a broker still without metadata says so

CONTROLLED_SHUTDOWN_TIMEOUT_S = 5.0  # one attempt: the controller's answer (it retries a standby's NOT_CONTROLLER)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.logs = LogManager(config.data_dir, config.topic_defaults, cleaner_priority=config.cleaner_priority)
        self.control_plane_tls = config.control_plane_tls()
        self.zookeeper_security = config.zookeeper_security()
        self.session = BrokerSession(config.zookeeper, config.cluster, config.zookeeper_timeouts,
                                     self.zookeeper_security)   # started (registered) in run
        configs = EntityConfigs(self.session.znodes)
        self.security = BrokerSecurity(config, ScramStore(configs))
        self.controller = ControllerClient(lambda: self.session.controller_url, self.control_plane_tls,
                                           config.protocol_version)
        topic_stats = TopicStats()
        self.replicas = ReplicaManager(config.broker_id, self.logs, controller_call=self.controller.call,
                                       broker_epoch=lambda: self.session.broker_epoch,
                                       replica_lag_time_max_ms=config.replica_lag_time_max_ms,
                                       inter_broker=self.security.client, topic_deleted=topic_stats.forget,
                                       quotas=ReplicationQuotas(config.broker_id, config.replication_quota_window_num,
                                                                config.replication_quota_window_size_seconds))
        self.replicas.topic_stats = topic_stats
        self.remote_logs = remote_log_manager.for_broker(config, self.replicas, topic_stats)  # tiered storage, if enabled
        self.replicas.remote_reader = self.remote_logs.reader if self.remote_logs is not None else None
        quotas = ClientQuotaManager(config.quota_window_num, config.quota_window_size_seconds)
        self.connection_rates = connections.ConnectionRates(config.quota_window_num, config.quota_window_size_seconds)
        self.context = BrokerContext.create(
            config, self.replicas, self.controller, authorizer=authorizer_of(config, self.session.znodes),
            configs=configs, scram=self.security.store, quotas=quotas,
            quota_store=QuotaStore(configs, (quotas.install, self.connection_rates.install)), topic_stats=topic_stats)
        self.config_changes = ConfigChangeListener(self.session.znodes)
        self.dispatcher = Dispatcher(table(self.context), quotas=quotas, advertised=self.security.exchange_versions())
        self.kafka_port = config.port
        self.internal_port = config.internal_port
        self.metrics_port: int | None = None  # bound once serving, when metrics.port >= 0
        self.requests = RequestStats()
        self.listeners: KafkaListener | None = None
        self.exit_code = 0
        self.state = cp.STARTING  # Kafka's BrokerState, as the readiness route reports it

    async def run(self, stop: asyncio.Event) -> None:
        cfg = self.config
        try:
            self.logs.open_all()
        except OSError as e:  # a full disk at start-up: say so and exit non-zero (dev start reports it)
            log.error("broker %d cannot start: opening the log directory %s failed: %s", cfg.broker_id,
                      cfg.data_dir, e)
            self.exit_code = 1
            return
        loop = asyncio.get_running_loop()
        self.logs.failures.subscribe(lambda _cause: loop.call_soon_threadsafe(self._log_dir_failed, stop))
        listeners, endpoints = self._listen()
        runner, (_, self.internal_port) = await serve(self._internal_app(), cfg.internal_host, cfg.internal_port,
                                                      self.control_plane_tls, f"broker {cfg.broker_id} internal API")
        metrics = await self._serve_metrics()
        report_ports(kafka=self.kafka_port, internal=self.internal_port, metrics=self.metrics_port)
        info = BrokerInfo(cfg.broker_id, endpoints[0][1], endpoints[0][2],
                          f"{scheme(self.control_plane_tls)}://{cfg.internal_advertised_host or cfg.internal_host}:"
                          f"{cfg.internal_advertised_port or self.internal_port}", cfg.rack,
                          endpoints=tuple(endpoints) if cfg.listeners else ())
        await asyncio.to_thread(self.session.start, info)
        await self.context.quota_store.reload()
        if self.context.authorizer is not None:  # until loaded, only super users get through
            await asyncio.to_thread(self.context.authorizer.start)
        self._follow_dynamic_configs(loop)
        self._follow_quotas(loop)
        await asyncio.to_thread(self.config_changes.start)
        maintenance = asyncio.create_task(self.logs.run(stop))
        isr_checks = asyncio.create_task(self.replicas.run(stop))
        remote_logs = asyncio.create_task(self.remote_logs.run(stop)) if self.remote_logs is not None else None
        clean = False
        try:
            if await self._metadata_arrived(stop):
                listeners.start()
                self.state = cp.RUNNING
                log.info("broker %d serving Kafka on %s, internal API on %s", cfg.broker_id,
                         ", ".join(f"{name}://{host}:{port}" for name, host, port in endpoints), info.internal_url)
            await stop.wait()
            clean = True
        finally:
            log.info("broker %d shutting down", cfg.broker_id)
            stopping = time.monotonic()
            offline = self.logs.failures.offline
            self.state = cp.PENDING_CONTROLLED_SHUTDOWN if clean and not offline else cp.SHUTTING_DOWN
            if offline:
                await asyncio.to_thread(self.session.report_log_dir_failure)
            elif clean:
                await self._controlled_shutdown()
            self.state = cp.SHUTTING_DOWN
            await self.replicas.close()
            self.context.close()
            await asyncio.to_thread(self.session.stop)
            await listeners.stop()
            await maintenance
            await isr_checks
            if remote_logs is not None:
                await remote_logs
                self.remote_logs.reader.close()   # remote reads still queued are dropped
            await runner.cleanup()
            if metrics is not None:
                await metrics.cleanup()
            await self.controller.close()
            closing = time.monotonic()
            if offline:
                self.logs.abandon()
            else:
                self.logs.close()
            log.info("broker %d shut down in %.2f s (%d logs closed in %.2f s)", cfg.broker_id,
                     time.monotonic() - stopping, len(self.logs.logs()), time.monotonic() - closing)

    async def _metadata_arrived(self, stop: asyncio.Event) -> bool:
        """Wait for the controller's first snapshot (pushed once we register) before accepting
        clients: until then Metadata would name no broker and no topic, and librdkafka, told so
        by a restarted broker, drops every broker it knows and re-bootstraps (its consumers then
        stalled for minutes in offset validation). Kafka's brokers likewise serve clients only
        with metadata (KRaft's once caught up). Connections wait in the listen backlog meanwhile.
        False if ``stop`` came first."""
        while self.replicas.metadata is None and not stop.is_set():
            waits = [asyncio.ensure_future(self.replicas.metadata_changed.wait()), asyncio.ensure_future(stop.wait())]
            done, pending = await asyncio.wait(waits, timeout=_METADATA_WAIT_LOG_S, return_when=asyncio.FIRST_COMPLETED)
            for waiting in pending:
                waiting.cancel()
            if not done:
                log.info("broker %d waiting for the controller's metadata before serving clients", self.config.broker_id)
        return not stop.is_set()

    def _follow_quotas(self, loop: asyncio.AbstractEventLoop) -> None:
        """Client quotas re-read on a users / clients / ips change notification (AlterClientQuotas on any
        broker, an OdradekUser's quotas through the controller); loaded once at start already."""
        def changed(entity: str | None) -> None:
            if entity is not None:
                loop.call_soon_threadsafe(self.context.quota_store.reload_soon)
        for entity_type in (USERS, CLIENTS, IPS):
            self.config_changes.register(entity_type, changed)

    def _follow_dynamic_configs(self, loop: asyncio.AbstractEventLoop) -> None:
        """Dynamic broker configs (``/config/brokers``) applied live: topic defaults to the logs,
        connection limits to the listener, replication throttle rates to the replica manager."""
        dynamic = self.context.dynamic

        def apply(layers) -> None:
            self.config.topic_defaults = layers.topic_defaults()
            self.logs.update_defaults(self.config.topic_defaults)
            self.replicas.defaults_changed()
            if self.listeners is not None:
                self.listeners.limits = self.config.listener_limits_with(layers.broker_value)
            self._configure_connection_rates(layers)
            self.replicas.quotas.update_rates(layers.broker_value)
        self.replicas.quotas.update_rates(dynamic.layers.broker_value)
        dynamic.on_apply(apply)
        dynamic.listen(self.config_changes, loop)

    def _configure_connection_rates(self, layers) -> None:
        """The connection creation rates in force: the broker's and each listener's (dynamic over static)."""
        inter_broker = self.security.inter_broker
        connections.configure(self.connection_rates, int(layers.broker_value(connections.LISTENER_KEY)),
                              [li.name for li in self.security.listeners], inter_broker.name if inter_broker else None,
                              {**self.config.listener_settings, **layers.dynamic_default, **layers.dynamic_broker})

    def _log_dir_failed(self, stop: asyncio.Event) -> None:
        log.error("Shutdown broker because all log dirs in %s have failed", self.config.data_dir)
        self.exit_code = 1
        stop.set()

    def _listen(self) -> tuple[KafkaListener, list[tuple[str, str, int]]]:
        """Every listener's socket, served by one ``KafkaListener`` (connection limits and request
        memory are broker-wide, as Kafka's); returns it and each listener's advertised (name, host,
        port). ``kafka_port`` is the first PLAINTEXT listener's port (else the first listener's)."""
        listeners = self.listeners = KafkaListener(self.config.listener_limits)
        self._configure_connection_rates(self.context.dynamic.layers)
        listeners.rates = self.connection_rates
        if self.config.metrics_port >= 0:  # request timing only when someone can read it
            listeners.observer = self.requests.on_request
        endpoints, ports = [], []
        for listener in self.security.listeners:
            factory = self.security.protocol_factory(listener, self.dispatcher, self.config.socket_request_max_bytes)
            port = listeners.listen(listener.host, listener.port, factory, self.security.ssl_for(listener),
                                    name=listener.name)
            ports.append(port)
            endpoints.append((listener.name, listener.advertised_host, listener.advertised_port or port))
        plaintext = [i for i, li in enumerate(self.security.listeners) if li.protocol == "PLAINTEXT"]
        self.kafka_port = ports[plaintext[0] if plaintext else 0]
        return listeners, endpoints   # started once the first metadata is applied (_metadata_arrived)

    async def _serve_metrics(self) -> web.AppRunner | None:
        """``/metrics`` on ``metrics.port`` (plain HTTP, the internal API's address), unless it is -1."""
        cfg = self.config
        if cfg.metrics_port < 0:
            return None
        collector = BrokerCollector(
            self.replicas, self.context.groups, self.context.topic_stats, self.requests,
            zk_state=lambda: self.session.state,
            connections=lambda: self.listeners.connection_counts() if self.listeners else {},
            auth_failures=lambda: dict(self.security.sasl.failures), partition_level=cfg.metrics_partition_level)
        txn = TxnCollector(self.context.txn.coordinator)
        quotas = QuotaCollector(self.context.quotas, self.connection_rates)
        remote = () if self.remote_logs is None else (RemoteCollector(
            self.replicas, self.remote_logs, self.context.topic_stats, partition_level=cfg.metrics_partition_level),)
        runner, self.metrics_port = await metrics_http.serve(metrics_http.registry(collector, txn, quotas, *remote),
                                                             cfg.internal_host, cfg.metrics_port)
        log.info("broker %d serving Prometheus metrics on %s", cfg.broker_id,
                 metrics_http.url(cfg.internal_host, self.metrics_port))
        return runner

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move our leaderships away; retry while some remain."""
        cfg = self.config
        for attempt in range(1, cfg.controlled_shutdown_max_retries + 1):
            started = time.monotonic()
            request = cp.controlled_shutdown(cfg.broker_id, cp.ControlledShutdown(self.session.broker_epoch))
            try:
                answer = await self.controller.call(request, timeout=CONTROLLED_SHUTDOWN_TIMEOUT_S)
                remaining = answer.remaining_leaderships
            except KafkaError as e:
                remaining = None
                log.warning("controlled shutdown attempt %d failed: %s", attempt, e.message)
            except (KeyError, TypeError, ValueError) as e:
                remaining = None
                log.warning("controlled shutdown attempt %d: unreadable answer: %s", attempt, e)
            if remaining is not None and not remaining:
                log.info("controlled shutdown done: no leaderships left here (%.2f s)", time.monotonic() - started)
                await self._wait_for_followership(CONTROLLED_SHUTDOWN_TIMEOUT_S)
                log.info("the snapshot making us a follower everywhere arrived %.2f s after asking",
                         time.monotonic() - started)
                return
            if remaining:
                log.info("controlled shutdown attempt %d: %d leaderships remain", attempt, len(remaining))
            if attempt < cfg.controlled_shutdown_max_retries:
                # counted from the attempt's start: the client's own retries within it waited already
                backoff = cfg.controlled_shutdown_retry_backoff_ms / 1000
                await asyncio.sleep(max(0.0, backoff - (time.monotonic() - started)))
        log.warning("controlled shutdown failed after %d attempts: proceeding to an unclean shutdown "
                    "(leaderships not moved; logs flushed and closed)", cfg.controlled_shutdown_max_retries)

    async def _wait_for_followership(self, timeout: float) -> None:
        """The controller's answer precedes its push: wait (briefly) until the snapshot that
        makes us a follower everywhere has arrived, so parked produces are answered with
        NOT_LEADER_OR_FOLLOWER rather than dropped with the connection."""
        deadline = time.monotonic() + timeout
        while self.replicas.leaderships(movable_only=True) and time.monotonic() < deadline:
            changed = self.replicas.metadata_changed
            try:
                await asyncio.wait_for(changed.wait(), deadline - time.monotonic())
            except asyncio.TimeoutError:
                log.warning("controlled shutdown: still leading %s after %.0f s",
                            self.replicas.leaderships(movable_only=True), timeout)
                break

    # -- the broker's side of the control plane ----------------------------------------------
    def _internal_app(self) -> web.Application:
        return server_app({cp.METADATA: self._on_metadata, cp.STATUS: self._on_status, cp.READY: self._on_ready},
                          client_max_size=64 * 1024 * 1024, version=self.config.protocol_version)

    async def _on_ready(self, request: web.Request) -> web.Response:
        """Readiness: serving and in every ISR it belongs to; a count kept on ISR changes, O(1)."""
        answer = cp.Readiness(self.config.broker_id, self.state, len(self.replicas.out_of_isr))
        return web.json_response(answer.to_json(), status=200 if answer.ready else 503)

    async def _on_metadata(self, request: web.Request) -> web.Response:
        try:
            snapshot = ClusterMetadata.from_json(await request.json())
        except (ValueError, KeyError, TypeError) as e:
            error = KafkaError(ErrorCode.invalid_request, f"bad metadata snapshot: {e}")
            return web.json_response(error.to_json(), status=400)
        try:
            self.replicas.apply(snapshot)
        except KafkaError as e:
            # 409 is the controller's "you are stale"; an offline log directory (this broker is
            # shutting down) is unavailability: the controller retries until we deregister
            status = 503 if e.code == ErrorCode.kafka_storage_error else 409
            return web.json_response(e.to_json(), status=status)
        return web.json_response(cp.Accepted().to_json())

    async def _on_status(self, request: web.Request) -> web.Response:
        roles = {p.key: p for p in self.replicas.partitions()}
        following = self.replicas.fetchers.following()
        partitions = []
        for lg in self.logs.logs():
            part = roles.get((lg.topic, lg.partition))
            partitions.append(cp.ReplicaStatus(
                lg.topic, lg.partition, lg.log_start_offset, lg.log_end_offset, lg.high_watermark,
                "leader" if part is not None and part.leading else "follower" if part is not None else None,
                part.leader_epoch if part is not None else None, tuple(part.isr) if part is not None else None,
                following.get((lg.topic, lg.partition)), tuple(tuple(e) for e in lg.leader_epochs.entries),
                lg.size))
        meta = self.replicas.metadata
        status = cp.BrokerStatus(self.config.broker_id, self.kafka_port,
                                 meta.controller_epoch if meta else None, tuple(partitions))
        return web.json_response(status.to_json())
