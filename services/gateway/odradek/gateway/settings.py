"""The gateway's settings: command-line options, each also read from ``ODRADEK_GATEWAY_<NAME>``
(upper case, dashes as underscores) so a Kubernetes Deployment can set them as env vars.

``--kafka-*`` options are the Kafka client settings of the gateway's own principal, under
librdkafka's names (``--kafka-security-protocol`` is ``security.protocol``, and so on);
``client_config`` turns them into the configuration every Kafka client of the gateway shares."""

from __future__ import annotations

import argparse
import os
import socket
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from odradek import logs
from odradek.gateway.auth import KafkaLogin
from odradek.gateway.broker_metrics import BrokerMetrics

ENV_PREFIX = "ODRADEK_GATEWAY_"


@dataclass(frozen=True)
class GatewaySettings:
    bootstrap_servers: str
    host: str = "127.0.0.1"
    port: int = 8080
    advertised_url: str = ""            # this replica's URL in consumer instances' base_uri
    auth_file: str = ""                 # bearer tokens and their rights (see auth.py); empty: no auth
    require_auth: bool = False          # production: an auth file is required, every route but the probes needs a token
    consumer_instance_timeout_ms: int = 300_000
    max_request_bytes: int = 64 << 20   # whole request body
    max_record_bytes: int = 1_048_588   # Kafka's max.message.bytes default
    produce_timeout_ms: int = 30_000
    ssl_certfile: str = ""              # PEM certificate (chain): serve HTTPS; empty: plain HTTP
    ssl_keyfile: str = ""               # its private key (PEM)
    kafka_security_protocol: str = "PLAINTEXT"   # security.protocol
    kafka_sasl_mechanism: str = ""      # sasl.mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    kafka_sasl_username: str = ""       # sasl.username of the gateway's own principal
    kafka_sasl_password: str = field(default="", repr=False)   # sasl.password (or from a file)
    kafka_ssl_ca_location: str = ""     # ssl.ca.location: PEM CA bundle the brokers' certificates chain to
    kafka_ssl_certificate_location: str = ""   # ssl.certificate.location: client certificate (PEM)
    kafka_ssl_key_location: str = ""    # ssl.key.location: its private key (PEM)
    kafka_ssl_endpoint_identification_algorithm: str = "https"   # empty: the host name is not checked
    principal_clients_max: int = 32     # HTTP users' Kafka principals with clients open at once
    principal_clients_idle_ms: int = 300_000   # a principal's clients unused this long are closed
    broker_metrics_urls: str = ""       # the brokers' Prometheus endpoints (broker_metrics.py); empty: none
    schema_registry: bool = True        # serve the schema registry (registry/, docs/schema-registry.md)
    schema_registry_topic: str = "_schemas"        # its compacted topic (Confluent's and Karapace's name)
    schema_registry_group: str = "schema-registry"  # the group its replicas elect their primary in
    schema_registry_url: str = ""       # this replica's own URL, where the others forward registry writes
    replica_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])  # names this replica's instances

    @property
    def base_url(self) -> str:
        if self.advertised_url:
            return self.advertised_url.rstrip("/")
        host = self.host if self.host not in ("0.0.0.0", "::") else socket.gethostname()
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def registry_url(self) -> str:
        """Where the other replicas reach this one (their writes go to the primary's): its own
        address, not a load-balanced one that may lead back to a follower; default ``base_url``."""
        return self.schema_registry_url.rstrip("/") or self.base_url

    @property
    def scheme(self) -> str:
        return "https" if self.ssl_certfile else "http"

    def client_config(self, login: KafkaLogin | None = None) -> dict:
        """librdkafka's security settings for the gateway's clients: the gateway's own principal,
        or ``login``, the SASL credentials or client certificate an HTTP user is mapped to (the
        tokens file refuses a mapping the protocol cannot carry: ``auth.Tokens``)."""
        conf = {"security.protocol": self.kafka_security_protocol}
        sasl = login is not None and login.username is not None
        if self.kafka_security_protocol.upper().startswith("SASL_"):
            conf |= {"sasl.mechanism": self.kafka_sasl_mechanism,
                     "sasl.username": login.username if sasl else self.kafka_sasl_username,
                     "sasl.password": login.password if sasl else self.kafka_sasl_password}
        if self.kafka_security_protocol.upper().endswith("SSL"):
            conf["ssl.endpoint.identification.algorithm"] = self.kafka_ssl_endpoint_identification_algorithm or "none"
            certificate = login is not None and login.certificate is not None
            for key, value in (("ssl.ca.location", self.kafka_ssl_ca_location),
                               ("ssl.certificate.location",
                                login.certificate if certificate else self.kafka_ssl_certificate_location),
                               ("ssl.key.location", login.key if certificate else self.kafka_ssl_key_location)):
                if value:
                    conf[key] = value
        return conf


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="odradek gateway", description="Odradek's HTTP gateway (REST Proxy v2).")
    env = os.environ.get

    def opt(name: str, default, kind=str, help_: str = ""):
        value = env(ENV_PREFIX + name.upper().replace("-", "_"))
        flag = {"nargs": "?", "const": True} if kind is _flag else {}   # a bare --require-auth is true
        ap.add_argument(f"--{name}", type=kind, default=kind(value) if value is not None else default, help=help_,
                        **flag)

    opt("bootstrap-servers", None, str, "Kafka bootstrap servers (required)")
    opt("host", "127.0.0.1")
    opt("port", 8080, int)
    opt("advertised-url", "", str, "this replica's URL, for consumer instances' base_uri")
    opt("auth-file", "", str, "bearer tokens file (JSON); empty: no authentication")
    opt("require-auth", False, _flag, "production: refuse to start without --auth-file, and ask every route but "
        "/healthz and /readyz for a token (true/false)")
    opt("consumer-instance-timeout-ms", 300_000, int)
    opt("max-request-bytes", 64 << 20, int)
    opt("max-record-bytes", 1_048_588, int)
    opt("ssl-certfile", "", str, "PEM certificate (chain) to serve HTTPS with; needs --ssl-keyfile")
    opt("ssl-keyfile", "", str, "PEM private key of --ssl-certfile")
    opt("kafka-security-protocol", "PLAINTEXT", str, "security.protocol towards the brokers: PLAINTEXT, SSL, "
        "SASL_PLAINTEXT, SASL_SSL")
    opt("kafka-sasl-mechanism", "", str, "sasl.mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512")
    opt("kafka-sasl-username", "", str, "sasl.username of the gateway's own principal")
    opt("kafka-sasl-password", "", str, "sasl.password (prefer the env var or --kafka-sasl-password-file)")
    opt("kafka-sasl-password-file", "", str, "file holding sasl.password (e.g. a mounted Secret)")
    opt("kafka-ssl-ca-location", "", str, "ssl.ca.location: PEM CA bundle to check the brokers' certificates")
    opt("kafka-ssl-certificate-location", "", str, "ssl.certificate.location: client certificate (PEM)")
    opt("kafka-ssl-key-location", "", str, "ssl.key.location: the client certificate's private key (PEM)")
    opt("kafka-ssl-endpoint-identification-algorithm", "https", str, "https: check the brokers' host names; "
        "empty: do not")
    opt("principal-clients-max", 32, int, "HTTP users' Kafka principals with clients open at once")
    opt("principal-clients-idle-ms", 300_000, int, "close a principal's Kafka clients unused this long")
    opt("broker-metrics-urls", "", str, "the brokers' Prometheus endpoints, for the console's throughput "
        "and partition sizes: 1=http://b1:9404/metrics,2=... or a template http://{host}:9404/metrics")
    opt("schema-registry", True, _flag, "serve the Confluent-compatible schema registry (true/false)")
    opt("schema-registry-topic", "_schemas", str, "the registry's compacted topic")
    opt("schema-registry-group", "schema-registry", str, "the consumer group the registry's replicas elect "
        "their primary in")
    opt("schema-registry-url", "", str, "this replica's own URL, where the other replicas forward registry "
        "writes when it is the primary (default: --advertised-url)")
    logs.add_arguments(ap, env(ENV_PREFIX + "LOG_LEVEL", "INFO").upper())
    return ap


def _flag(value) -> bool:
    """A boolean option's value, from the command line or an env var (``true``, ``1``, ``yes``)."""
    if isinstance(value, bool):
        return value
    if str(value).strip().lower() in ("1", "true", "yes", "on"):
        return True
    if str(value).strip().lower() in ("", "0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"{value!r}: true or false")


def from_args(argv: list[str] | None = None) -> tuple[GatewaySettings, argparse.Namespace]:
    args = parser().parse_args(argv)
    if not args.bootstrap_servers:
        parser().error("--bootstrap-servers (or ODRADEK_GATEWAY_BOOTSTRAP_SERVERS) is required")
    if args.require_auth and not args.auth_file:
        parser().error("--require-auth needs --auth-file (ODRADEK_GATEWAY_AUTH_FILE): the bearer tokens")
    if bool(args.ssl_certfile) != bool(args.ssl_keyfile):
        parser().error("--ssl-certfile and --ssl-keyfile go together")
    protocol = args.kafka_security_protocol.upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        parser().error(f"--kafka-security-protocol {protocol}: one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL")
    password = (Path(args.kafka_sasl_password_file).read_text().strip() if args.kafka_sasl_password_file
                else args.kafka_sasl_password)
    if protocol.startswith("SASL_") and not (args.kafka_sasl_mechanism and args.kafka_sasl_username and password):
        parser().error(f"{protocol} needs --kafka-sasl-mechanism, --kafka-sasl-username and a password")
    settings = GatewaySettings(
        bootstrap_servers=args.bootstrap_servers, host=args.host, port=args.port,
        advertised_url=args.advertised_url, auth_file=args.auth_file, require_auth=args.require_auth,
        consumer_instance_timeout_ms=args.consumer_instance_timeout_ms,
        max_request_bytes=args.max_request_bytes, max_record_bytes=args.max_record_bytes,
        ssl_certfile=args.ssl_certfile, ssl_keyfile=args.ssl_keyfile,
        kafka_security_protocol=protocol, kafka_sasl_mechanism=args.kafka_sasl_mechanism.upper(),
        kafka_sasl_username=args.kafka_sasl_username, kafka_sasl_password=password,
        kafka_ssl_ca_location=args.kafka_ssl_ca_location,
        kafka_ssl_certificate_location=args.kafka_ssl_certificate_location,
        kafka_ssl_key_location=args.kafka_ssl_key_location,
        kafka_ssl_endpoint_identification_algorithm=args.kafka_ssl_endpoint_identification_algorithm,
        principal_clients_max=args.principal_clients_max, principal_clients_idle_ms=args.principal_clients_idle_ms,
        broker_metrics_urls=args.broker_metrics_urls, schema_registry=args.schema_registry,
        schema_registry_topic=args.schema_registry_topic, schema_registry_group=args.schema_registry_group,
        schema_registry_url=args.schema_registry_url)
    try:
        BrokerMetrics(settings.broker_metrics_urls)
    except ValueError as e:
        parser().error(str(e))
    return settings, args
