"""Request decoding and response encoding over kio's generated schemas.

kio holds every request/response schema of Apache Kafka; its readers are a native
extension. Looking a schema up costs more than parsing a small request, so readers,
writers and schema modules are cached per (api key, version).

Handlers are written once for all versions of an API: ``Schemas(api_key, version)`` hands
out the response classes of that version, and ``make`` drops the keyword arguments a version
does not have (e.g. ``rack`` before Metadata v1), the way Kafka's generated code ignores
fields outside a version's range.
"""

from __future__ import annotations

import dataclasses
import io
import struct
from functools import lru_cache
from types import ModuleType
from typing import Any, NamedTuple

from kio.index import load_payload_module, load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.legacy_schemas import MODULES
from odradek.protocol.produce_request import read_produce_request

_HEADER_PREFIX = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_PREFIX = struct.Struct(">ii")          # a response's size (filled in last) and correlation id
_SIZE = struct.Struct(">i")
PRODUCE_VIEWS_FROM = 64 * 1024


class RequestHeader(NamedTuple):   # one per request: a NamedTuple is built in a third of a frozen dataclass's time
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


class FrameError(Exception):
    """The frame cannot be parsed: the connection must be closed (as Kafka does)."""


def peek_header(frame: memoryview) -> tuple[int, int, int]:
    """api_key, api_version, correlation_id: readable even for versions we don't know."""
    if len(frame) < _HEADER_PREFIX.size:
        raise FrameError(f"frame of {len(frame)} bytes is shorter than a request header")
    return _HEADER_PREFIX.unpack_from(frame, 0)


@lru_cache(maxsize=None)
def _request_readers(api_key: int, version: int):
    legacy = MODULES.get((api_key, version))
    schema = legacy[0] if legacy else load_request_schema(api_key, version)
    return entity_reader(schema.__header_schema__), entity_reader(schema)


@lru_cache(maxsize=None)
def _response_writers(api_key: int, version: int):
    """The body's writer and the response header's bytes after its correlation id (its first
    field in every header version: nothing in v0, the empty tagged fields in v1), written once
    by kio: a header entity built and written per response cost 3 us."""
    legacy = MODULES.get((api_key, version))
    schema = legacy[1] if legacy else load_response_schema(api_key, version)
    header = io.BytesIO()
    entity_writer(schema.__header_schema__)(header, schema.__header_schema__(correlation_id=0))
    return entity_writer(schema), header.getvalue()[4:]


def decode_request(frame: memoryview) -> tuple[RequestHeader, Any]:
    """Parse header and body of a request whose (api key, version) is supported. A Produce
    request of ``PRODUCE_VIEWS_FROM`` bytes or more is read by ``produce_request``: its records
    are views of ``frame``, not copies (a smaller one is read by kio, in a fifth of the time:
    the copy costs less than the Python reader below about 100 KiB)."""
    api_key, version, _ = peek_header(frame)
    if api_key == ApiKey.PRODUCE and len(frame) >= PRODUCE_VIEWS_FROM:
        return _decode_produce(frame, version)
    read_header, read_body = _request_readers(api_key, version)
    try:
        header, size = read_header(frame, 0)
        body, _ = read_body(frame, size)
    except Exception as e:  # kio raises several kinds on malformed input
        raise FrameError(f"malformed {api_key} v{version} request: {e}") from e
    return RequestHeader(api_key, version, header.correlation_id, header.client_id), body


def _decode_produce(frame: memoryview, version: int) -> tuple[RequestHeader, Any]:
    try:
        api_key, version, correlation_id, client_id, body = read_produce_request(frame)
    except (ValueError, IndexError, struct.error) as e:   # UnicodeDecodeError is a ValueError
        raise FrameError(f"malformed {ApiKey.PRODUCE} v{version} request: {e}") from e
    return RequestHeader(api_key, version, correlation_id, client_id), body


def encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> bytearray:
    """Size prefix + response header + body, ready for the socket. A body with an
    ``encode_body()`` method (parts cached already encoded) writes itself."""
    write_body, header_tail = _response_writers(api_key, version)
    encode_body = getattr(body, "encode_body", None)   # a body holding pre-encoded parts
    if encode_body is not None:   # no buffer object: the pieces joined once
        out = bytearray(_PREFIX.pack(0, correlation_id))
        out += header_tail
        out += encode_body()
    else:
        buf = io.BytesIO()
        buf.write(_PREFIX.pack(0, correlation_id) + header_tail)
        write_body(buf, body)
        out = bytearray(buf.getbuffer())
    _SIZE.pack_into(out, 0, len(out) - 4)
    return out


@lru_cache(maxsize=None)
def _fields(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def make(cls: type, **kwargs: Any) -> Any:
    """Build a kio entity, ignoring fields this version of the schema does not have."""
    names = _fields(cls)
    return cls(**{k: v for k, v in kwargs.items() if k in names})


class Schemas:
    """The response (or request) classes of one API version, by name."""

    __slots__ = ("module",)

    def __init__(self, api_key: int, version: int, kind: EntityType = EntityType.response) -> None:
        self.module: ModuleType = _module(api_key, version, kind)

    def __getattr__(self, name: str) -> type:
        return getattr(self.module, name)


@lru_cache(maxsize=None)
def _module(api_key: int, version: int, kind: EntityType) -> ModuleType:
    legacy = MODULES.get((api_key, version))
    return legacy[2] if legacy else load_payload_module(api_key, version, kind)
