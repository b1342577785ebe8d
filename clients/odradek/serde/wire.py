"""Confluent's wire format: magic byte 0, the schema id as a 4-byte big-endian integer, then the
payload; a Protobuf payload opens with the message indexes (which message of the schema's file:
a zig-zag varint count, then as many zig-zag varint indexes, the path through nested messages;
the count 0 alone stands for ``[0]``, the file's first message)."""

from __future__ import annotations

import struct

MAGIC = 0
HEADER = struct.Struct(">bI")


class WireFormatError(ValueError):
    """Bytes that are not a registry-framed record."""


def frame(schema_id: int, payload: bytes) -> bytes:
    return HEADER.pack(MAGIC, schema_id) + payload


def unframe(data: bytes) -> tuple[int, memoryview]:
    """(schema id, payload)."""
    if len(data) < HEADER.size or data[0] != MAGIC:
        raise WireFormatError(f"not in the Confluent wire format (magic byte 0, 4-byte schema id): "
                              f"{bytes(data[:8]).hex()}...")
    return HEADER.unpack_from(data)[1], memoryview(data)[HEADER.size:]


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def _write_varint(n: int, out: bytearray) -> None:
    n = _zigzag(n)
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _read_varint(data: memoryview, at: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if at >= len(data) or shift > 63:
            raise WireFormatError("truncated or overlong Protobuf message indexes")
        byte = data[at]
        result |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at
        shift += 7


def message_indexes(indexes: list[int]) -> bytes:
    if indexes == [0]:
        return b"\x00"
    out = bytearray()
    _write_varint(len(indexes), out)
    for i in indexes:
        _write_varint(i, out)
    return bytes(out)


def read_message_indexes(payload: memoryview) -> tuple[list[int], memoryview]:
    """(indexes, the message's bytes)."""
    count, at = _read_varint(payload, 0)
    if count == 0:
        return [0], payload[at:]
    indexes = []
    for _ in range(count):
        index, at = _read_varint(payload, at)
        indexes.append(index)
    return indexes, payload[at:]
