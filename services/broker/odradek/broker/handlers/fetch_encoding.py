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
from odradek.protocol.primitives import (NO_TAGS, array_length, leader_and_epoch, node_endpoints, string,
                                        tagged_fields, uvarint)

FLEXIBLE_FROM = 12      # Fetch versions with tagged fields (flexible headers)

_I32 = struct.Struct(">i")
_TOP = struct.Struct(">ihi")                   # throttle, error, session id (v7+)
_PARTITION = struct.Struct(">ihqq")            # index, error, high watermark, last stable offset
_ABORTED = struct.Struct(">qq")                # producer id, first offset
_DIVERGING = struct.Struct(">iqb")             # epoch, end offset, no tags


def encode_fetch_response(version: int, correlation_id: int, topics: Iterable, throttle_ms: int = 0,
                          session_id: int = 0, error: ErrorCode = ErrorCode.none, hints=None) -> list[Piece]:
    """Size prefix, header and body as pieces: bytes, and a FileRegion per partition with records.
    ``topics``: (name, or from v13 the topic's uuid.UUID, [PartitionRead]) pairs; ``hints``
    (``leader_hints.Hints``, v16) the leaders of the partitions that name one."""
    flexible = version >= FLEXIBLE_FROM
    out: list = [_I32.pack(correlation_id) + (NO_TAGS if flexible else b"")]
    out.append(_TOP.pack(throttle_ms, error, session_id) if version >= 7 else _I32.pack(throttle_ms))
    topics = list(topics)
    out.append(array_length(len(topics), flexible))
    for key, parts in topics:
        out += (string(key, flexible) if isinstance(key, str) else key.bytes, array_length(len(parts), flexible))
        for part in parts:
            _partition(out, part, version, flexible, hints.leader(key, part.partition) if hints else None)
        if flexible:
            out.append(NO_TAGS)
    if flexible:
        endpoints = hints.node_endpoints() if hints else ()
        out.append(tagged_fields([(0, node_endpoints(endpoints))] if endpoints else []))
    return _pieces(out)


def _partition(out: list, part, version: int, flexible: bool, leader: tuple[int, int] | None) -> None:
    out.append(_PARTITION.pack(part.partition, part.error, part.high_watermark, part.last_stable_offset))
    if version >= 5:
        out.append(struct.pack(">q", part.log_start_offset))
    aborted = part.aborted
    if aborted is None:
        out.append(b"\0" if flexible else b"\xff\xff\xff\xff")
    else:
        out.append(array_length(len(aborted), flexible))
        out += [_ABORTED.pack(pid, first) + (NO_TAGS if flexible else b"") for pid, first in aborted]
    if version >= 11:
        out.append(_I32.pack(part.preferred_replica))
    records = part.records
    size = records.size if records is not None else 0
    out.append(uvarint(size + 1) if flexible else _I32.pack(size))
    if size:
        out.append(FileRegion(records.fd, records.position, size) if records.fd >= 0 else records.data)  # remote: bytes
    if flexible:
        diverging, tags = part.diverging, []
        if diverging is not None:
            tags.append((0, _DIVERGING.pack(diverging[0], diverging[1], 0)))
        if leader is not None:
            tags.append((1, leader_and_epoch(leader)))
        out.append(tagged_fields(tags) if tags else NO_TAGS)



def _pieces(out: list) -> list[Piece]:
    """Consecutive bytes joined, file regions kept apart; the size prefix in front."""
    pieces: list[Piece] = []
    run: list[bytes] = []
    size = 0
    for item in out:
        if isinstance(item, FileRegion):
            if run:
                pieces.append(b"".join(run))
                run = []
            pieces.append(item)
            size += item.size
        else:
            run.append(item)
            size += len(item)
    if run:
        pieces.append(b"".join(run))
    return [_I32.pack(size), *pieces]
