"""Per-principal Kafka clients without a cluster: the bound closes the least recently used idle
principal's clients and never one a request holds; the tokens file maps users to principals;
the Kafka client settings become librdkafka's."""

from __future__ import annotations

import asyncio
import json

import pytest

from odradek.gateway.auth import KafkaLogin, Tokens
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
    tokens = Tokens(str(tmp_path / "tokens.json"), "SASL_SSL")
    etl, ro, ops = tokens.principal("a"), tokens.principal("b"), tokens.principal("c")
    assert (etl.kafka_username, etl.kafka.password, etl.admin, etl.may("w", "any")) == ("etl", "etl-secret", True, True)
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
    assert settings.client_config(KafkaLogin("alice", "pw"))["sasl.username"] == "alice"
    assert GatewaySettings(bootstrap_servers="k").client_config() == {"security.protocol": "PLAINTEXT"}
    with pytest.raises(SystemExit):
        from_args(["--bootstrap-servers", "k", "--kafka-security-protocol", "SASL_SSL"])   # no credentials


def test_a_mapping_the_protocol_cannot_carry_is_refused(tmp_path):
    """SASL credentials under SSL (or a certificate under SASL_SSL) would silently act as the
    gateway's own principal: the tokens file is refused instead."""
    sasl = tmp_path / "sasl.json"
    sasl.write_text(json.dumps({"tokens": [{"token": "a", "kafka_username": "etl", "kafka_password": "pw"}]}))
    cert = tmp_path / "cert.json"
    cert.write_text(json.dumps({"tokens": [{"token": "a", "kafka_ssl_certificate_location": "u.pem",
                                            "kafka_ssl_key_location": "u.pem"}]}))
    for path, protocol in ((sasl, "SSL"), (sasl, "PLAINTEXT"), (cert, "SASL_SSL")):
        with pytest.raises(ValueError, match="cannot carry|names the principal only"):
            Tokens(str(path), protocol)


def test_a_user_mapped_to_a_certificate_logs_in_with_it(tmp_path):
    from odradek.certs import CertificateAuthority
    CertificateAuthority.create().write_issued(tmp_path / "alice.pem", "alice", common_name="alice")
    (tmp_path / "tokens.json").write_text(json.dumps({"tokens": [
        {"token": "a", "name": "alice-http", "kafka_ssl_certificate_location": "alice.pem",
         "kafka_ssl_key_location": "alice.pem", "groups": ["alice-*"]}]}))
    alice = Tokens(str(tmp_path / "tokens.json"), "SSL").principal("a")
    assert alice.kafka.principal == "User:CN=alice"
    assert alice.may_group("alice-etl") and not alice.may_group("bob-etl")
    settings = GatewaySettings(bootstrap_servers="k", kafka_security_protocol="SSL", kafka_ssl_ca_location="ca.pem",
                               kafka_ssl_certificate_location="gw.pem", kafka_ssl_key_location="gw.pem")
    conf = settings.client_config(alice.kafka)
    assert (conf["ssl.certificate.location"], conf["ssl.key.location"]) == ((str(tmp_path / "alice.pem"),) * 2)
    assert settings.client_config()["ssl.certificate.location"] == "gw.pem"   # the gateway's own


def test_require_auth_needs_an_auth_file(tmp_path, monkeypatch):
    with pytest.raises(SystemExit):
        from_args(["--bootstrap-servers", "k", "--require-auth"])
    (tmp_path / "t.json").write_text('{"tokens": []}')
    monkeypatch.setenv("ODRADEK_GATEWAY_REQUIRE_AUTH", "true")   # as the operator sets it
    settings, _ = from_args(["--bootstrap-servers", "k", "--auth-file", str(tmp_path / "t.json")])
    assert settings.require_auth


def test_the_commands_take_a_secured_dev_clusters_token_and_ca(tmp_path):
    """``odradek produce|consume --data-dir`` of a ``dev up --security sasl_ssl`` cluster: its
    https gateway, checked against the dev CA, with the admin's token."""
    import argparse
    from odradek.certs import CertificateAuthority
    from odradek.client.cli import _gateway
    CertificateAuthority.create().write_ca(tmp_path / "ca.pem")
    (tmp_path / "cluster.json").write_text(json.dumps({"gateway": "https://127.0.0.1:1", "security": {
        "gateway_token": "dev-token", "ca_file": str(tmp_path / "ca.pem")}}))
    args = argparse.Namespace(gateway=None, data_dir=tmp_path, token=None, gateway_ca=None)
    with _gateway(args) as gw:
        assert gw.http.headers["authorization"] == "Bearer dev-token"
        assert str(gw.http.base_url) == "https://127.0.0.1:1"
