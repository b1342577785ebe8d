"""A minimal async Kafka client for broker-to-broker requests (followers -> leaders).

No client library lets a caller set Fetch's ``replica_id``, so followers speak the protocol
themselves over kio's schemas: one TCP connection, one request in flight at a time
(requests are sent and answered in order, which is all a fetcher needs). Frames are
``int32 size`` + header + body; responses are matched by correlation id.

Toward a TLS or SASL inter-broker listener (``ClientSecurity``), the connection is wrapped in
TLS and authenticates with SaslHandshake v1 + SaslAuthenticate (PLAIN, or SCRAM through
``scramp``'s client) before the first request.

Errors: any socket failure or a mismatched correlation id closes the connection and raises
``ConnectionError``; the caller reconnects. Not thread-safe (one event loop, one caller).
"""

from __future__ import annotations

import asyncio
import io
import ssl
import struct
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from scramp import ScramClient, ScramException

from odradek.protocol.codec import Schemas, make

_SIZE = struct.Struct(">i")
_SASL_HANDSHAKE, _SASL_AUTHENTICATE = 17, 36
_SASL_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How a follower reaches leaders: on which listener, with TLS and SASL credentials if any."""
    listener: str = "PLAINTEXT"
    ssl: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = ""


@lru_cache(maxsize=None)
def _request_writers(api_key: int, version: int):
    schema = load_request_schema(api_key, version)
    return entity_writer(schema.__header_schema__), entity_writer(schema), schema.__header_schema__


@lru_cache(maxsize=None)
def _response_readers(api_key: int, version: int):
    schema = load_response_schema(api_key, version)
    return entity_reader(schema.__header_schema__), entity_reader(schema)


def encode_request(api_key: int, version: int, correlation_id: int, client_id: str, body: Any) -> bytes:
    write_header, write_body, header_schema = _request_writers(api_key, version)
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    write_header(buf, header_schema(request_api_key=api_key, request_api_version=version,
                                    correlation_id=correlation_id, client_id=client_id))
    write_body(buf, body)
    out = bytearray(buf.getbuffer())
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, body) of one response frame (without its size prefix)."""
    read_header, read_body = _response_readers(api_key, version)
    view = memoryview(frame).toreadonly()
    header, size = read_header(view, 0)
    body, _ = read_body(view, size)
    return header.correlation_id, body


class KafkaClient:
    """One connection to one broker's Kafka listener."""

    def __init__(self, host: str, port: int, *, client_id: str, connect_timeout: float = 5.0,
                 security: ClientSecurity | None = None) -> None:
        self.host = host
        self.security = security or ClientSecurity()
        self.port = port
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = 0

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def connect(self) -> None:
        if self.connected:
            return
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, limit=1 << 20, ssl=self.security.ssl,
                                        server_hostname=self.host if self.security.ssl else None),
                self.connect_timeout)
        except (OSError, asyncio.TimeoutError) as e:
            raise ConnectionError(f"cannot connect to {self.host}:{self.port}: {e}") from e
        if self.security.mechanism:
            await self._authenticate()

    async def _authenticate(self) -> None:
        sec = self.security
        hs = Schemas(_SASL_HANDSHAKE, 1, EntityType.request)
        answer = await self.request(_SASL_HANDSHAKE, 1, make(hs.SaslHandshakeRequest, mechanism=sec.mechanism),
                                    timeout=_SASL_TIMEOUT_S)
        if answer.error_code != 0:
            self.close()
            raise ConnectionError(f"SASL handshake with {self.host}:{self.port}: error {answer.error_code}")
        auth = Schemas(_SASL_AUTHENTICATE, 2, EntityType.request)

        async def exchange(token: bytes) -> bytes:
            reply = await self.request(_SASL_AUTHENTICATE, 2, make(auth.SaslAuthenticateRequest, auth_bytes=token),
                                       timeout=_SASL_TIMEOUT_S)
            if reply.error_code != 0:
                self.close()
                raise ConnectionError(f"SASL authentication with {self.host}:{self.port} failed: "
                                      f"{reply.error_message}")
            return reply.auth_bytes

        if sec.mechanism == "PLAIN":
            await exchange(b"\0" + sec.username.encode() + b"\0" + sec.password.encode())
            return
        client = ScramClient([sec.mechanism], sec.username, sec.password)
        try:
            client.set_server_first((await exchange(client.get_client_first().encode())).decode())
            client.set_server_final((await exchange(client.get_client_final().encode())).decode())
        except ScramException as e:
            self.close()
            raise ConnectionError(f"SCRAM with {self.host}:{self.port} failed: {e}") from e

    async def request(self, api_key: int, version: int, body: Any, *, timeout: float) -> Any:
        """Send one request and wait (at most ``timeout`` s) for its response body."""
        if not self.connected:
            await self.connect()
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        correlation_id = self._correlation
        try:
            self._writer.write(encode_request(api_key, version, correlation_id, self.client_id, body))
            await self._writer.drain()
            frame = await asyncio.wait_for(self._read_frame(), timeout)
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError) as e:
            self.close()
            raise ConnectionError(f"request {api_key} v{version} to {self.host}:{self.port} failed: {e!r}") from e
        got, response = decode_response(api_key, version, frame)
        if got != correlation_id:
            self.close()
            raise ConnectionError(f"correlation id {got} from {self.host}:{self.port}, expected {correlation_id}")
        return response

    async def _read_frame(self) -> bytes:
        (size,) = _SIZE.unpack(await self._reader.readexactly(4))
        if size < 0:
            raise OSError(f"negative frame size {size}")
        return await self._reader.readexactly(size)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None
