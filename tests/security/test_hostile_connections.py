"""Issue 30, the connection layer: attacks by clients that have not authenticated, replayed on the
shared ``secured`` cluster (tests/security/conftest.py), each one now failing as in Kafka.

- A frame announced over ``sasl.server.max.receive.size`` (524288) before authentication closes
  the connection unread (CVE-2022-34917), and unauthenticated frames never hold the memory pool:
  while a TLS client without SASL announces 100 MiB and others hold the largest frames they may,
  every authenticated ``acks=all`` produce (which needs the followers' fetches) succeeds.
- ``listener.name.repl.ssl.client.auth=required``: a TLS client without a certificate is refused.
- ``connections.max.reauth.ms`` (KIP-368): SaslAuthenticate states the session lifetime, an
  expired session's next request closes the connection, and librdkafka re-authenticates by itself.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import time
import uuid
from contextlib import ExitStack

import pytest

from odradek.errors import ErrorCode
from tests.security.conftest import PLAIN_USERS, REAUTH_MS, Secured
from tests.security.test_refusals import METADATA, SASL_AUTHENTICATE, SASL_HANDSHAKE, _client, _request, _tls

ATTACK_FRAME = 104857600          # socket.request.max.bytes: the largest frame an authenticated client may send
MAX_RECEIVE = 524288              # sasl.server.max.receive.size's default
TIMEOUT_S = 30


def _tls_socket(secured: Secured, address: str) -> ssl.SSLSocket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=TIMEOUT_S)
    return _tls(secured).wrap_socket(sock, server_hostname=host)


def _hold(sock: ssl.SSLSocket, announced: int, sent: int) -> None:
    """Announce a frame and send ``sent`` bytes of it (the server may close the socket meanwhile)."""
    chunk = b"\0" * (64 * 1024)
    try:
        sock.sendall(struct.pack(">i", announced))
        for _ in range(sent // len(chunk)):
            sock.sendall(chunk)
    except (OSError, ssl.SSLError):
        pass


def _closed_by_server(sock: ssl.SSLSocket) -> bool:
    try:
        return sock.recv(1) == b""
    except (ConnectionError, ssl.SSLError):
        return True


METADATA_REQUEST = _request(METADATA, 9, "MetadataRequest", topics=None, allow_auto_topic_creation=False,
                            include_cluster_authorized_operations=False, include_topic_authorized_operations=False)


def _plain_conf(secured: Secured) -> dict:
    return {"security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN", "sasl.username": "paula",
            "sasl.password": PLAIN_USERS["paula"], "ssl.ca.location": secured.ca_file}


def _broker_logs(secured: Secured) -> str:
    return "".join(p.read_text() for p in (secured.cluster.data_dir / "logs").glob("broker-*.log"))


def test_a_held_100_mib_frame_before_authentication_stalls_no_authenticated_produce(secured: Secured):
    from confluent_kafka import Producer
    topic = f"hostile-{uuid.uuid4().hex[:8]}"
    secured.cluster.create_topic(topic, partitions=3, replication_factor=3)   # a leader on every broker
    producer = Producer({"bootstrap.servers": secured.bootstrap("SECURE"), "acks": "all", "linger.ms": 0,
                         "message.timeout.ms": TIMEOUT_S * 1000, **_plain_conf(secured)})
    assert producer.flush(TIMEOUT_S) == 0 and producer.list_topics(topic, timeout=TIMEOUT_S)
    with ExitStack() as stack:
        huge, held = [], []
        for address in secured.endpoints["SECURE"]:   # every broker, over TLS, no SASL at all
            huge.append(stack.enter_context(_tls_socket(secured, address)))
            _hold(huge[-1], ATTACK_FRAME, 3 << 20)
            for _ in range(4):  # the largest frames allowed before authentication, held incomplete
                held.append(stack.enter_context(_tls_socket(secured, address)))
                _hold(held[-1], MAX_RECEIVE, MAX_RECEIVE - 64 * 1024)
        assert all(_closed_by_server(sock) for sock in huge)
        errors, delivered = [], []
        for i in range(30):
            producer.produce(topic, f"v{i}".encode(), partition=i % 3,
                             on_delivery=lambda err, msg: errors.append(err) if err else delivered.append(msg))
            assert producer.flush(TIMEOUT_S) == 0
        assert not errors and len(delivered) == 30
        for sock in held:   # still open: within the limit, only waiting for their bodies
            sock.setblocking(False)
            with pytest.raises(ssl.SSLWantReadError):
                sock.recv(1)
    assert "before authentication (sasl.server.max.receive.size 524288)" in _broker_logs(secured)


def test_a_listener_requiring_client_certificates_refuses_a_tls_client_without_one(secured: Secured):
    repl = secured.endpoints["REPL"][0]

    async def scenario():
        anonymous = _client(repl, ssl=_tls(secured))
        with pytest.raises(ConnectionError):
            await anonymous.request(METADATA, 9, METADATA_REQUEST, timeout=TIMEOUT_S)
        anonymous.close()
        alice = _client(repl, ssl=_tls(secured, secured.client_cert))
        assert (await alice.request(METADATA, 9, METADATA_REQUEST, timeout=TIMEOUT_S)).brokers
        alice.close()
        # the broker-wide ssl.client.auth (requested) still leaves MTLS open to certificate-less clients
        mtls = _client(secured.endpoints["MTLS"][0], ssl=_tls(secured))
        assert (await mtls.request(METADATA, 9, METADATA_REQUEST, timeout=TIMEOUT_S)).brokers
        mtls.close()
    asyncio.run(scenario())


def test_an_expired_sasl_session_is_closed_at_its_next_request(secured: Secured):
    async def scenario():
        client = _client(secured.endpoints["REAUTH"][0], ssl=_tls(secured))
        handshake = await client.request(SASL_HANDSHAKE, 1, _request(SASL_HANDSHAKE, 1, "SaslHandshakeRequest",
                                                                     mechanism="PLAIN"), timeout=TIMEOUT_S)
        assert handshake.error_code == ErrorCode.none
        token = f"\0paula\0{PLAIN_USERS['paula']}".encode()
        answer = await client.request(SASL_AUTHENTICATE, 2, _request(SASL_AUTHENTICATE, 2, "SaslAuthenticateRequest",
                                                                     auth_bytes=token), timeout=TIMEOUT_S)
        expires = time.monotonic() + REAUTH_MS / 1000
        assert answer.error_code == ErrorCode.none and answer.session_lifetime.total_seconds() * 1000 == REAUTH_MS
        assert (await client.request(METADATA, 9, METADATA_REQUEST, timeout=TIMEOUT_S)).brokers
        await asyncio.sleep(max(0.0, expires - time.monotonic()) + 0.2)   # the session's end, as stated
        with pytest.raises(ConnectionError):
            await client.request(METADATA, 9, METADATA_REQUEST, timeout=TIMEOUT_S)
        client.close()
    asyncio.run(scenario())
    assert "SASL session of User:paula on listener REAUTH expired" in _broker_logs(secured)


def test_librdkafka_re_authenticates_by_itself(secured: Secured):
    from confluent_kafka import Producer
    topic = f"reauth-{uuid.uuid4().hex[:8]}"
    secured.cluster.create_topic(topic, partitions=1, replication_factor=3)
    producer = Producer({"bootstrap.servers": secured.bootstrap("REAUTH"), "acks": "all",
                         "message.timeout.ms": TIMEOUT_S * 1000, **_plain_conf(secured)})
    deadline = time.monotonic() + TIMEOUT_S
    line = "re-authenticated User:paula on REAUTH"
    errors = []
    while line not in _broker_logs(secured):
        assert time.monotonic() < deadline, "no re-authentication within the session lifetimes"
        producer.produce(topic, b"v", on_delivery=lambda err, _msg: err and errors.append(err))
        assert producer.flush(TIMEOUT_S) == 0
        time.sleep(0.5)
    assert not errors
