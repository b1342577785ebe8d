"""SASL on the Kafka wire: SaslHandshake (v0-1), SaslAuthenticate (v0-2), PLAIN and SCRAM.

Kafka's sequence: SaslHandshake names a mechanism (UNSUPPORTED_SASL_MECHANISM with the enabled
list otherwise); then the client's tokens come in SaslAuthenticate requests (v1 handshake) or,
after a v0 handshake, as bare size-prefixed frames. SCRAM-SHA-256/512 is ``scramp``'s server
with the credentials of ``/config/users/<user>`` (``ScramStore``); PLAIN checks the
``user_<name>="<password>"`` entries of ``listener.name.<l>.plain.sasl.jaas.config``.

A failed authentication is answered with SASL_AUTHENTICATION_FAILED and Kafka's message after
``connection.failed.authentication.delay.ms``, then the connection is closed
(``AuthenticationFailed``). ``ConnectionGate`` (odradek.broker.security.gate) lets nothing but
ApiVersions, SaslHandshake and SaslAuthenticate through before success.

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` the successful SaslAuthenticate
carries the session lifetime, and the session ends that long after; a client that used
SaslAuthenticate v1+ re-authenticates with a new SaslHandshake (same mechanism) on the same
connection, and must come back as the same principal ("Cannot change principals during
re-authentication"), else it fails like any authentication.
"""

from __future__ import annotations

import asyncio
import datetime
import hmac
import logging
import re
import time
from collections import Counter
from typing import Callable

from scramp import ScramException, ScramMechanism

from odradek.broker.security.scram_store import ScramStore
from odradek.broker.security.session import current
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make

log = logging.getLogger(__name__)

_JAAS_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*"((?:[^"\\]|\\.)*)"')
NO_LIFETIME = datetime.timedelta(0)
EXCHANGE_VERSIONS = {ApiKey.SASL_HANDSHAKE: (0, 1), ApiKey.SASL_AUTHENTICATE: (0, 2)}


def accept_kafka_nonce(server, client_final: str) -> None:
    """Kafka 3.9 accepts a client-final whose nonce ends with the server's (ScramSaslServer's
    ``endsWith``) and verifies the proof over the message as sent; librdkafka before 2.6.1
    relies on it (it sends its own nonce in front of the combined one). scramp requires
    equality, so it is given the nonce as sent; the proof still covers the server's nonce."""
    nonce, expected = next((a[2:] for a in client_final.split(",") if a.startswith("r=")), None), str(server.nonce)
    if nonce is not None and nonce != expected and nonce.endswith(expected):
        server.nonce = type(server.nonce)(nonce)   # scramp's Nonce (a str in older versions)


def jaas_options(text: str) -> dict[str, str]:
    """``Module required k="v" ...;`` -> {k: v} (Kafka's JAAS option syntax)."""
    return {k: re.sub(r"\\(.)", r"\1", v) for k, v in _JAAS_OPTION.findall(text or "")}


class AuthenticationFailed(Exception):
    """Carries Kafka's message, then (from SaslAuthenticate) the response body to send before
    closing the connection."""

    def __init__(self, body: object) -> None:
        super().__init__(body if isinstance(body, str) else body.error_message)
        self.body = body


class SaslServer:
    """The broker's SASL configuration and the two request handlers."""

    def __init__(self, mechanisms: list[str], plain_users: dict[str, dict[str, str]], store: ScramStore,
                 failure_delay_ms: int, reauth_ms: Callable[[str, str], int] = lambda _l, _m: 0) -> None:
        self.mechanisms = mechanisms
        self.reauth_ms = reauth_ms       # (listener, mechanism) -> connections.max.reauth.ms in force
        self.plain_users = plain_users   # listener name -> {user: password}
        self.store = store
        self.failure_delay_s = failure_delay_ms / 1000
        self.failures: Counter[str] = Counter()  # listener name -> failed authentications (the gate counts)

    def table(self) -> dict:
        """The exchange's APIs (served by the connection gate, advertised by ApiVersions)."""
        handlers = {ApiKey.SASL_HANDSHAKE: self.handshake, ApiKey.SASL_AUTHENTICATE: self.authenticate}
        return {key: (lo, hi, handlers[key]) for key, (lo, hi) in EXCHANGE_VERSIONS.items()}

    async def handshake(self, header, request) -> object:
        s = Schemas(ApiKey.SASL_HANDSHAKE, header.api_version)
        session = current()
        if session.authenticated and session.can_reauthenticate and session.previous is None:
            self._begin_reauthentication(session, request.mechanism)
        elif session.authenticated or session.mechanism is not None:
            return make(s.SaslHandshakeResponse, error_code=ErrorCode.illegal_sasl_state, mechanisms=())
        if request.mechanism not in self.mechanisms:
            return make(s.SaslHandshakeResponse, error_code=ErrorCode.unsupported_sasl_mechanism,
                        mechanisms=tuple(self.mechanisms))
        session.mechanism = request.mechanism
        session.raw_tokens = header.api_version == 0
        return make(s.SaslHandshakeResponse, error_code=ErrorCode.none, mechanisms=tuple(self.mechanisms))

    @staticmethod
    def _begin_reauthentication(session, mechanism: str) -> None:
        """Kafka's re-authentication: the same mechanism, then a new exchange (the connection is
        unauthenticated until it succeeds; the gate lets only the exchange through)."""
        if mechanism != session.mechanism:
            raise AuthenticationFailed(f"SASL mechanism '{mechanism}' requested by client is not supported for "
                                       f"re-authentication of mechanism '{session.mechanism}'")
        session.previous = (session.mechanism, session.principal)
        session.authenticated, session.mechanism, session.exchange = False, None, None

    async def authenticate(self, header, request) -> object:
        s = Schemas(ApiKey.SASL_AUTHENTICATE, header.api_version)
        session = current()
        session.can_reauthenticate |= header.api_version > 0
        if session.authenticated or session.mechanism is None or session.raw_tokens:
            message = ("SaslAuthenticate request received after successful authentication" if session.authenticated
                       else f"Unexpected SaslAuthenticate request with mechanism {session.mechanism}")
            return make(s.SaslAuthenticateResponse, error_code=ErrorCode.illegal_sasl_state, error_message=message,
                        auth_bytes=b"", session_lifetime=NO_LIFETIME)
        try:
            reply = await self.evaluate(request.auth_bytes)
        except AuthenticationFailed as e:
            raise AuthenticationFailed(make(s.SaslAuthenticateResponse, error_code=ErrorCode.sasl_authentication_failed,
                                            error_message=e.body, auth_bytes=b"",
                                            session_lifetime=NO_LIFETIME)) from None
        lifetime = datetime.timedelta(milliseconds=session.lifetime_ms) if session.authenticated else NO_LIFETIME
        return make(s.SaslAuthenticateResponse, error_code=ErrorCode.none, error_message=None, auth_bytes=reply,
                    session_lifetime=lifetime)

    async def evaluate(self, token: bytes) -> bytes:
        """One client token -> the server's answer; raises AuthenticationFailed(message)."""
        session = current()
        try:
            if session.mechanism == "PLAIN":
                return self._plain(session, token)
            return await self._scram(session, token)
        except AuthenticationFailed as e:
            log.info("authentication failed on %s from %s (%s): %s", session.listener, session.client_address,
                     session.mechanism, e.body)
            await asyncio.sleep(self.failure_delay_s)
            raise

    def _plain(self, session, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        expected = self.plain_users.get(session.listener, {}).get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        self._succeeded(session, user)
        return b""

    async def _scram(self, session, token: bytes) -> bytes:
        failed = ("Authentication failed during authentication due to invalid credentials with SASL mechanism "
                  f"{session.mechanism}")
        server = session.exchange
        try:
            if server is None:
                found = await self.store.credentials_for_first_message(token, session.mechanism)
                if found is None:
                    raise AuthenticationFailed(failed)
                user, credentials = found
                server = ScramMechanism(session.mechanism).make_server(lambda _user: credentials)
                server.set_client_first(token.decode())
                session.exchange = (user, server)
                return server.get_server_first().encode()
            user, server = server
            accept_kafka_nonce(server, token.decode())
            server.set_client_final(token.decode())
            self._succeeded(session, user)
            return server.get_server_final().encode()
        except (ScramException, UnicodeDecodeError) as e:
            log.debug("SCRAM exchange failed: %s", e)
            raise AuthenticationFailed(failed) from None

    def _succeeded(self, session, user: str) -> None:
        principal = f"User:{user}"
        if session.previous is not None and session.previous[1] != principal:
            before = session.previous[1].replace(":", ".", 1)
            raise AuthenticationFailed(f"Cannot change principals during re-authentication from {before}: "
                                       f"{principal.replace(':', '.', 1)}")
        again, session.previous = session.previous is not None, None
        session.authenticated = True
        session.exchange = None
        session.principal = principal
        session.lifetime_ms = self.reauth_ms(session.listener, session.mechanism)
        session.expires = time.monotonic() + session.lifetime_ms / 1000 if session.lifetime_ms else None
        log.info("%s %s on %s from %s with %s", "re-authenticated" if again else "authenticated", principal,
                 session.listener, session.client_address, session.mechanism)
