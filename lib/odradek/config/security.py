"""The broker's listener, TLS and SASL keys, with Kafka's names and defaults (docs/security.md).

``listeners`` empty means: one PLAINTEXT listener from the ``--listen``/``--advertised`` flags.
Keys of one listener only (``listener.name.<listener>.<mechanism>.sasl.jaas.config``, where
PLAIN users are declared as Kafka's PlainLoginModule declares them) are not fixed names: they
are accepted by prefix (``is_listener_key``) and handed to the broker as they are.
"""

from __future__ import annotations

import re

from odradek.config.keys import BOOLEAN, INT_MAX, LONG_MAX, ConfigKey, ConfigType, ValueType, integer, one_of, registry

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
CLIENT_AUTH = ("none", "requested", "required")
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in PROTOCOLS)
_LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:/]*):(\d+)$")
_LISTENER_KEY = re.compile(r"^listener\.name\.[a-z0-9_]+\.")


def _items(s: str) -> list[str]:
    return [p.strip() for p in s.split(",") if p.strip()]


def _listener_list(s: str) -> str:
    for item in _items(s):
        if not _LISTENER.match(item):
            raise ValueError(f"expected NAME://host:port, got {item!r}")
    return s


def _protocol_map(s: str) -> str:
    for item in _items(s):
        name, _, protocol = item.partition(":")
        if not name or protocol not in PROTOCOLS:
            raise ValueError(f"expected LISTENER:PROTOCOL with a protocol of {', '.join(PROTOCOLS)}, got {item!r}")
    return s


def _mechanisms(s: str) -> str:
    for item in _items(s):
        if item not in MECHANISMS:
            raise ValueError(f"supported mechanisms are {', '.join(MECHANISMS)}, not {item!r}")
    return s


def _text(s: str) -> str:
    return s


# Kafka's ZooKeeper-mode authorizer class names (3.x and the pre-2.4 one) and our module's own
# name all turn on the one ACL authorizer (docs/security.md, "ACLs"); empty: no authorizer.
AUTHORIZERS = ("kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer",
               "odradek.broker.security.authorizer.AclAuthorizer")


def _authorizer(s: str) -> str:
    if s and s not in AUTHORIZERS:
        raise ValueError(f"supported authorizers are {', '.join(AUTHORIZERS)} (or empty: none)")
    return s


def _principals(s: str) -> str:
    for item in (p.strip() for p in s.split(";")):
        if item and ":" not in item:
            raise ValueError(f"expected principals as Type:name separated by ';', got {item!r}")
    return s


def parse_listeners(s: str) -> list[tuple[str, str, int]]:
    """``NAME://host:port,...`` -> [(NAME, host, port)] (IPv6 brackets removed)."""
    out = []
    for item in _items(s):
        name, host, port = _LISTENER.match(item).groups()
        out.append((name.upper(), host.strip("[]"), int(port)))
    return out


def parse_protocol_map(s: str) -> dict[str, str]:
    return {name.upper(): protocol for name, _, protocol in (i.partition(":") for i in _items(s))}


def is_listener_key(name: str) -> bool:
    return bool(_LISTENER_KEY.match(name))


LISTENERS = ValueType(ConfigType.LIST, _listener_list, "NAME://host:port[,NAME://host:port] (empty: --listen)")
PROTOCOL_MAP = ValueType(ConfigType.LIST, _protocol_map, "LISTENER:PROTOCOL[,...]")
MECHANISM_LIST = ValueType(ConfigType.LIST, _mechanisms, "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (comma-separated)")
TEXT = ValueType(ConfigType.STRING, _text, "a string")
AUTHORIZER = ValueType(ConfigType.STRING, _authorizer, f"empty, or one of {', '.join(AUTHORIZERS)}")
PRINCIPALS = ValueType(ConfigType.STRING, _principals, "principals (User:name) separated by ';'")
MECHANISM = ValueType(ConfigType.STRING, _mechanisms, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")

SECURITY_CONFIGS: dict[str, ConfigKey] = registry(
    ConfigKey("listeners", LISTENERS, "", "the listeners: NAME://host:port each (port 0 = a free port)"),
    ConfigKey("advertised.listeners", LISTENERS, "",
              "what Metadata tells a client that connected on each listener (default: the listener's own address)"),
    ConfigKey("listener.security.protocol.map", PROTOCOL_MAP, DEFAULT_PROTOCOL_MAP,
              "the security protocol of each listener name"),
    ConfigKey("inter.broker.listener.name", TEXT, "",
              "the listener followers fetch from (default: the first listener)"),
    ConfigKey("sasl.enabled.mechanisms", MECHANISM_LIST, "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
              "SASL mechanisms a SASL listener accepts"),
    ConfigKey("sasl.mechanism.inter.broker.protocol", MECHANISM, "PLAIN",
              "mechanism a follower authenticates with on a SASL inter-broker listener"),
    ConfigKey("connection.failed.authentication.delay.ms", integer(0, INT_MAX), "100",
              "delay before a connection whose authentication failed is answered and closed"),
    ConfigKey("sasl.server.max.receive.size", integer(1, INT_MAX), "524288",
              "largest frame a SASL listener reads before and during authentication (larger: connection closed); "
              "a listener.name.NAME. prefix overrides it"),
    ConfigKey("connections.max.reauth.ms", integer(0, LONG_MAX), "0",
              "SASL session lifetime (KIP-368): clients re-authenticate within it, an expired connection is closed "
              "at its next request; 0: no limit; listener.name.NAME[.MECHANISM]. prefixes override it"),
    ConfigKey("ssl.keystore.type", one_of("PEM"), "PEM", "format of the broker's certificate and key (PEM only)"),
    ConfigKey("ssl.keystore.location", TEXT, "", "PEM file with the broker's certificate chain and private key"),
    ConfigKey("ssl.keystore.certificate.chain", TEXT, "",
              "path of a PEM file with the broker's certificate chain (Kafka: the PEM text), with ssl.keystore.key"),
    ConfigKey("ssl.keystore.key", TEXT, "", "path of a PEM file with the broker's unencrypted private key (Kafka: the PEM text)"),
    ConfigKey("ssl.truststore.location", TEXT, "",
              "PEM file of the CA certificates that client certificates (and other brokers') must chain to"),
    ConfigKey("ssl.client.auth", one_of(*CLIENT_AUTH), "none",
              "whether an SSL listener asks clients for a certificate; listener.name.NAME.ssl.client.auth "
              "overrides it, and alone applies to SASL_SSL listeners (KIP-684)"),
    ConfigKey("ssl.principal.mapping.rules", TEXT, "DEFAULT",
              "RULE:pattern/replacement/[LU] list mapping a certificate's subject DN to a user name"),
    ConfigKey("ssl.endpoint.identification.algorithm", one_of("https", ""), "https",
              "whether a follower checks the leader's certificate host name (https) or not (empty)"),
    ConfigKey("authorizer.class.name", AUTHORIZER, "",
              "the ACL authorizer (Kafka's AclAuthorizer class names turn it on); empty: every request is allowed"),
    ConfigKey("super.users", PRINCIPALS, "", "principals every ACL check allows (the brokers' own must be one)"),
    ConfigKey("allow.everyone.if.no.acl.found", BOOLEAN, "false",
              "with the authorizer on, allow a resource that no ACL matches (Kafka's default: deny)"),
)
