"""The records of ``__consumer_offsets``, in Apache Kafka's own byte format.

Each record's key starts with an int16 that names its kind (Kafka's "key version"):
0 or 1 = an offset commit, key (group, topic, partition); 2 = a group's metadata, key
(group). Values start with an int16 version. We write offset commit values at version 3
(offset, leaderEpoch, metadata, commitTimestamp) and group metadata values at version 3
(protocolType, generation, protocol, leader, currentStateTimestamp, members with their
instance id, client id and host, timeouts, subscription and assignment), and read
versions 0-3 of both. Kinds 3-8 are a KIP-848 group's records (``consumer_records``). A null value is a tombstone: the key is deleted.
Strings are int16-length UTF-8 (-1 = null), bytes int32-length. Kafka's tools
(``kafka-console-consumer --formatter ...OffsetsMessageFormatter``) read these records.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from odradek.broker.group import consumer_records
from odradek.broker.group.consumer_records import ConsumerKey
from odradek.errors import ErrorCode, KafkaError

OFFSET_COMMIT_KEY = 1
GROUP_METADATA_KEY = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3

_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_ms: int
    expire_ms: int = -1  # only value version 1 carries it


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    state_ms: int
    members: tuple[MemberValue, ...]


# -- writing -------------------------------------------------------------------------------
class _Writer:
    __slots__ = ("out",)

    def __init__(self, version: int) -> None:
        self.out = bytearray(_I16.pack(version))

    def i32(self, v: int) -> "_Writer":
        self.out += _I32.pack(v)
        return self

    def i64(self, v: int) -> "_Writer":
        self.out += _I64.pack(v)
        return self

    def string(self, s: str | None) -> "_Writer":
        if s is None:
            self.out += _I16.pack(-1)
        else:
            data = s.encode()
            self.out += _I16.pack(len(data)) + data
        return self

    def raw(self, b: bytes) -> "_Writer":
        self.out += _I32.pack(len(b)) + b
        return self


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return bytes(_Writer(OFFSET_COMMIT_KEY).string(group).string(topic).i32(partition).out)


def group_key(group: str) -> bytes:
    return bytes(_Writer(GROUP_METADATA_KEY).string(group).out)


def offset_value(v: OffsetValue) -> bytes:
    w = _Writer(OFFSET_VALUE_VERSION).i64(v.offset).i32(v.leader_epoch).string(v.metadata).i64(v.commit_ms)
    return bytes(w.out)


def group_value(v: GroupValue) -> bytes:
    w = (_Writer(GROUP_VALUE_VERSION).string(v.protocol_type).i32(v.generation).string(v.protocol)
         .string(v.leader).i64(v.state_ms).i32(len(v.members)))
    for m in v.members:
        (w.string(m.member_id).string(m.instance_id).string(m.client_id).string(m.client_host)
         .i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms).raw(m.subscription).raw(m.assignment))
    return bytes(w.out)


# -- reading -------------------------------------------------------------------------------
class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def _take(self, fmt: struct.Struct) -> int:
        if self.pos + fmt.size > len(self.buf):
            raise KafkaError(ErrorCode.corrupt_message, "__consumer_offsets record is truncated")
        (v,) = fmt.unpack_from(self.buf, self.pos)
        self.pos += fmt.size
        return v

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def _slice(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise KafkaError(ErrorCode.corrupt_message, "__consumer_offsets field runs past the record")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return bytes(out)

    def string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self._slice(n).decode()

    def raw(self) -> bytes:
        n = self.i32()
        return b"" if n < 0 else self._slice(n)


def decode_key(key: bytes) -> OffsetKey | GroupKey | ConsumerKey | None:
    """The key's kind and fields (a KIP-848 group's kinds 3-8: ``consumer_records``); None for
    kinds this coordinator does not own (share and streams groups' records are skipped, as
    Kafka's loader skips what it does not know)."""
    r = _Reader(key)
    kind = r.i16()
    if kind in (0, OFFSET_COMMIT_KEY):
        return OffsetKey(r.string() or "", r.string() or "", r.i32())
    if kind == GROUP_METADATA_KEY:
        return GroupKey(r.string() or "")
    if kind in consumer_records.KINDS:
        return consumer_records.decode_key(kind, r)
    return None


def decode_offset_value(value: bytes) -> OffsetValue:
    r = _Reader(value)
    version = r.i16()
    if not 0 <= version <= 3:
        raise KafkaError(ErrorCode.corrupt_message, f"unknown offset commit value version {version}")
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.string() or ""
    commit_ms = r.i64()
    expire_ms = r.i64() if version == 1 else -1
    return OffsetValue(offset, epoch, metadata, commit_ms, expire_ms)


def decode_group_value(value: bytes) -> GroupValue:
    r = _Reader(value)
    version = r.i16()
    if not 0 <= version <= 3:
        raise KafkaError(ErrorCode.corrupt_message, f"unknown group metadata value version {version}")
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    state_ms = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.i32()):
        member_id = r.string() or ""
        instance_id = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        rebalance_ms = r.i32() if version >= 1 else -1
        session_ms = r.i32()
        if rebalance_ms < 0:
            rebalance_ms = session_ms
        members.append(MemberValue(member_id, instance_id, client_id, client_host, rebalance_ms,
                                   session_ms, r.raw(), r.raw()))
    return GroupValue(protocol_type, generation, protocol, leader, state_ms, tuple(members))
