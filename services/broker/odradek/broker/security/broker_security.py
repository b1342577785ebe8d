"""The broker's security set-up from its configuration: listeners, TLS contexts, the SASL
server (over the SCRAM store it is given), the per-connection protocol factory, and the
credentials a follower uses toward a leader's inter-broker listener.

Kafka's per-listener JAAS keys give the SASL users: ``listener.name.<l>.plain.sasl.jaas.config``
declares PLAIN users (``user_<name>="<password>"``), and on the inter-broker listener the
``username``/``password`` options of ``listener.name.<l>.<mechanism>.sasl.jaas.config`` are
what this broker logs in with (as Kafka's brokers do).

Per-listener overrides, as Kafka's ``listener.name.<l>.`` prefix gives them:
``ssl.client.auth`` (each TLS listener gets the context of its own mode; the broker-wide value
applies to SSL listeners only, KIP-684), ``sasl.server.max.receive.size`` and
``connections.max.reauth.ms`` (also ``listener.name.<l>.<mechanism>.``, as Kafka reads it).
"""

from __future__ import annotations

import ssl

from odradek.broker.config import BrokerConfig
from odradek.broker.replication.connector import ClientSecurity
from odradek.broker.security.gate import ConnectionGate, ListenerConnection
from odradek.broker.security.listeners import (Listener, client_auth_of, client_context, inter_broker_listener,
                                               listeners_of, parse_mapping_rules, server_context)
from odradek.broker.security.sasl import SaslServer, jaas_options
from odradek.broker.security.scram_store import ScramStore
from odradek.config.security import MECHANISMS
from odradek.errors import ErrorCode, KafkaError


def _jaas(cfg: BrokerConfig, listener: str, mechanism: str) -> dict[str, str]:
    return jaas_options(cfg.listener_settings.get(f"listener.name.{listener.lower()}.{mechanism.lower()}"
                                                  ".sasl.jaas.config", ""))


def _overridden(cfg: BrokerConfig, listener: str, key: str, default: int, mechanism: str = "") -> int:
    """A numeric key's value for a listener (and mechanism): the most specific prefix given wins."""
    prefixes = [f"listener.name.{listener.lower()}.{mechanism.lower()}."] if mechanism else []
    for prefix in prefixes + [f"listener.name.{listener.lower()}."]:
        value = cfg.listener_settings.get(prefix + key)
        if value is not None:
            try:
                return int(value)
            except ValueError:
                raise KafkaError(ErrorCode.invalid_config, f"{prefix + key}: expected an integer, got {value!r}")
    return default


class BrokerSecurity:
    def __init__(self, cfg: BrokerConfig, store: ScramStore) -> None:
        self.listeners = listeners_of(cfg)
        self.inter_broker = inter_broker_listener(cfg, self.listeners)
        self._contexts: dict[str, ssl.SSLContext] = {}   # ssl.client.auth mode -> the server context
        self.client_auth = {li.name: client_auth_of(cfg, li) for li in self.listeners if li.tls}
        for mode in set(self.client_auth.values()):
            self._contexts[mode] = server_context(cfg, mode)
        self.max_receive = {li.name: _overridden(cfg, li.name, "sasl.server.max.receive.size",
                                                 cfg.sasl_server_max_receive_size) for li in self.listeners}
        self.mapping_rules = parse_mapping_rules(cfg.ssl_principal_mapping_rules)
        self.store = store
        mechanisms = [m.strip() for m in cfg.sasl_enabled_mechanisms.split(",") if m.strip()]
        plain_users = {li.name: {k[5:]: v for k, v in _jaas(cfg, li.name, "PLAIN").items() if k.startswith("user_")}
                       for li in self.listeners}
        self.sasl = SaslServer(mechanisms, plain_users, self.store, cfg.connection_failed_authentication_delay_ms,
                               lambda listener, mechanism: _overridden(cfg, listener, "connections.max.reauth.ms",
                                                                       cfg.connections_max_reauth_ms, mechanism))
        self.client = self._client_security(cfg)

    def _client_security(self, cfg: BrokerConfig) -> ClientSecurity:
        listener = self.inter_broker
        context = client_context(cfg) if listener.tls else None
        if not listener.sasl:
            return ClientSecurity(listener.name, context)
        mechanism = cfg.sasl_mechanism_inter_broker_protocol
        if mechanism not in MECHANISMS:
            raise KafkaError(ErrorCode.invalid_config, f"sasl.mechanism.inter.broker.protocol {mechanism} is not supported")
        options = _jaas(cfg, listener.name, mechanism)
        if "username" not in options or "password" not in options:
            raise KafkaError(ErrorCode.invalid_config, f"the inter-broker listener {listener.name} uses SASL: "
                             f"listener.name.{listener.name.lower()}.{mechanism.lower()}.sasl.jaas.config needs "
                             f"username and password")
        return ClientSecurity(listener.name, context, mechanism, options["username"], options["password"])

    def exchange_versions(self) -> dict[int, tuple[int, int]]:
        """The SASL exchange's APIs and versions, which the gate serves and ApiVersions lists."""
        return {key: (lo, hi) for key, (lo, hi, _) in self.sasl.table().items()}

    def ssl_for(self, listener: Listener) -> ssl.SSLContext | None:
        return self._contexts[self.client_auth[listener.name]] if listener.tls else None

    def protocol_factory(self, listener: Listener, dispatcher, max_frame_bytes: int):
        def connection() -> ListenerConnection:
            gate = ConnectionGate(listener, dispatcher, self.sasl, self.mapping_rules, self.max_receive[listener.name])
            return ListenerConnection(gate, max_frame_bytes=max_frame_bytes)
        return connection
