"""Kafka's Java client (3.9's console producer and consumer, with ``--producer.config`` /
``--consumer.config`` properties files) and kcat (librdkafka's CLI, ``-X`` settings) over
SASL_SSL with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, and over SSL with a client certificate
(the principal from its subject), against the package's secured cluster."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from bench.apache_kafka import pem_keystore
from odradek.dev.access import properties_text
from tests.security.conftest import Secured
from tests.security.test_sasl_ssl_clients import (MECHANISMS, RECORDS, TIMEOUT_S, _topic, _user,  # noqa: F401
                                                  scram_users)
from tests.support.kafka_tools import CONSOLE_CONSUMER, CONSOLE_PRODUCER, Endpoint, require_kafka
from tests.support.tools import tool_missing

LINES = "".join(r.decode() + "\n" for r in RECORDS)
JAAS_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}
ALICE = "on MTLS authenticated as User:CN=alice,OU=eng,O=Example"


def ok(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, f"exited {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc.stdout


def write_properties(path: Path, props: dict[str, str]) -> str:
    path.write_text(properties_text(props))
    return str(path)


def java_sasl_properties(secured: Secured, mechanism: str) -> dict[str, str]:
    user, password = _user(mechanism)
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
            "sasl.jaas.config": f'{JAAS_MODULES[mechanism]} required username="{user}" password="{password}";',
            "ssl.truststore.type": "PEM", "ssl.truststore.location": secured.ca_file}


def java_ssl_properties(secured: Secured) -> dict[str, str]:
    return {"security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": secured.ca_file,
            **pem_keystore(secured.client_cert)}


def java_roundtrip(bootstrap: str, topic: str, config: str) -> list[bytes]:
    endpoint = Endpoint("odradek", bootstrap)
    ok(endpoint.tool(CONSOLE_PRODUCER, "--topic", topic, "--producer.config", config,
                     "--producer-property", "acks=all", input=LINES))
    out = ok(endpoint.tool(CONSOLE_CONSUMER, "--topic", topic, "--consumer.config", config,
                           "--group", f"java-{topic}", "--from-beginning", "--max-messages", str(len(RECORDS)),
                           "--timeout-ms", str(TIMEOUT_S * 1000)))
    return [line.encode() for line in out.splitlines()]


def kcat(*args: str, input: str | None = None) -> str:
    if shutil.which("kcat") is None:
        tool_missing("kcat is not installed (scripts/kcat.sh, part of `make test-tools`)")
    return ok(subprocess.run(["kcat", *args], capture_output=True, text=True, input=input, timeout=TIMEOUT_S * 2,
                             stdin=None if input is not None else subprocess.DEVNULL))


def kcat_roundtrip(bootstrap: str, topic: str, settings: dict[str, str]) -> list[bytes]:
    common = ["-b", bootstrap, "-t", topic, *(a for k, v in settings.items() for a in ("-X", f"{k}={v}"))]
    kcat("-P", *common, input=LINES)
    out = kcat("-C", *common, "-o", "beginning", "-c", str(len(RECORDS)), "-e", "-q")
    return [line.encode() for line in out.splitlines()]


def kcat_sasl_settings(secured: Secured, mechanism: str) -> dict[str, str]:
    user, password = _user(mechanism)
    return {"security.protocol": "SASL_SSL", "sasl.mechanisms": mechanism, "sasl.username": user,
            "sasl.password": password, "ssl.ca.location": secured.ca_file}


@pytest.fixture(scope="module")
def kafka_jars() -> None:
    require_kafka()


def alice_logins(secured: Secured) -> int:
    return sum(p.read_text().count(ALICE) for p in (secured.cluster.data_dir / "logs").glob("broker-*.log"))


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_java_client_over_sasl_ssl(secured: Secured, scram_users, kafka_jars, tmp_path, mechanism: str):
    config = write_properties(tmp_path / "client.properties", java_sasl_properties(secured, mechanism))
    assert java_roundtrip(secured.bootstrap("SECURE"), _topic(secured), config) == RECORDS


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kcat_over_sasl_ssl(secured: Secured, scram_users, mechanism: str):
    got = kcat_roundtrip(secured.bootstrap("SECURE"), _topic(secured), kcat_sasl_settings(secured, mechanism))
    assert got == RECORDS


def test_java_client_with_a_client_certificate(secured: Secured, kafka_jars, tmp_path):
    before = alice_logins(secured)
    config = write_properties(tmp_path / "client.properties", java_ssl_properties(secured))
    assert java_roundtrip(secured.bootstrap("MTLS"), _topic(secured), config) == RECORDS
    assert alice_logins(secured) > before


def test_kcat_with_a_client_certificate(secured: Secured):
    before = alice_logins(secured)
    settings = {"security.protocol": "SSL", "ssl.ca.location": secured.ca_file,
                "ssl.certificate.location": secured.client_cert, "ssl.key.location": secured.client_cert}
    assert kcat_roundtrip(secured.bootstrap("MTLS"), _topic(secured), settings) == RECORDS
    assert alice_logins(secured) > before
