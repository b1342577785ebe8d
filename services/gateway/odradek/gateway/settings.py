"""The gateway's settings: command-line options, each also read from ``ODRADEK_GATEWAY_<NAME>``
(upper case, dashes as underscores) so a Kubernetes Deployment can set them as env vars."""

from __future__ import annotations

import argparse
import os
import socket
import uuid
from dataclasses import dataclass, field

ENV_PREFIX = "ODRADEK_GATEWAY_"


@dataclass(frozen=True)
class GatewaySettings:
    bootstrap_servers: str
    host: str = "127.0.0.1"
    port: int = 8080
    advertised_url: str = ""            # this replica's URL in consumer instances' base_uri
    auth_file: str = ""                 # bearer tokens and their rights (see auth.py); empty: no auth
    consumer_instance_timeout_ms: int = 300_000
    max_request_bytes: int = 64 << 20   # whole request body
    max_record_bytes: int = 1_048_588   # Kafka's max.message.bytes default
    produce_timeout_ms: int = 30_000
    ssl_certfile: str = ""              # PEM certificate (chain): serve HTTPS; empty: plain HTTP
    ssl_keyfile: str = ""               # its private key (PEM)
    replica_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])  # names this replica's instances

    @property
    def base_url(self) -> str:
        if self.advertised_url:
            return self.advertised_url.rstrip("/")
        host = self.host if self.host not in ("0.0.0.0", "::") else socket.gethostname()
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def scheme(self) -> str:
        return "https" if self.ssl_certfile else "http"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="odradek gateway", description="Odradek's HTTP gateway (REST Proxy v2).")
    env = os.environ.get

    def opt(name: str, default, kind=str, help_: str = ""):
        value = env(ENV_PREFIX + name.upper().replace("-", "_"))
        ap.add_argument(f"--{name}", type=kind, default=kind(value) if value is not None else default, help=help_)

    opt("bootstrap-servers", None, str, "Kafka bootstrap servers (required)")
    opt("host", "127.0.0.1")
    opt("port", 8080, int)
    opt("advertised-url", "", str, "this replica's URL, for consumer instances' base_uri")
    opt("auth-file", "", str, "bearer tokens file (JSON); empty: no authentication")
    opt("consumer-instance-timeout-ms", 300_000, int)
    opt("max-request-bytes", 64 << 20, int)
    opt("max-record-bytes", 1_048_588, int)
    opt("ssl-certfile", "", str, "PEM certificate (chain) to serve HTTPS with; needs --ssl-keyfile")
    opt("ssl-keyfile", "", str, "PEM private key of --ssl-certfile")
    ap.add_argument("--log-level", default=env(ENV_PREFIX + "LOG_LEVEL", "INFO"))
    return ap


def from_args(argv: list[str] | None = None) -> tuple[GatewaySettings, argparse.Namespace]:
    args = parser().parse_args(argv)
    if not args.bootstrap_servers:
        parser().error("--bootstrap-servers (or ODRADEK_GATEWAY_BOOTSTRAP_SERVERS) is required")
    if bool(args.ssl_certfile) != bool(args.ssl_keyfile):
        parser().error("--ssl-certfile and --ssl-keyfile go together")
    settings = GatewaySettings(
        bootstrap_servers=args.bootstrap_servers, host=args.host, port=args.port,
        advertised_url=args.advertised_url, auth_file=args.auth_file,
        consumer_instance_timeout_ms=args.consumer_instance_timeout_ms,
        max_request_bytes=args.max_request_bytes, max_record_bytes=args.max_record_bytes,
        ssl_certfile=args.ssl_certfile, ssl_keyfile=args.ssl_keyfile)
    return settings, args
