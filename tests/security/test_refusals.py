"""Refusals on one connection only: wrong password, unknown user, unsupported mechanism,
requests before authentication, SASL out of order, a plaintext client on a TLS port, a TLS
client with a certificate from another CA. A connection authenticated before them stays
usable and a new client still gets in."""

from __future__ import annotations

import asyncio
import ssl
import time

import pytest
from kio.static.constants import EntityType

from odradek.broker.replication.client import KafkaClient
from odradek.broker.replication.connector import ClientSecurity
from odradek.errors import ErrorCode
from odradek.protocol.codec import Schemas, make
from tests.security.conftest import Secured

USER, PASSWORD = "refusal-user", "right-password"
API_VERSIONS, METADATA, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 3, 17, 36
SCRAM_FAILED = ("Authentication failed during authentication due to invalid credentials with SASL mechanism "
                "SCRAM-SHA-512")


@pytest.fixture(scope="module")
def user(secured: Secured) -> None:
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    upsert = UserScramCredentialUpsertion(USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                          PASSWORD.encode())
    admin = secured.cluster.admin()  # kept alive until the future resolves
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=60)


def _tls(secured: Secured, cert: str | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=secured.ca_file)
    if cert:
        context.load_cert_chain(cert)
    return context


def _client(address: str, **security) -> KafkaClient:
    host, port = address.rsplit(":", 1)
    return KafkaClient(host, int(port), client_id="refusal-test", security=ClientSecurity(**security))


def _request(api_key: int, version: int, name: str, **fields):
    return make(getattr(Schemas(api_key, version, EntityType.request), name), **fields)


def run(coro):
    return asyncio.run(coro)


def test_refusals_touch_only_their_own_connection(secured: Secured, user):
    secure = secured.endpoints["SECURE"][0]

    async def scenario():
        good = _client(secure, ssl=_tls(secured), mechanism="SCRAM-SHA-512", username=USER, password=PASSWORD)
        await good.connect()
        metadata = _request(METADATA, 9, "MetadataRequest", topics=None, allow_auto_topic_creation=False,
                            include_cluster_authorized_operations=False,
                            include_topic_authorized_operations=False)
        assert (await good.request(METADATA, 9, metadata, timeout=10)).brokers

        for username, password in ((USER, "wrong-password"), ("nobody", PASSWORD)):
            bad = _client(secure, ssl=_tls(secured), mechanism="SCRAM-SHA-512", username=username, password=password)
            started = time.monotonic()
            with pytest.raises(ConnectionError, match=SCRAM_FAILED):
                await bad.connect()
            assert time.monotonic() - started >= 0.1  # connection.failed.authentication.delay.ms

        plain = _client(secure, ssl=_tls(secured), mechanism="PLAIN", username="paula", password="nope")
        with pytest.raises(ConnectionError, match="Invalid username or password"):
            await plain.connect()

        raw = _client(secure, ssl=_tls(secured))
        answer = await raw.request(SASL_HANDSHAKE, 1, _request(SASL_HANDSHAKE, 1, "SaslHandshakeRequest",
                                                               mechanism="GSSAPI"), timeout=10)
        assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
        assert "SCRAM-SHA-512" in answer.mechanisms
        answer = await raw.request(SASL_AUTHENTICATE, 2, _request(SASL_AUTHENTICATE, 2, "SaslAuthenticateRequest",
                                                                  auth_bytes=b"x"), timeout=10)
        assert answer.error_code == ErrorCode.illegal_sasl_state
        with pytest.raises(ConnectionError):  # only ApiVersions and SASL before authentication: closed
            await raw.request(METADATA, 9, metadata, timeout=10)

        plaintext_on_tls = _client(secure)
        with pytest.raises(ConnectionError):
            await plaintext_on_tls.request(API_VERSIONS, 3, _request(
                API_VERSIONS, 3, "ApiVersionsRequest", client_software_name="t", client_software_version="1"),
                timeout=10)

        stranger = _client(secured.endpoints["MTLS"][0], ssl=_tls(secured, secured.stranger_cert))
        with pytest.raises(ConnectionError):
            await stranger.request(METADATA, 9, metadata, timeout=10)

        assert (await good.request(METADATA, 9, metadata, timeout=10)).brokers  # untouched
        good.close()

    run(scenario())


def test_sasl_handshake_on_a_plaintext_listener_is_an_illegal_state(secured: Secured):
    async def scenario():
        client = _client(secured.cluster.bootstrap.split(",")[0])
        answer = await client.request(SASL_HANDSHAKE, 1, _request(SASL_HANDSHAKE, 1, "SaslHandshakeRequest",
                                                                  mechanism="PLAIN"), timeout=10)
        client.close()
        return answer.error_code
    assert run(scenario()) == ErrorCode.illegal_sasl_state
