"""The Produce request (v3-v11, the versions served) read without kio: each partition's records
are a read-only ``memoryview`` of the request's frame, not a copy (kio's reader copies them
into ``bytes``: a tenth of a 256 KiB produce's libc time, issue 33). ``codec.decode_request``
reads Produce frames of ``PRODUCE_VIEWS_FROM`` bytes or more here (below that kio's native
reader, copy included, costs less). The view keeps the frame alive as long as anything holds
it, and the connection gives each frame its own buffer, never reused: the records a handler
holds across an await (a transaction's verification) are still the request's when written.

The value types carry kio's attribute names (``transactional_id``, ``acks``, ``timeout`` as a
timedelta, ``topic_data``, ``partition_data``, ``index``, ``records``), so the handler serves
kio's entities as well (tests build those). A unit test compares every field with kio's
reading for every version.

Fields (Kafka's ProduceRequest.json): request header v1 (api key, version, correlation id,
client id: an int16-length nullable string) or v2 from v9 (the same and tagged fields); then
transactional id (nullable string), acks (int16), timeout ms (int32), topics [name,
partitions [index int32, records (nullable bytes)]]. v9+ are flexible: compact strings,
arrays and bytes (unsigned varint of length + 1) and a tagged-field section after each
partition, topic and the request (none is defined: all are skipped). As in Kafka's generated
readers a negative length is null, which only the transactional id, client id and records may be.
"""

from __future__ import annotations

import datetime
import struct
from typing import NamedTuple

FLEXIBLE_FROM = 9

_HEADER = struct.Struct(">hhih")      # api key, version, correlation id, client id length
_ACKS_TIMEOUT = struct.Struct(">hi")
_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")
_new = tuple.__new__   # a NamedTuple without its __new__'s argument handling: a third of the time


class PartitionProduceData(NamedTuple):
    index: int
    records: memoryview | None


class TopicProduceData(NamedTuple):
    name: str
    partition_data: tuple[PartitionProduceData, ...]


class ProduceRequest(NamedTuple):
    transactional_id: str | None
    acks: int
    timeout: datetime.timedelta
    topic_data: tuple[TopicProduceData, ...]


def read_produce_request(frame: memoryview) -> tuple[int, int, int, str | None, ProduceRequest]:
    """(api key, version, correlation id, client id, the request) of a Produce frame (size prefix
    excluded). Raises ValueError, IndexError, struct.error or UnicodeDecodeError on a malformed
    frame. Flat code with the usual one-byte lengths and empty tag sections inline: a reader
    object with a method per field took 4 times kio's time for a small request."""
    api_key, version, correlation_id, n = _HEADER.unpack_from(frame, 0)
    flexible = version >= FLEXIBLE_FROM
    client_id, at = _string(frame, _HEADER.size, n, nullable=True)
    if flexible:
        at = _skip_tags(frame, at) if frame[at] else at + 1       # request header v2
    n, at = _length(frame, at, flexible, _I16)
    transactional_id, at = _string(frame, at, n, nullable=True)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(frame, at)
    count, at = _length(frame, at + _ACKS_TIMEOUT.size, flexible, _I32)
    topics = []
    for _ in range(_array(count)):
        n, at = _length(frame, at, flexible, _I16)
        name, at = _string(frame, at, n)
        count, at = _length(frame, at, flexible, _I32)
        partitions = []
        for _ in range(_array(count)):
            (index,) = _I32.unpack_from(frame, at)
            n, at = _length(frame, at + 4, flexible, _I32)
            records = None
            if n >= 0:
                records, at = _view(frame, at, n), at + n
            if flexible:
                at = _skip_tags(frame, at) if frame[at] else at + 1
            partitions.append(_new(PartitionProduceData, (index, records)))
        if flexible:
            at = _skip_tags(frame, at) if frame[at] else at + 1
        topics.append(_new(TopicProduceData, (name, tuple(partitions))))
    if flexible and frame[at]:
        _skip_tags(frame, at)
    return api_key, version, correlation_id, client_id, _new(ProduceRequest, (
        transactional_id, acks, datetime.timedelta(milliseconds=timeout_ms), tuple(topics)))


def _uvarint(frame: memoryview, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = frame[at]           # IndexError past the end
        at += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, at
        shift += 7
        if shift > 28:
            raise ValueError("an unsigned varint longer than 5 bytes")


def _length(frame: memoryview, at: int, flexible: bool, classic: struct.Struct) -> tuple[int, int]:
    """A string, bytes or array length (-1: null) and the position after it."""
    if not flexible:
        return classic.unpack_from(frame, at)[0], at + classic.size
    b = frame[at]
    if b < 0x80:
        return b - 1, at + 1
    n, at = _uvarint(frame, at)
    return n - 1, at


def _view(frame: memoryview, at: int, n: int) -> memoryview:
    if n < 0 or at + n > len(frame):
        raise ValueError(f"a field of {n} bytes at {at} runs past the frame's end ({len(frame)})")
    return frame[at:at + n]


def _string(frame: memoryview, at: int, n: int, nullable: bool = False) -> tuple[str | None, int]:
    if n < 0:
        if nullable:
            return None, at
        raise ValueError("a null where a string is required")
    return str(_view(frame, at, n), "utf-8"), at + n


def _array(count: int) -> int:
    if count < 0:
        raise ValueError("a null where an array is required")
    return count


def _skip_tags(frame: memoryview, at: int) -> int:
    """The position after a tagged-field section (none is defined for Produce: all skipped)."""
    count, at = _uvarint(frame, at)
    for _ in range(count):
        _, at = _uvarint(frame, at)
        size, at = _uvarint(frame, at)
        _view(frame, at, size)
        at += size
    return at
