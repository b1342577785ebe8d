"""Per-principal Kafka clients without a cluster: the bound closes the least recently used idle
principal's clients and never one a request holds; the tokens file maps users to principals;
the Kafka client settings become librdkafka's."""

from __future__ import annotations

import asyncio
import json

import pytest

from odradek.gateway.auth import Tokens
from odradek.gateway.principals import KafkaClients, _Entry
from odradek.gateway.settings import GatewaySettings, from_args


class FakeBridge:
    def __init__(self):
        self.closed = False
        self.auth_error = None

    async def close(self):
        self.closed = True


def test_the_bound_closes_the_least_recently_used_idle_principal():
    async def run():
        clients = KafkaClients(GatewaySettings(bootstrap_servers="127.0.0.1:1", principal_clients_max=2))
        try:
            old, busy = _Entry(FakeBridge(), "old", last_used=1.0), _Entry(FakeBridge(), "busy", 0.5, leases=1)
            clients._mapped = {("old", b""): old, ("busy", b""): busy}
            await clients._make_room()
            assert old.bridge.closed and not busy.bridge.closed and clients.open_principals == ["busy"]
            clients._mapped[("new", b"")] = _Entry(FakeBridge(), "new", 2.0, leases=1)
            await clients._make_room()     # every one in use: none is closed under a request
            assert clients.open_principals == ["busy", "new"]
        finally:
            clients._mapped = {}
            await clients.close()
    asyncio.run(run())


def test_tokens_map_users_to_kafka_principals(tmp_path):
    (tmp_path / "etl.pw").write_text("etl-secret\n")
    (tmp_path / "tokens.json").write_text(json.dumps({"tokens": [
        {"token": "a", "name": "etl", "kafka_username": "etl", "kafka_password_file": "etl.pw"},
        {"token": "b", "name": "ro", "kafka_username": "viewer", "kafka_password": "pw", "topics": {"x": "r"}},
        {"token": "c", "name": "ops", "topics": {"*": "rw"}}]}))
    tokens = Tokens(str(tmp_path / "tokens.json"))
    etl, ro, ops = tokens.principal("a"), tokens.principal("b"), tokens.principal("c")
    assert (etl.kafka_username, etl.kafka_password, etl.admin, etl.may("w", "any")) == ("etl", "etl-secret", True, True)
    assert ro.may("r", "x") and not ro.may("w", "x") and not ro.admin     # given rights narrow the ACLs
    assert ops.kafka_username is None and not ops.admin                     # the gateway's own principal
    assert "etl-secret" not in repr(etl)


def test_kafka_client_settings_are_librdkafkas(tmp_path):
    (tmp_path / "pw").write_text("gw-secret\n")
    settings, _ = from_args(["--bootstrap-servers", "k:9094", "--kafka-security-protocol", "sasl_ssl",
                             "--kafka-sasl-mechanism", "SCRAM-SHA-512", "--kafka-sasl-username", "gateway",
                             "--kafka-sasl-password-file", str(tmp_path / "pw"), "--kafka-ssl-ca-location", "ca.pem"])
    assert settings.client_config() == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "gateway",
        "sasl.password": "gw-secret", "ssl.endpoint.identification.algorithm": "https", "ssl.ca.location": "ca.pem"}
    assert settings.client_config("alice", "pw")["sasl.username"] == "alice"
    assert GatewaySettings(bootstrap_servers="k").client_config() == {"security.protocol": "PLAINTEXT"}
    with pytest.raises(SystemExit):
        from_args(["--bootstrap-servers", "k", "--kafka-security-protocol", "SASL_SSL"])   # no credentials
