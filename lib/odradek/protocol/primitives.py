"""Kafka's wire primitives for the few messages encoded without kio's entities (the hot path's
Fetch and Produce responses, the follower's Fetch request): the unsigned varint, and the
lengths and strings of classic (int16/int32 lengths) and flexible (compact: unsigned varint of
length + 1, KIP-482) versions, tagged fields, and the two structs KIP-951 adds to both the Fetch
and the Produce response (LeaderIdAndEpoch, NodeEndpoints); and ``FieldReader``, which reads the
same encoding back from the internal topics' records kio has no schema for (``__transaction_state``,
KIP-848's consumer group records)."""

from __future__ import annotations

import struct
from functools import lru_cache

from odradek.errors import ErrorCode, KafkaError

NO_TAGS = b"\0"        # an empty tagged-field section (flexible versions)
_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")
_LEADER = struct.Struct(">iib")    # leader id, leader epoch, no tags
_ONE_BYTE = tuple(bytes((n,)) for n in range(0x80))   # the varints of one byte: lengths and counts, mostly


def uvarint(n: int) -> bytes:
    """Kafka's unsigned varint."""
    if 0 <= n < 0x80:
        return _ONE_BYTE[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def array_length(n: int, flexible: bool) -> bytes:
    return uvarint(n + 1) if flexible else _I32.pack(n)


def string(value: str, flexible: bool) -> bytes:
    raw = value.encode()
    return (uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


@lru_cache(maxsize=4096)
def topic_name(value: str, flexible: bool) -> bytes:
    """``string`` of a topic's name, encoded once: every fetch, request and response, names its topics."""
    return string(value, flexible)


def nullable_string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return b"\0" if flexible else b"\xff\xff"
    return string(value, flexible)


def tagged_fields(fields: list[tuple[int, bytes]]) -> bytes:
    """A tagged-field section: the count, then each (tag, size, data), tags ascending (KIP-482)."""
    return uvarint(len(fields)) + b"".join(uvarint(tag) + uvarint(len(data)) + data for tag, data in fields)


def leader_and_epoch(leader: tuple[int, int]) -> bytes:
    """KIP-951's LeaderIdAndEpoch (a partition's ``current_leader``) with no tags."""
    return _LEADER.pack(leader[0], leader[1], 0)


def node_endpoints(endpoints) -> bytes:
    """KIP-951's NodeEndpoints: a compact array of (node id, host, port, rack)."""
    return b"".join([array_length(len(endpoints), True), *(
        _I32.pack(node) + string(host, True) + _I32.pack(port) + nullable_string(rack, True) + NO_TAGS
        for node, host, port, rack in endpoints)])


class FieldReader:
    """Reads one record's fields in Kafka's generated-message encoding, classic or flexible; a
    read past the end (or a null where none may be) raises CORRUPT_MESSAGE naming ``what``."""

    __slots__ = ("buf", "pos", "flexible", "what")

    def __init__(self, buf: bytes, what: str, flexible: bool = True) -> None:
        self.buf, self.pos, self.flexible, self.what = memoryview(buf), 0, flexible, what

    def _need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.buf):
            raise KafkaError(ErrorCode.corrupt_message, f"{self.what} runs past its end")

    def fixed(self, fmt: struct.Struct) -> int:
        self._need(fmt.size)
        (v,) = fmt.unpack_from(self.buf, self.pos)
        self.pos += fmt.size
        return v

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            self._need(1)
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7

    def length(self, classic: struct.Struct = _I16) -> int:
        """A string, bytes or array length; -1 for null."""
        return self.uvarint() - 1 if self.flexible else self.fixed(classic)

    def raw(self, n: int) -> bytes:
        self._need(n)
        out = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return out

    def nullable_string(self) -> str | None:
        n = self.length()
        return None if n < 0 else self.raw(n).decode()

    def string(self) -> str:
        return self.raw(self.length()).decode()  # a null (-1) fails raw's bounds check

    def tags(self) -> None:
        """Skip a tagged-field section (flexible versions only)."""
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self.raw(self.uvarint())
