"""The Fetch response (v4-v16, the versions served) encoded straight from the read's
``PartitionRead`` values, each partition's records a ``FileRegion`` sent by sendfile.

Building kio's entities (a frozen dataclass per partition, topic and aborted transaction),
writing them with kio's writer and then cutting the bytes at a marker per partition to splice
the file regions in was most of what a follower's woken fetch cost the leader in the
single-record acks=all round trip (py-spy, issue 33); this writes the bytes once. They are
exactly kio's for every version (a unit test compares them).

Fields by version (Kafka's FetchResponse.json): v4 throttle time, per partition index, error,
high watermark, last stable offset, aborted transactions (nullable), records; v5 adds the log
start offset; v7 the response's error code and session id; v11 the preferred read replica;
v12 is flexible (compact strings, arrays and bytes, tagged fields: a partition's
``diverging_epoch`` is tag 0, written only when the log diverged, KIP-320); v13 names topics by
id (a UUID's 16 bytes, KIP-516); v16 adds a partition's ``current_leader`` (tag 1) and the
response's ``node_endpoints`` (tag 0), written only when there is one (KIP-951).
"""

from __future__ import annotations

import struct
from typing import Iterable

from odradek.errors import ErrorCode
from odradek.protocol.connection import FileRegion, Piece
from odradek.protocol.primitives import (NO_TAGS, array_length, leader_and_epoch, node_endpoints, tagged_fields,
                                        topic_name, uvarint)

FLEXIBLE_FROM = 12      # Fetch versions with tagged fields (flexible headers)

_I32, _I64 = struct.Struct(">i"), struct.Struct(">q")
_TOP = struct.Struct(">ihi")                   # throttle, error, session id (v7+)
_PARTITION = struct.Struct(">ihqq")            # index, error, high watermark, last stable offset
_ABORTED = struct.Struct(">qq")                # producer id, first offset
_DIVERGING = struct.Struct(">iqb")             # epoch, end offset, no tags
# a partition's fields up to its records, aborted transactions null (read_uncommitted, followers),
# in one pack: + log start offset (v5+), the null array, the preferred replica (v11+), the
# records' length (int32 before v12, a varint after these fields from v12)
_NO_ABORTED_V4 = struct.Struct(">ihqqii")
_NO_ABORTED_V5 = struct.Struct(">ihqqqii")
_NO_ABORTED_V11 = struct.Struct(">ihqqqiii")
_NO_ABORTED_FLEXIBLE = struct.Struct(">ihqqqbi")


def encode_fetch_response(version: int, correlation_id: int, topics: Iterable, throttle_ms: int = 0,
                          session_id: int = 0, error: ErrorCode = ErrorCode.none, hints=None) -> list[Piece]:
    """Size prefix, header and body as pieces: bytes, and a FileRegion per partition with records.
    ``topics``: (name, or from v13 the topic's uuid.UUID, [PartitionRead]) pairs; ``hints``
    (``leader_hints.Hints``, v16) the leaders of the partitions that name one."""
    flexible = version >= FLEXIBLE_FROM
    topics = topics if isinstance(topics, list) else list(topics)
    run: list = [_I32.pack(correlation_id) + NO_TAGS if flexible else _I32.pack(correlation_id),
                 _TOP.pack(throttle_ms, error, session_id) if version >= 7 else _I32.pack(throttle_ms),
                 array_length(len(topics), flexible)]
    pieces: list[Piece] = []   # the bytes before each file region joined once, then the region
    for key, parts in topics:
        run += (topic_name(key, flexible) if isinstance(key, str) else key.bytes, array_length(len(parts), flexible))
        for part in parts:
            records = part.records
            size = records.size if records is not None else 0
            run.append(_fields(part, version, flexible, size))
            if size:
                if records.fd >= 0:
                    pieces += (b"".join(run), FileRegion(records.fd, records.position, size))
                    run = []
                else:   # read from the object store (remote_fetch): bytes
                    run.append(records.data)
            if flexible:
                run.append(_tags(part, hints.leader(key, part.partition) if hints else None))
        if flexible:
            run.append(NO_TAGS)
    if flexible:
        endpoints = hints.node_endpoints() if hints else ()
        run.append(tagged_fields([(0, node_endpoints(endpoints))]) if endpoints else NO_TAGS)
    pieces.append(b"".join(run))
    total = 0
    for piece in pieces:
        total += piece.size if type(piece) is FileRegion else len(piece)
    return [_I32.pack(total), *pieces]


def _fields(part, version: int, flexible: bool, size: int) -> bytes:
    """A partition's fields before its records, the records' length included."""
    aborted = part.aborted
    if aborted is None:   # the usual answer: one pack (a list of pieces per partition cost a follower's fetch 2 us)
        if flexible:
            return _NO_ABORTED_FLEXIBLE.pack(part.partition, part.error, part.high_watermark, part.last_stable_offset,
                                             part.log_start_offset, 0, part.preferred_replica) + uvarint(size + 1)
        if version >= 11:
            return _NO_ABORTED_V11.pack(part.partition, part.error, part.high_watermark, part.last_stable_offset,
                                        part.log_start_offset, -1, part.preferred_replica, size)
        if version >= 5:
            return _NO_ABORTED_V5.pack(part.partition, part.error, part.high_watermark, part.last_stable_offset,
                                       part.log_start_offset, -1, size)
        return _NO_ABORTED_V4.pack(part.partition, part.error, part.high_watermark, part.last_stable_offset, -1, size)
    out = [_PARTITION.pack(part.partition, part.error, part.high_watermark, part.last_stable_offset)]
    if version >= 5:
        out.append(_I64.pack(part.log_start_offset))
    out.append(array_length(len(aborted), flexible))
    out += [_ABORTED.pack(pid, first) + (NO_TAGS if flexible else b"") for pid, first in aborted]
    if version >= 11:
        out.append(_I32.pack(part.preferred_replica))
    out.append(uvarint(size + 1) if flexible else _I32.pack(size))
    return b"".join(out)


def _tags(part, leader: tuple[int, int] | None) -> bytes:
    """A partition's tagged fields (flexible versions): the diverging epoch (KIP-320), its leader (KIP-951)."""
    diverging = part.diverging
    if diverging is None and leader is None:
        return NO_TAGS
    tags = []
    if diverging is not None:
        tags.append((0, _DIVERGING.pack(diverging[0], diverging[1], 0)))
    if leader is not None:
        tags.append((1, leader_and_epoch(leader)))
    return tagged_fields(tags)
