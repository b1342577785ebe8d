"""Responses whose record bytes are sent from files (zero copy), with schemas from kio.

kio encodes the whole response; each partition's ``records`` is given as a unique 16-byte
marker. The encoded bytes are then cut at each marker and the marker (with its length
prefix) is replaced by the real length prefix and a ``FileRegion`` that the connection
sends with ``sendfile``. The schema stays kio's; only the records field is spliced.
"""

from __future__ import annotations

import os
import struct
from typing import Any

from odradek.protocol.codec import encode_response
from odradek.protocol.connection import FileRegion, Piece
from odradek.protocol.primitives import uvarint

_NONCE = os.urandom(8)
_MARKER_LEN = 16


def marker(index: int) -> bytes:
    return _NONCE + struct.pack(">Q", index)


def _length_prefix(size: int, flexible: bool) -> bytes:
    return uvarint(size + 1) if flexible else struct.pack(">i", size)


def encode_with_regions(api_key: int, version: int, correlation_id: int, body: Any,
                        regions: list[FileRegion], *, flexible: bool) -> list[Piece]:
    """Encode ``body`` (whose records fields are ``marker(i)`` for ``regions[i]``) as pieces."""
    encoded = encode_response(api_key, version, correlation_id, body)
    if not regions:
        return [encoded]
    view = memoryview(encoded)
    marker_prefix = len(_length_prefix(_MARKER_LEN, flexible))
    pieces: list[Piece] = []
    position = 4
    for index, region in enumerate(regions):
        at = encoded.find(marker(index), position)
        if at < 0:
            raise AssertionError("records marker missing from the encoded response")
        pieces += [view[position:at - marker_prefix], _length_prefix(region.size, flexible), region]
        position = at + _MARKER_LEN
    pieces.append(view[position:])
    size = sum(p.size if isinstance(p, FileRegion) else len(p) for p in pieces)
    return [struct.pack(">i", size), *pieces]
