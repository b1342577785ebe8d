"""How a broker opens an authenticated connection to another broker's Kafka listener: the
inter-broker listener's TLS and SASL, in one place (followers' fetchers and the transaction
marker channels connect through it; ``client.KafkaClient`` speaks on what it opens).

``ClientSecurity`` names the listener and carries its TLS context and SASL credentials;
``open`` connects (wrapped in TLS when the listener is secured) and, with a SASL mechanism,
authenticates with SaslHandshake v1 + SaslAuthenticate v2 (PLAIN, or SCRAM through
``scramp``'s client) before handing the streams over. Any failure closes the connection and
raises ``ConnectionError``; the caller reconnects. Immutable; event-loop thread only.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
from dataclasses import dataclass
from typing import Any

from kio.static.constants import EntityType
from scramp import ScramClient, ScramException

from odradek.broker.replication.wire import exchange
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make

_SASL_TIMEOUT_S = 10.0
_HANDSHAKE_VERSION, _AUTHENTICATE_VERSION = 1, 2

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How a broker reaches others: on which listener, with TLS and SASL credentials if any."""
    listener: str = "PLAINTEXT"
    ssl: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = ""

    async def open(self, host: str, port: int, *, client_id: str, timeout: float) -> Streams:
        """A connection to ``host:port``, authenticated when the listener asks for SASL."""
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, limit=1 << 20, ssl=self.ssl,
                                        server_hostname=host if self.ssl else None), timeout)
        except (OSError, asyncio.TimeoutError) as e:
            raise ConnectionError(f"cannot connect to {host}:{port}: {e}") from e
        if self.mechanism:
            try:
                await _Sasl(self, reader, writer, f"{host}:{port}", client_id).authenticate()
            except BaseException:
                writer.close()
                raise
        return reader, writer


class _Sasl:
    """One connection's SASL exchange, its requests numbered from 1."""

    def __init__(self, security: ClientSecurity, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 peer: str, client_id: str) -> None:
        self.security, self.reader, self.writer, self.peer, self.client_id = security, reader, writer, peer, client_id
        self._correlation = itertools.count(1)

    async def _call(self, api_key: ApiKey, version: int, body: Any) -> Any:
        try:
            return await exchange(self.reader, self.writer, api_key, version, body, correlation_id=next(self._correlation),
                                  client_id=self.client_id, timeout=_SASL_TIMEOUT_S)
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError) as e:
            raise ConnectionError(f"SASL with {self.peer} failed: {e!r}") from e

    async def authenticate(self) -> None:
        sec = self.security
        hs = Schemas(ApiKey.SASL_HANDSHAKE, _HANDSHAKE_VERSION, EntityType.request)
        answer = await self._call(ApiKey.SASL_HANDSHAKE, _HANDSHAKE_VERSION,
                                  make(hs.SaslHandshakeRequest, mechanism=sec.mechanism))
        if answer.error_code != 0:
            raise ConnectionError(f"SASL handshake with {self.peer}: error {answer.error_code}")
        if sec.mechanism == "PLAIN":
            await self._exchange(b"\0" + sec.username.encode() + b"\0" + sec.password.encode())
            return
        client = ScramClient([sec.mechanism], sec.username, sec.password)
        try:
            client.set_server_first((await self._exchange(client.get_client_first().encode())).decode())
            client.set_server_final((await self._exchange(client.get_client_final().encode())).decode())
        except ScramException as e:
            raise ConnectionError(f"SCRAM with {self.peer} failed: {e}") from e

    async def _exchange(self, token: bytes) -> bytes:
        auth = Schemas(ApiKey.SASL_AUTHENTICATE, _AUTHENTICATE_VERSION, EntityType.request)
        reply = await self._call(ApiKey.SASL_AUTHENTICATE, _AUTHENTICATE_VERSION,
                                 make(auth.SaslAuthenticateRequest, auth_bytes=token))
        if reply.error_code != 0:
            raise ConnectionError(f"SASL authentication with {self.peer} failed: {reply.error_message}")
        return reply.auth_bytes
