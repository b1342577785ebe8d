"""Kafka's framing on the client side of broker-to-broker connections, over kio's schemas.

A request frame is ``int32 size`` + request header + body; a response frame ``int32 size`` +
response header + body, matched by correlation id. ``exchange`` sends one request on a
stream pair and reads its answer (requests are answered in order, one in flight at a time):
what the fetch client (``client``) and the SASL exchange of a new connection
(``connector``) both speak. Stateless; the callers map socket errors to ``ConnectionError``.
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


@lru_cache(maxsize=256)   # a few client ids per broker
def _request_writers(api_key: int, version: int, client_id: str):
    """The body's writer and the request header's bytes before and after its correlation id
    (api key and version; client id and, flexible, the empty tagged fields), written once by
    kio: a header entity built and written per request cost a follower's fetch 8 us."""
    schema = load_request_schema(api_key, version)
    header = io.BytesIO()
    entity_writer(schema.__header_schema__)(header, schema.__header_schema__(
        request_api_key=api_key, request_api_version=version, correlation_id=0, client_id=client_id))
    encoded = header.getvalue()
    return entity_writer(schema), encoded[:4], encoded[8:]


@lru_cache(maxsize=None)
def _response_readers(api_key: int, version: int):
    schema = load_response_schema(api_key, version)
    return entity_reader(schema.__header_schema__), entity_reader(schema)


def encode_request(api_key: int, version: int, correlation_id: int, client_id: str, body: Any) -> bytes:
    """Size prefix + request header + body; a body with an ``encode_body()`` method (the
    follower's Fetch, ``fetch_request``) writes itself."""
    write_body, head, tail = _request_writers(api_key, version, client_id)
    encode_body = getattr(body, "encode_body", None)
    if encode_body is not None:   # one join, no buffer copied twice
        encoded = encode_body()
        return b"".join((_SIZE.pack(len(head) + 4 + len(tail) + len(encoded)), head, _SIZE.pack(correlation_id),
                         tail, encoded))
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0" + head + _SIZE.pack(correlation_id) + tail)
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


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = _SIZE.unpack(await reader.readexactly(4))
    if size < 0:
        raise OSError(f"negative frame size {size}")
    return await reader.readexactly(size)


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, api_key: int, version: int,
                   body: Any, *, correlation_id: int, client_id: str, timeout: float) -> Any:
    """Send one request and return its response body (at most ``timeout`` s). Raises OSError,
    ``asyncio.IncompleteReadError`` or ``asyncio.TimeoutError`` as the socket fails, and
    ConnectionError for an answer to another correlation id."""
    writer.write(encode_request(api_key, version, correlation_id, client_id, body))
    await writer.drain()
    async with asyncio.timeout(timeout):  # not wait_for: its task per call cost a loop iteration a fetch
        frame = await read_frame(reader)
    got, response = decode_response(api_key, version, frame)
    if got != correlation_id:
        raise ConnectionError(f"correlation id {got}, expected {correlation_id}")
    return response
