"""The Produce response (v3-v11, the versions served) as small value types that write their own
bytes (``encode_body``, which ``codec.encode_response`` calls), without kio's entities: building
a frozen dataclass per partition and topic and walking them with kio's writer was a tenth of
the leader's Python time for an acks=all single record (py-spy, issue 33). The attribute names
are kio's (``responses``, ``partition_responses``, ``error_code``, ...), and the bytes are
exactly kio's for every version (a unit test compares them).

Fields by version (Kafka's ProduceResponse.json): per partition index, error, base offset, log
append time (-1 under CreateTime); v5 adds the log start offset; v8 the record errors (the
records a batch was refused for, with their index in the batch: a record without a key on a
compacted topic) and the error message; then the throttle
time; v9 is flexible (compact strings and arrays, empty tagged fields); v10 adds a partition's
``current_leader`` (tag 0) and the response's ``node_endpoints`` (tag 0), written only when there
is one (KIP-951); v11 has the same fields (it only allows TRANSACTION_ABORTABLE).
"""

from __future__ import annotations

import datetime
import struct
from dataclasses import dataclass
from typing import NamedTuple

from odradek.errors import ErrorCode
from odradek.protocol.primitives import (NO_TAGS, array_length, leader_and_epoch, node_endpoints, nullable_string,
                                        string, tagged_fields)

FLEXIBLE_FROM = 9
HINTS_FROM = 10     # KIP-951's current_leader and node_endpoints

_PARTITION = struct.Struct(">ihqq")   # index, error, base offset, log append time
_I32, _I64 = struct.Struct(">i"), struct.Struct(">q")
_MS = datetime.timedelta(milliseconds=1)


class PartitionProduceResponse(NamedTuple):
    index: int
    error_code: ErrorCode
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    current_leader: tuple[int, int] | None = None    # (leader id, epoch), v10+
    record_errors: tuple = ()                        # RecordError (batch index, message)s, v8+


class TopicProduceResponse(NamedTuple):
    name: str
    partition_responses: tuple[PartitionProduceResponse, ...]


@dataclass(frozen=True, slots=True)
class ProduceResponse:
    """``throttle_time`` as kio's (a timedelta), so that the request quota can raise it."""

    version: int
    responses: tuple[TopicProduceResponse, ...]
    throttle_time: datetime.timedelta = datetime.timedelta(0)
    node_endpoints: tuple = ()    # (node id, host, port, rack) of the leaders named, v10+

    def encode_body(self) -> bytes:
        version, flexible = self.version, self.version >= FLEXIBLE_FROM
        out = [array_length(len(self.responses), flexible)]
        for topic in self.responses:
            out += (string(topic.name, flexible), array_length(len(topic.partition_responses), flexible))
            for p in topic.partition_responses:
                out.append(_PARTITION.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms))
                if version >= 5:
                    out.append(_I64.pack(p.log_start_offset))
                if version >= 8:   # the record errors (mostly none); the message (nullable)
                    errors = _record_errors(p.record_errors, flexible) if p.record_errors else array_length(0, flexible)
                    out += (errors, nullable_string(p.error_message, flexible))
                if flexible:
                    leader = p.current_leader if version >= HINTS_FROM else None
                    out.append(NO_TAGS if leader is None else tagged_fields([(0, leader_and_epoch(leader))]))
            if flexible:
                out.append(NO_TAGS)
        out.append(_I32.pack(self.throttle_time // _MS))
        if flexible:
            endpoints = self.node_endpoints if version >= HINTS_FROM else ()
            out.append(tagged_fields([(0, node_endpoints(endpoints))]) if endpoints else NO_TAGS)
        return b"".join(out)


def _record_errors(errors: tuple, flexible: bool) -> bytes:
    """The v8+ ``record_errors`` array: each record's batch index and message."""
    out = [array_length(len(errors), flexible)]
    for e in errors:
        out += (_I32.pack(e.batch_index), nullable_string(e.message, flexible))
        if flexible:
            out.append(NO_TAGS)
    return b"".join(out)
