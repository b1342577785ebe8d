"""BrokerConfig: a broker's identity, listeners and storage, plus its settings from the config
registry (``odradek.config``): the broker's own keys as typed fields, the group coordinator's
keys and the broker-wide topic defaults as validated strings.

Every key's default, validator and Kafka synonyms are stated in the registry only; a field
bound with ``setting("key")`` takes them from there.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from odradek.cluster.control_plane_tls import ControlPlaneTls
from odradek.cluster.zk_session import ZkSecurity, ZkTimeouts
from odradek.config import setting, settings_of
from odradek.config.keys import connection_overrides
from odradek.protocol.listener import ListenerLimits


@dataclass
class BrokerConfig:
    broker_id: int
    data_dir: Path
    zookeeper: str                      # host:port[,host:port] without chroot
    cluster: str = "odradek"
    host: str = "127.0.0.1"             # Kafka listener bind address
    port: int = 9092
    advertised_host: str | None = None  # what Metadata tells clients; defaults to host
    advertised_port: int | None = None
    internal_host: str = "127.0.0.1"    # control-plane listener
    internal_port: int = 0
    internal_advertised_host: str | None = None  # what ZooKeeper tells the controller; defaults to internal_host
    internal_advertised_port: int | None = None
    rack: str | None = None
    listen_flag: bool = True            # host/port given by --listen: with ``listeners`` too, an extra PLAINTEXT listener
    auto_create_topics: bool = setting("auto.create.topics.enable")
    socket_request_max_bytes: int = setting("socket.request.max.bytes")
    socket_send_buffer_bytes: int = setting("socket.send.buffer.bytes")
    queued_max_request_bytes: int = setting("queued.max.request.bytes")
    max_connections: int = setting("max.connections")
    max_connections_per_ip: int = setting("max.connections.per.ip")
    max_connections_per_ip_overrides: str = setting("max.connections.per.ip.overrides")
    connections_max_idle_ms: int = setting("connections.max.idle.ms")
    replica_lag_time_max_ms: int = setting("replica.lag.time.max.ms")
    protocol_version: int = setting("inter.broker.protocol.version")
    max_incremental_fetch_session_cache_slots: int = setting("max.incremental.fetch.session.cache.slots")
    controlled_shutdown_max_retries: int = setting("controlled.shutdown.max.retries")
    controlled_shutdown_retry_backoff_ms: int = setting("controlled.shutdown.retry.backoff.ms")
    cleaner_priority: str = setting("log.cleaner.priority")
    listeners: str = setting("listeners")
    advertised_listeners: str = setting("advertised.listeners")
    listener_security_protocol_map: str = setting("listener.security.protocol.map")
    inter_broker_listener_name: str = setting("inter.broker.listener.name")
    sasl_enabled_mechanisms: str = setting("sasl.enabled.mechanisms")
    sasl_mechanism_inter_broker_protocol: str = setting("sasl.mechanism.inter.broker.protocol")
    connection_failed_authentication_delay_ms: int = setting("connection.failed.authentication.delay.ms")
    sasl_server_max_receive_size: int = setting("sasl.server.max.receive.size")
    connections_max_reauth_ms: int = setting("connections.max.reauth.ms")
    ssl_keystore_type: str = setting("ssl.keystore.type")
    ssl_keystore_location: str = setting("ssl.keystore.location")
    ssl_keystore_certificate_chain: str = setting("ssl.keystore.certificate.chain")
    ssl_keystore_key: str = setting("ssl.keystore.key")
    ssl_truststore_location: str = setting("ssl.truststore.location")
    ssl_client_auth: str = setting("ssl.client.auth")
    ssl_principal_mapping_rules: str = setting("ssl.principal.mapping.rules")
    ssl_endpoint_identification_algorithm: str = setting("ssl.endpoint.identification.algorithm")
    authorizer_class_name: str = setting("authorizer.class.name")
    super_users: str = setting("super.users")
    allow_everyone_if_no_acl_found: bool = setting("allow.everyone.if.no.acl.found")
    listener_settings: dict[str, str] = field(default_factory=dict)  # listener.name.<l>.* keys (SASL JAAS)
    quota_window_num: int = setting("quota.window.num")
    quota_window_size_seconds: int = setting("quota.window.size.seconds")
    replica_selector_class: str | None = setting("replica.selector.class")
    leader_replication_throttled_rate: int = setting("leader.replication.throttled.rate")
    follower_replication_throttled_rate: int = setting("follower.replication.throttled.rate")
    replica_alter_log_dirs_io_max_bytes_per_second: int = setting("replica.alter.log.dirs.io.max.bytes.per.second")
    replication_quota_window_num: int = setting("replication.quota.window.num")
    replication_quota_window_size_seconds: int = setting("replication.quota.window.size.seconds")
    metrics_port: int = setting("metrics.port")
    metrics_partition_level: bool = setting("metrics.partition.level.enabled")
    zookeeper_session_timeout_ms: int = setting("zookeeper.session.timeout.ms")
    zookeeper_connection_timeout_ms: int | None = setting("zookeeper.connection.timeout.ms")
    zookeeper_set_acl: bool = setting("zookeeper.set.acl")
    zookeeper_digest_credentials_file: str = setting("zookeeper.digest.credentials.file")
    zookeeper_ssl_client_enable: bool = setting("zookeeper.ssl.client.enable")
    zookeeper_ssl_keystore_type: str = setting("zookeeper.ssl.keystore.type")
    zookeeper_ssl_keystore_location: str = setting("zookeeper.ssl.keystore.location")
    zookeeper_ssl_truststore_type: str = setting("zookeeper.ssl.truststore.type")
    zookeeper_ssl_truststore_location: str = setting("zookeeper.ssl.truststore.location")
    zookeeper_ssl_endpoint_identification_algorithm: str = setting("zookeeper.ssl.endpoint.identification.algorithm")
    control_plane_ssl_keystore_location: str = setting("control.plane.ssl.keystore.location")
    control_plane_ssl_truststore_location: str = setting("control.plane.ssl.truststore.location")
    control_plane_ssl_endpoint_identification_algorithm: str = setting(
        "control.plane.ssl.endpoint.identification.algorithm")
    control_plane_ssl_peer_common_name_pattern: str = setting("control.plane.ssl.peer.common.name.pattern")
    remote_log_storage_system_enable: bool = setting("remote.log.storage.system.enable")  # odradek.config.tiered
    remote_log_manager_task_interval_ms: int = setting("remote.log.manager.task.interval.ms")
    remote_log_reader_threads: int = setting("remote.log.reader.threads")
    remote_log_reader_max_pending_tasks: int = setting("remote.log.reader.max.pending.tasks")
    remote_fetch_max_wait_ms: int = setting("remote.fetch.max.wait.ms")
    remote_log_index_file_cache_total_size_bytes: int = setting("remote.log.index.file.cache.total.size.bytes")
    rsm_chunk_size: int = setting("rsm.config.chunk.size")
    rsm_fetch_chunk_cache_size: int = setting("rsm.config.fetch.chunk.cache.size")
    rsm_endpoint_url: str = setting("rsm.config.storage.s3.endpoint.url")
    rsm_bucket: str = setting("rsm.config.storage.s3.bucket.name")
    rsm_region: str = setting("rsm.config.storage.s3.region")
    rsm_key_prefix: str = setting("rsm.config.storage.key.prefix")
    rsm_credentials_file: str = setting("rsm.config.storage.aws.credentials.file")
    topic_defaults: dict[str, str] = field(default_factory=dict)  # topic key -> value, synonyms resolved
    group_settings: dict[str, str] = field(default_factory=dict)  # group.* / offsets.* (group coordinator)
    given_settings: dict[str, str] = field(default_factory=dict)  # the broker keys it was started with (static)

    @property
    def listener_limits(self) -> ListenerLimits:
        overrides = connection_overrides(self.max_connections_per_ip_overrides)
        return ListenerLimits(self.socket_request_max_bytes, self.queued_max_request_bytes, self.max_connections,
                              self.max_connections_per_ip, overrides, self.connections_max_idle_ms,
                              self.socket_send_buffer_bytes)

    def listener_limits_with(self, value: Callable[[str], str]) -> ListenerLimits:
        """The limits with the connection keys' values now in force (``value(key)``: dynamic
        broker configs, odradek.config.dynamic)."""
        return replace(self.listener_limits, max_connections=int(value("max.connections")),
                       max_connections_per_ip=int(value("max.connections.per.ip")),
                       max_connections_per_ip_overrides=connection_overrides(value("max.connections.per.ip.overrides")))

    @property
    def broker_settings(self) -> dict[str, str]:
        """The broker's own keys and their values, as strings (DescribeConfigs)."""
        return settings_of(self)

    @property
    def zookeeper_timeouts(self) -> ZkTimeouts:
        return ZkTimeouts(self.zookeeper_session_timeout_ms, self.zookeeper_connection_timeout_ms)

    def zookeeper_security(self) -> ZkSecurity:
        """Reads the credentials file and loads the TLS files: ``ValueError`` when it cannot."""
        return ZkSecurity.from_settings(self.broker_settings)

    def control_plane_tls(self) -> ControlPlaneTls | None:
        """Loads the certificate files: ``ValueError`` when they do not."""
        return ControlPlaneTls.from_settings(self.broker_settings)
