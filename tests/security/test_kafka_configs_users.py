"""Kafka's ``kafka-configs`` (ConfigCommand) makes a SCRAM user who can then log in, against
the package's secured Odradek cluster and against Apache Kafka 3.9 (one KRaft node with a
SASL_SSL listener, ``bench.apache_kafka.SaslSsl``), with the same commands: each run as an
admin over SASL_SSL (``--command-config``), and their outputs compared."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.apache_kafka import KafkaCluster, SaslSsl
from odradek.dev.access import properties_text
from odradek.certs import CertificateAuthority
from tests.security.conftest import PLAIN_USERS, Secured
from tests.support.kafka_tools import CONFIG_COMMAND, TOPIC_COMMAND, Endpoint, require_kafka

USER, PASSWORD = "bob", "bob-secret"


def ok(proc) -> str:
    assert proc.returncode == 0, f"exited {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc.stdout


def client_properties(path: Path, ca_file: str, mechanism: str, user: str, password: str) -> str:
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
              else "org.apache.kafka.common.security.scram.ScramLoginModule")
    path.write_text(properties_text({
        "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
        "sasl.jaas.config": f'{module} required username="{user}" password="{password}";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": ca_file}))
    return str(path)


class System:
    """One cluster's SASL_SSL endpoint, the CA its certificate chains to, and a scratch dir."""

    def __init__(self, name: str, bootstrap: str, ca_file: str, scratch: Path) -> None:
        self.endpoint, self.ca_file, self.scratch = Endpoint(name, bootstrap), ca_file, scratch

    def properties(self, mechanism: str, user: str, password: str) -> str:
        return client_properties(self.scratch / f"{self.endpoint.name}-{user}-{password}.properties", self.ca_file,
                                 mechanism, user, password)

    def as_admin(self, main_class: str, *args: str):
        config = self.properties("PLAIN", "admin", PLAIN_USERS["admin"])
        return self.endpoint.tool(main_class, "--command-config", config, *args)

    def as_user(self, main_class: str, *args: str, password: str = PASSWORD):
        config = self.properties("SCRAM-SHA-512", USER, password)
        return self.endpoint.tool(main_class, "--command-config", config, *args, timeout=60)


@pytest.fixture(scope="module")
def kafka(tmp_path_factory) -> System:
    require_kafka()
    root = tmp_path_factory.mktemp("kafka-sasl")
    ca = CertificateAuthority.create()
    ca.write_ca(root / "ca.pem")
    ca.write_issued(root / "broker.pem", "127.0.0.1", "localhost")
    cluster = KafkaCluster(root / "kafka", nodes=1, sasl_ssl=SaslSsl(root / "broker.pem", PLAIN_USERS)).start()
    try:
        yield System("kafka", cluster.secure_bootstrap, str(root / "ca.pem"), root)
    finally:
        assert not cluster.stop(), "Kafka had to be killed"


@pytest.fixture(scope="module")
def both(kafka: System, secured: Secured, tmp_path_factory) -> tuple[System, System]:
    return kafka, System("odradek", secured.bootstrap("SECURE"), secured.ca_file,
                         tmp_path_factory.mktemp("odradek-configs"))


def test_kafka_configs_adds_a_scram_user_who_can_log_in(both):
    out: dict[str, dict[str, str]] = {}
    for system in both:
        o = out[system.endpoint.name] = {}
        o["refused before"] = system.as_user(TOPIC_COMMAND, "--list").returncode != 0
        o["alter"] = ok(system.as_admin(CONFIG_COMMAND, "--alter", "--add-config",
                                        f"SCRAM-SHA-512=[password={PASSWORD}]", "--entity-type", "users",
                                        "--entity-name", USER))
        o["describe"] = ok(system.as_admin(CONFIG_COMMAND, "--describe", "--entity-type", "users",
                                           "--entity-name", USER))
        o["login"] = system.as_user(TOPIC_COMMAND, "--list").returncode == 0
        o["wrong password refused"] = system.as_user(TOPIC_COMMAND, "--list", password="wrong").returncode != 0
    assert out["kafka"]["alter"] == f"Completed updating config for user {USER}.\n"
    assert out["kafka"]["describe"] == (f"SCRAM credential configs for user-principal '{USER}' are "
                                        "SCRAM-SHA-512=iterations=4096\n")
    assert out["kafka"]["login"] and out["kafka"]["refused before"] and out["kafka"]["wrong password refused"]
    assert out["odradek"] == out["kafka"]
