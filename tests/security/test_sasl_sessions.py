"""SASL sessions at the connection gate, without a cluster (KIP-368 and the pre-auth cap):
the lifetime in SaslAuthenticate, an expired session closed at its next request, re-authentication
(same mechanism, same principal), and the connection's framing following the session."""

from __future__ import annotations

import asyncio
import io
from unittest import mock

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader
from kio.serial import entity_reader, entity_writer

from odradek.broker.dispatch import Dispatcher
from odradek.broker.security.gate import ConnectionGate
from odradek.broker.security.listeners import Listener
from odradek.broker.security.sasl import SaslServer
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.connection import ConnectionClosed

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
REAUTH_MS = 60_000


class Connection:
    """What the gate tells the connection: capped (the limit) or not (None)."""

    def __init__(self) -> None:
        self.limit: int | None = None

    def before_authentication(self, limit: int) -> None:
        self.limit = limit

    def authentication_done(self) -> None:
        self.limit = None

    @property
    def authenticating(self) -> bool:
        return self.limit is not None


class Transport:
    def __init__(self) -> None:
        self.written: list[bytes] = []

    def get_extra_info(self, name):
        return ("10.0.0.9", 4000) if name == "peername" else None

    def write(self, data) -> None:
        self.written.append(bytes(data))


def _gate(reauth_ms: int = REAUTH_MS) -> ConnectionGate:
    listener = Listener("SECURE", "SASL_PLAINTEXT", "127.0.0.1", 0, "127.0.0.1", None)
    sasl = SaslServer(["PLAIN", "SCRAM-SHA-256"], {"SECURE": USERS}, None, 0, lambda _l, _m: reauth_ms)
    gate = ConnectionGate(listener, Dispatcher({}), sasl, (), max_receive=4096)
    gate.connection = Connection()
    gate.bind(Transport())
    gate.connection.before_authentication(gate.max_receive)   # as ListenerConnection does
    return gate


def _frame(api_key: int, version: int, **fields) -> bytes:
    buf = io.BytesIO()
    entity_writer(RequestHeader)(buf, RequestHeader(request_api_key=api_key, request_api_version=version,
                                                    correlation_id=7, client_id="t"))
    entity_writer(load_request_schema(api_key, version))(buf, load_request_schema(api_key, version)(**fields))
    return buf.getvalue()


def _answer(api_key: int, version: int, pieces):
    data = b"".join(bytes(p) for p in pieces)
    return entity_reader(load_response_schema(api_key, version))(memoryview(data), 8)[0]   # after size, correlation id


def _login(gate: ConnectionGate, user: str, mechanism: str = "PLAIN", version: int = 1):
    handshake = _answer(ApiKey.SASL_HANDSHAKE, 1, asyncio.run(gate(_frame(ApiKey.SASL_HANDSHAKE, 1, mechanism=mechanism))))
    assert handshake.error_code == ErrorCode.none
    token = f"\0{user}\0{USERS[user]}".encode()
    return _answer(ApiKey.SASL_AUTHENTICATE, version,
                   asyncio.run(gate(_frame(ApiKey.SASL_AUTHENTICATE, version, auth_bytes=token))))


def _metadata_frame() -> bytes:
    return _frame(ApiKey.METADATA, 1, topics=None)


def test_the_session_lifetime_is_in_the_response_and_framing_follows_authentication():
    gate = _gate()
    assert gate.connection.limit == 4096
    response = _login(gate, "alice")
    assert response.error_code == ErrorCode.none
    assert response.session_lifetime.total_seconds() * 1000 == REAUTH_MS
    assert gate.context.principal == "User:alice" and gate.connection.limit is None


def test_no_lifetime_by_default():
    gate = _gate(reauth_ms=0)
    assert _login(gate, "alice").session_lifetime.total_seconds() == 0
    assert gate.context.expires is None


def test_an_expired_session_is_closed_at_its_next_request():
    gate = _gate()
    _login(gate, "alice")
    with mock.patch("time.monotonic", return_value=gate.context.expires + 1):
        with pytest.raises(ConnectionClosed, match="expired"):
            asyncio.run(gate(_metadata_frame()))


def test_re_authentication_renews_the_session_even_after_it_expired():
    gate = _gate()
    _login(gate, "alice")
    first = gate.context.expires
    with mock.patch("time.monotonic", return_value=first + 1):
        response = _login(gate, "alice")            # a SaslHandshake starts it, as in Kafka
    assert gate.connection.limit is None and gate.context.authenticated
    assert response.error_code == ErrorCode.none and gate.context.expires == first + 1 + REAUTH_MS / 1000


def test_re_authentication_cannot_change_the_principal():
    gate = _gate()
    _login(gate, "alice")
    with pytest.raises(ConnectionClosed, match="authentication failed"):
        _login(gate, "bob")
    failure = _answer(ApiKey.SASL_AUTHENTICATE, 1, gate.transport.written)
    assert failure.error_code == ErrorCode.sasl_authentication_failed
    assert failure.error_message == "Cannot change principals during re-authentication from User.alice: User.bob"


def test_re_authentication_keeps_the_mechanism():
    gate = _gate()
    _login(gate, "alice")
    with pytest.raises(ConnectionClosed, match="authentication failed"):
        _login(gate, "alice", mechanism="SCRAM-SHA-256")


def test_a_client_that_used_saslauthenticate_v0_cannot_re_authenticate():
    gate = _gate()
    _login(gate, "alice", version=0)
    handshake = _answer(ApiKey.SASL_HANDSHAKE, 1, asyncio.run(gate(_frame(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN"))))
    assert handshake.error_code == ErrorCode.illegal_sasl_state and gate.context.authenticated
