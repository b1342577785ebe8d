"""A minimal async Kafka client for broker-to-broker requests (followers -> leaders).

No client library lets a caller set Fetch's ``replica_id``, so followers speak the protocol
themselves over kio's schemas: one TCP connection, one request in flight at a time
(requests are sent and answered in order, which is all a fetcher needs). Frames are
``int32 size`` + header + body; responses are matched by correlation id.

Errors: any socket failure or a mismatched correlation id closes the connection and raises
``ConnectionError``; the caller reconnects. Not thread-safe (one event loop, one caller).
"""

from __future__ import annotations

import asyncio
import io
import struct
from functools import lru_cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

_SIZE = struct.Struct(">i")


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

    def __init__(self, host: str, port: int, *, client_id: str, connect_timeout: float = 5.0) -> None:
        self.host = host
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
                asyncio.open_connection(self.host, self.port, limit=1 << 20), self.connect_timeout)
        except (OSError, asyncio.TimeoutError) as e:
            raise ConnectionError(f"cannot connect to {self.host}:{self.port}: {e}") from e

    async def request(self, api_key: int, version: int, body: Any, *, timeout: float) -> Any:
        """Send one request and wait (at most ``timeout`` s) for its response body."""
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
