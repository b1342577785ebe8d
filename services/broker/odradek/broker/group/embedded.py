"""The consumer's embedded protocol (protocol type "consumer"): the Subscription a classic
member sends in JoinGroup and the Assignment it gets back in SyncGroup, as Kafka's
``ConsumerProtocol`` encodes them (non-flexible; strings int16-length, arrays and bytes
int32-length, null bytes -1).

- Subscription v0: version int16, topics [string], user data bytes; v1+ adds the owned
  partitions [topic string, [partition int32]]; v2+ the generation int32; v3+ the rack id
  (nullable string).
- Assignment (every version 0-3 alike): version int16, [topic string, [partition int32]],
  user data bytes.

The coordinator reads them when a consumer group serves classic members (KIP-848's online
upgrade) and writes an Assignment for them; a member's metadata that does not parse is
INCONSISTENT_GROUP_PROTOCOL, as Kafka answers a malformed embedded protocol.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.primitives import FieldReader, array_length, string

_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")
PROTOCOL_TYPE = "consumer"  # the JoinGroup protocol type of this embedded protocol
HIGHEST_ASSIGNMENT_VERSION = 3
TopicPartition = tuple[str, int]  # (topic name, partition)


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    owned: frozenset[TopicPartition] = frozenset()
    rack_id: str | None = None


class _Reader(FieldReader):
    __slots__ = ()

    def __init__(self, buf: bytes, what: str) -> None:
        super().__init__(buf, what, flexible=False)

    def partitions(self) -> frozenset[TopicPartition]:
        out = set()
        for _ in range(max(self.length(_I32), 0)):
            topic = self.string()
            out.update((topic, self.fixed(_I32)) for _ in range(max(self.length(_I32), 0)))
        return frozenset(out)

    def skip_bytes(self) -> None:
        n = self.length(_I32)
        if n > 0:
            self.raw(n)


def _malformed(what: str, e: Exception) -> KafkaError:
    return KafkaError(ErrorCode.inconsistent_group_protocol, f"Malformed embedded consumer protocol in {what}: {e}")


def parse_subscription(metadata: bytes) -> Subscription:
    try:
        r = _Reader(metadata, "consumer protocol subscription")
        version = r.fixed(_I16)
        topics = tuple(r.string() for _ in range(max(r.length(_I32), 0)))
        r.skip_bytes()  # user data
        owned = r.partitions() if version >= 1 else frozenset()
        if version >= 2:
            r.fixed(_I32)  # the generation the owned partitions are from
        rack = r.nullable_string() if version >= 3 else None
        return Subscription(version, topics, owned, rack)
    except (KafkaError, UnicodeDecodeError) as e:
        raise _malformed("subscription", e) from None


def parse_assignment(assignment: bytes) -> frozenset[TopicPartition]:
    """A member's Assignment; empty bytes (a member that never synced) own nothing."""
    if not assignment:
        return frozenset()
    try:
        r = _Reader(assignment, "consumer protocol assignment")
        r.fixed(_I16)
        return r.partitions()
    except (KafkaError, UnicodeDecodeError) as e:
        raise _malformed("assignment", e) from None


def metadata_version(metadata: bytes) -> int:
    """The version a member's Subscription is at (the Assignment it gets is written at that
    version, at most the highest there is), as Kafka's ``prepareAssignment``."""
    if len(metadata) < 2:
        raise _malformed("subscription", ValueError("no version"))
    return _I16.unpack_from(metadata)[0]


def encode_assignment(partitions, version: int = 0) -> bytes:
    """An Assignment of ``partitions`` ((topic name, partition)), no user data (null)."""
    per: dict[str, list[int]] = {}
    for topic, p in partitions:
        per.setdefault(topic, []).append(p)
    body = b"".join(string(t, False) + array_length(len(ps), False) + b"".join(_I32.pack(p) for p in sorted(ps))
                    for t, ps in sorted(per.items()))
    version = min(max(version, 0), HIGHEST_ASSIGNMENT_VERSION)
    return _I16.pack(version) + array_length(len(per), False) + body + _I32.pack(-1)


def encode_subscription(topics, owned=(), version: int = 1, rack_id: str | None = None) -> bytes:
    """A Subscription (tests and the classic group's own records use it)."""
    out = _I16.pack(version) + array_length(len(topics), False) + b"".join(string(t, False) for t in topics)
    out += _I32.pack(-1)  # no user data
    if version >= 1:
        out += encode_assignment(owned)[2:-4]
    if version >= 2:
        out += _I32.pack(-1)
    if version >= 3:
        out += b"\xff\xff" if rack_id is None else string(rack_id, False)
    return out
