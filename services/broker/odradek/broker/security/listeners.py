"""The broker's listeners as Kafka names them, their TLS contexts and TLS principals.

``listeners_of(config)`` reads ``listeners``, ``advertised.listeners``,
``listener.security.protocol.map`` and ``inter.broker.listener.name``. The ``--listen`` /
``--advertised`` flags make a PLAINTEXT listener named PLAINTEXT: the only one without
``listeners``, the first one besides them when ``--listen`` is given too.

TLS is Python's ``ssl`` (TLS 1.2 and later). Certificates and keys are PEM files
(``ssl.keystore.location`` holding chain and key, or ``ssl.keystore.certificate.chain`` +
``ssl.keystore.key``); ``ssl.truststore.location`` is the PEM CA bundle that client
certificates (``ssl.client.auth``) and, on the follower side, the leader's certificate must
chain to; ``ssl.client.auth`` is per listener (``client_auth_of``). A client certificate's subject becomes the principal through
``ssl.principal.mapping.rules`` (DEFAULT: the DN as Kafka's X500Principal.getName() writes it).
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass

from odradek.broker.config import BrokerConfig
from odradek.config.security import CLIENT_AUTH, parse_listeners, parse_protocol_map
from odradek.errors import ErrorCode, KafkaError

ANONYMOUS = "User:ANONYMOUS"


@dataclass(frozen=True, slots=True)
class Listener:
    name: str                 # PLAINTEXT, SASL_SSL, or any name the protocol map knows
    protocol: str             # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    host: str                 # bind address
    port: int                 # 0: a free port, known once bound
    advertised_host: str
    advertised_port: int | None  # None: the bound port

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_config, message)


def listeners_of(cfg: BrokerConfig) -> list[Listener]:
    flag = Listener("PLAINTEXT", "PLAINTEXT", cfg.host, cfg.port, cfg.advertised_host or cfg.host, cfg.advertised_port)
    if not cfg.listeners:
        return [flag]
    protocols = parse_protocol_map(cfg.listener_security_protocol_map)
    advertised = {name: (host, port) for name, host, port in parse_listeners(cfg.advertised_listeners)}
    out = [flag] if cfg.listen_flag else []
    for name, host, port in parse_listeners(cfg.listeners):
        if name not in protocols:
            raise _invalid(f"No security protocol defined for listener {name}")
        adv_host, adv_port = advertised.get(name, (host, None))
        out.append(Listener(name, protocols[name], host, port, adv_host or host, adv_port or None))
    if len({listener.name for listener in out}) != len(out):
        raise _invalid("Each listener must have a different name, listeners: " + cfg.listeners)
    if inter_broker_listener(cfg, out) is None:
        raise _invalid(f"inter.broker.listener.name must be a listener name defined in listeners: "
                       f"{cfg.inter_broker_listener_name}")
    return out


def inter_broker_listener(cfg: BrokerConfig, listeners: list[Listener]) -> Listener | None:
    """The named listener, else the first (Kafka defaults to PLAINTEXT's; one name per broker here)."""
    if not cfg.inter_broker_listener_name:
        return listeners[0]
    return next((li for li in listeners if li.name == cfg.inter_broker_listener_name.upper()), None)


def _load_identity(context: ssl.SSLContext, cfg: BrokerConfig) -> None:
    if cfg.ssl_keystore_location:
        context.load_cert_chain(cfg.ssl_keystore_location)
    elif cfg.ssl_keystore_certificate_chain and cfg.ssl_keystore_key:
        context.load_cert_chain(cfg.ssl_keystore_certificate_chain, cfg.ssl_keystore_key)
    else:
        raise _invalid("an SSL or SASL_SSL listener needs ssl.keystore.location "
                       "(or ssl.keystore.certificate.chain and ssl.keystore.key)")


def client_auth_of(cfg: BrokerConfig, listener: Listener) -> str:
    """A TLS listener's ``ssl.client.auth``: ``listener.name.<l>.ssl.client.auth`` if given, else
    the broker-wide value on SSL listeners and ``none`` on SASL_SSL ones (Kafka's KIP-684: the
    broker-wide key is ignored where SASL authenticates)."""
    key = f"listener.name.{listener.name.lower()}.ssl.client.auth"
    value = cfg.listener_settings.get(key)
    if value is None:
        return cfg.ssl_client_auth if listener.protocol == "SSL" else "none"
    if value not in CLIENT_AUTH:
        raise _invalid(f"{key}: expected one of {', '.join(CLIENT_AUTH)}, got {value!r}")
    return value


def server_context(cfg: BrokerConfig, client_auth: str) -> ssl.SSLContext:
    """A TLS listener's server context, asking clients for a certificate as ``client_auth`` says."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_identity(context, cfg)
    if cfg.ssl_truststore_location:
        context.load_verify_locations(cfg.ssl_truststore_location)
    context.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                           "required": ssl.CERT_REQUIRED}[client_auth]
    return context


def client_context(cfg: BrokerConfig) -> ssl.SSLContext:
    """A follower's context toward the leader's TLS inter-broker listener; it presents the
    broker's own certificate (for listeners with ``ssl.client.auth``)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cfg.ssl_truststore_location:
        context.load_verify_locations(cfg.ssl_truststore_location)
    else:
        context.load_default_certs()
    context.check_hostname = cfg.ssl_endpoint_identification_algorithm == "https"
    _load_identity(context, cfg)
    return context


# -- principals from certificates ------------------------------------------------------------
_RFC2253_NAMES = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O",
                  "localityName": "L", "stateOrProvinceName": "ST", "countryName": "C",
                  "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID"}
_ESCAPE = re.compile(r'([,+"\\<>;])')


def _escape(value: str) -> str:
    return _ESCAPE.sub(r"\\\1", value)


def distinguished_name(subject: tuple) -> str:
    """``getpeercert()['subject']`` as RFC 2253 writes it (most specific RDN first), as
    Java's X500Principal.getName() does: ``CN=alice,OU=eng,O=Example,C=US``."""
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_RFC2253_NAMES.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern | None  # None: DEFAULT
    replacement: str
    case: str

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        m = self.pattern.fullmatch(dn)
        if m is None:
            return None
        out = m.expand(re.sub(r"\$(\d+)", r"\\\1", self.replacement))
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


_RULE = re.compile(r"RULE:((?:\\.|[^/])*)/((?:\\.|[^/])*)/([LU]?)|DEFAULT")


def parse_mapping_rules(text: str) -> list[_Rule]:
    """Kafka's ``ssl.principal.mapping.rules``: ``RULE:pattern/replacement/[LU]`` and ``DEFAULT``,
    comma-separated, first match wins."""
    rules, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _RULE.match(text, pos)
        if m is None:
            raise _invalid(f"Invalid rule: {text[pos:]}")
        rules.append(_Rule(None, "", "") if m.group(0) == "DEFAULT"
                     else _Rule(re.compile(m.group(1)), m.group(2), m.group(3)))
        pos = m.end()
        while pos < len(text) and text[pos] in ", \n":
            pos += 1
    return rules


def principal_of(ssl_object: ssl.SSLObject | None, rules: list[_Rule]) -> str:
    """``User:<name>`` from the peer's certificate; ANONYMOUS without one."""
    cert = ssl_object.getpeercert() if ssl_object is not None else None
    if not cert or not cert.get("subject"):
        return ANONYMOUS
    dn = distinguished_name(cert["subject"])
    for rule in rules:
        name = rule.apply(dn)
        if name is not None:
            return f"User:{name}"
    raise KafkaError(ErrorCode.sasl_authentication_failed, f"No rules apply to {dn}, rules {rules}")
