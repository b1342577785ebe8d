"""How a client reaches a dev cluster's Kafka listener: the bootstrap servers and, when the
cluster is secured, its security block (``odradek dev status --json``'s ``"security"``:
protocol, mechanism, ca_file, username, password, client_properties).

``KafkaAccess`` turns that into each client library's settings (``confluent()`` for
confluent-kafka/librdkafka, ``kafka_python()`` for kafka-python) and reads or writes the
Kafka client properties file Kafka's CLI tools take with ``--command-config``. The dev
tools (harness, verify, the users/acls commands) take a ``KafkaAccess`` wherever a bare
bootstrap string once went; ``KafkaAccess.of`` still accepts one (a plaintext cluster).
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from pathlib import Path

SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
_JAAS_OPTION = re.compile(r'(\w+)="([^"]*)"')


def jaas_config(mechanism: str, username: str, password: str) -> str:
    """Kafka's ``sasl.jaas.config`` value logging in as ``username``."""
    module = PLAIN_LOGIN if mechanism == "PLAIN" else SCRAM_LOGIN
    return f'{module} required username="{username}" password="{password}";'


_UNESCAPE = re.compile(r"\\(.)")


def properties_text(props: dict[str, str]) -> str:
    """A Java properties file; values escaped as java.util.Properties reads them (PEM spans lines)."""
    def escape(value: str) -> str:
        return value.replace("\\", "\\\\").replace("\n", "\\n")
    return "".join(f"{k}={escape(v)}\n" for k, v in props.items())


def read_properties(path: Path) -> dict[str, str]:
    """A Java properties file's ``key=value`` lines (comments and blank lines skipped)."""
    out = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")):
            key, _, value = line.partition("=")
            out[key.strip()] = _UNESCAPE.sub(lambda m: {"n": "\n", "t": "\t"}.get(m[1], m[1]), value.strip())
    return out


@dataclass(frozen=True)
class KafkaAccess:
    bootstrap: str
    security: dict | None = None     # None: PLAINTEXT

    @classmethod
    def of(cls, target: "str | KafkaAccess") -> "KafkaAccess":
        return target if isinstance(target, KafkaAccess) else cls(target)

    @classmethod
    def from_status(cls, status: dict) -> "KafkaAccess":
        """From ``odradek dev status --json``."""
        return cls(status["bootstrap_servers"], status.get("security"))

    @classmethod
    def from_properties(cls, bootstrap: str, path: Path) -> "KafkaAccess":
        """From a Kafka client properties file (``--command-config``): security.protocol,
        sasl.mechanism, sasl.jaas.config's username and password, a PEM ssl.truststore.location."""
        props = read_properties(path)
        protocol = props.get("security.protocol", "PLAINTEXT").upper()
        if protocol == "PLAINTEXT":
            return cls(bootstrap)
        jaas = dict(_JAAS_OPTION.findall(props.get("sasl.jaas.config", "")))
        return cls(bootstrap, {"protocol": protocol, "mechanism": props.get("sasl.mechanism", "GSSAPI"),
                               "ca_file": props.get("ssl.truststore.location"),
                               "username": jaas.get("username"), "password": jaas.get("password"),
                               "client_properties": str(path)})

    @property
    def protocol(self) -> str:
        return self.security["protocol"] if self.security else "PLAINTEXT"

    @property
    def _sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def _tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def confluent(self, extra: dict | None = None) -> dict:
        """confluent-kafka (librdkafka) settings, with ``extra`` (librdkafka's names) on top."""
        conf = {"bootstrap.servers": self.bootstrap}
        if self.security:
            conf["security.protocol"] = self.protocol
        if self._sasl:
            conf.update({"sasl.mechanisms": self.security["mechanism"], "sasl.username": self.security["username"],
                         "sasl.password": self.security["password"]})
        if self._tls and self.security.get("ca_file"):
            conf["ssl.ca.location"] = self.security["ca_file"]
        return {**conf, **(extra or {})}

    def kafka_python(self, **extra) -> dict:
        """kafka-python keyword arguments (``KafkaProducer(**access.kafka_python(acks="all"))``)."""
        conf: dict = {"bootstrap_servers": self.bootstrap.split(",")}
        if self.security:
            conf["security_protocol"] = self.protocol
        if self._sasl:
            conf.update(sasl_mechanism=self.security["mechanism"], sasl_plain_username=self.security["username"],
                        sasl_plain_password=self.security["password"])
        if self._tls and self.security.get("ca_file"):
            conf["ssl_cafile"] = self.security["ca_file"]
        return {**conf, **extra}

    def properties(self) -> str:
        """The Kafka client properties (Java clients, ``--command-config``) for this access."""
        props = {"security.protocol": self.protocol}
        if self._sasl:
            s = self.security
            props.update({"sasl.mechanism": s["mechanism"],
                          "sasl.jaas.config": jaas_config(s["mechanism"], s["username"], s["password"])})
        if self._tls and self.security.get("ca_file"):
            props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": self.security["ca_file"]})
        return properties_text(props)


def common_parser() -> argparse.ArgumentParser:
    """The admin commands' (``odradek users``, ``odradek acls``) shared options, for their
    subcommands' ``parents``: ``--json`` and how to find the cluster (``add_arguments``)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--bootstrap-server`` (alias ``--bootstrap``) with ``--command-config``, or ``--data-dir``
    (a dev cluster: its brokers and security block): how the admin commands find a cluster."""
    parser.add_argument("--bootstrap-server", "--bootstrap", dest="bootstrap_server", metavar="HOST:PORT[,...]",
                        help="the cluster's brokers (default: the dev cluster of --data-dir)")
    parser.add_argument("--command-config", type=Path, metavar="PROPERTIES",
                        help="Kafka client properties (security.protocol, sasl.mechanism, sasl.jaas.config, "
                             "ssl.truststore.location), as Kafka's tools take them")
    parser.add_argument("--data-dir", type=Path, default=Path("var/dev"),
                        help="a dev cluster's data directory (its brokers and credentials; default %(default)s)")


def from_arguments(args) -> KafkaAccess:
    """The access ``add_arguments``' options describe."""
    if args.bootstrap_server:
        if args.command_config is None:
            return KafkaAccess(args.bootstrap_server)
        return KafkaAccess.from_properties(args.bootstrap_server, args.command_config)
    from odradek.dev.cluster import STATE_FILE   # the dev cluster's saved state: brokers and security
    path = args.data_dir.resolve() / STATE_FILE
    if not path.exists():
        raise SystemExit(f"no dev cluster in {args.data_dir} (no {STATE_FILE}): give --bootstrap-server")
    state = json.loads(path.read_text())
    bootstrap = ",".join(state.get("brokers", {}).values())
    if args.command_config is not None:
        return KafkaAccess.from_properties(bootstrap, args.command_config)
    return KafkaAccess(bootstrap, state.get("security"))
