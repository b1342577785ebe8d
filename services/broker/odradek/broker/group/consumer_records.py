"""The KIP-848 records of ``__consumer_offsets``, as Kafka 4.x's group coordinator writes them.

Keys start with an int16 naming the record (Kafka's coordinator-record api key), then the
group id and, for the per-member kinds, the member id, as int16-length strings (keys are not
flexible):

- 3 ConsumerGroupMetadata (group): the group epoch;
- 4 ConsumerGroupPartitionMetadata (group): the subscribed topics' ids, names, partition counts
  (Kafka 4.0's subscription metadata; racks are written empty, as Kafka does without rack data);
- 5 ConsumerGroupMemberMetadata (group, member): instance and rack ids, client id and host,
  subscribed topics and regex, rebalance timeout, server assignor;
- 6 ConsumerGroupTargetAssignmentMetadata (group): the target assignment epoch;
- 7 ConsumerGroupTargetAssignmentMember (group, member): the member's target partitions;
- 8 ConsumerGroupCurrentMemberAssignment (group, member): member epoch, previous epoch, state
  (Kafka's MemberState byte: 0 stable, 1 unrevoked, 2 unreleased partitions), assigned
  partitions and those pending revocation.

Values are version 0 of flexible messages (KIP-482): compact strings and arrays, uuids as 16
bytes, a tagged-field section closing every struct. The one tagged field we write and read is
the member metadata's tag 0, ClassicMemberMetadata (a member speaking the classic protocol in a
consumer group, KIP-848's online upgrade: its session timeout and its JoinGroup protocols,
written as Kafka writes a nullable struct in a tagged field: a present byte 1, then the
struct); the others we skip (4.1's MetadataHash, KIP-1251's assignment epochs). Partitions are
``(topic id as uuid text, partition)``. A null value is a tombstone.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.primitives import NO_TAGS, FieldReader, array_length, nullable_string, string, tagged_fields, uvarint

GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 6, 7, 8
KINDS = range(GROUP_METADATA, CURRENT_ASSIGNMENT + 1)
PER_MEMBER = (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT)
STATES = ("stable", "unrevoked_partitions", "unreleased_partitions")  # index = Kafka's MemberState byte

_I8, _I16, _I32 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i")
TP = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ConsumerKey:
    kind: int
    group: str
    member: str | None = None


@dataclass(frozen=True, slots=True)
class ClassicMetadata:
    """A consumer group member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat)."""
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata), the member's order of preference


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed: tuple[str, ...]
    regex: str | None
    rebalance_timeout_ms: int
    assignor: str | None
    classic: ClassicMetadata | None = None


@dataclass(frozen=True, slots=True)
class CurrentAssignment:
    epoch: int
    previous_epoch: int
    state: str
    assigned: frozenset[TP]
    revoking: frozenset[TP]


# -- keys ------------------------------------------------------------------------------------
def key(k: ConsumerKey) -> bytes:
    out = _I16.pack(k.kind) + string(k.group, False)
    return out + string(k.member or "", False) if k.kind in PER_MEMBER else out


def decode_key(kind: int, reader) -> ConsumerKey:
    """The rest of a key whose kind (3-8) was read by ``records.decode_key``'s reader."""
    group = reader.string() or ""
    return ConsumerKey(kind, group, (reader.string() or "") if kind in PER_MEMBER else None)


# -- values ----------------------------------------------------------------------------------
def _value(*parts: bytes, tags: bytes = NO_TAGS) -> bytes:
    return _I16.pack(0) + b"".join(parts) + tags


def _array(items, each) -> bytes:
    items = list(items)
    return array_length(len(items), True) + b"".join(each(i) for i in items)


def _partitions(tps) -> bytes:
    per: dict[str, list[int]] = {}
    for topic_id, p in tps:
        per.setdefault(topic_id, []).append(p)
    return _array(sorted(per.items()), lambda item: uuid.UUID(item[0]).bytes
                  + _array(sorted(item[1]), _I32.pack) + NO_TAGS)


def epoch_value(epoch: int) -> bytes:
    """ConsumerGroupMetadataValue and ConsumerGroupTargetAssignmentMetadataValue: one epoch."""
    return _value(_I32.pack(epoch))


def partition_metadata_value(topics: dict[str, tuple[str, int]]) -> bytes:
    """``topics``: name -> (topic id, partition count)."""
    return _value(_array(sorted(topics.items()), lambda item: uuid.UUID(item[1][0]).bytes + string(item[0], True)
                         + _I32.pack(item[1][1]) + array_length(0, True) + NO_TAGS))


def member_metadata_value(m: MemberMetadata) -> bytes:
    tags = [] if m.classic is None else [(0, b"\x01" + _classic(m.classic))]
    return _value(nullable_string(m.instance_id, True), nullable_string(m.rack_id, True), string(m.client_id, True),
                  string(m.client_host, True), _array(sorted(m.subscribed), lambda s: string(s, True)),
                  nullable_string(m.regex, True), _I32.pack(m.rebalance_timeout_ms),
                  nullable_string(m.assignor, True), tags=tagged_fields(tags))


def _classic(c: ClassicMetadata) -> bytes:
    return _I32.pack(c.session_timeout_ms) + _array(c.protocols, lambda p: string(p[0], True) + uvarint(
        len(p[1]) + 1) + p[1] + NO_TAGS) + NO_TAGS


def target_member_value(partitions) -> bytes:
    return _value(_partitions(partitions))


def current_assignment_value(a: CurrentAssignment) -> bytes:
    return _value(_I32.pack(a.epoch), _I32.pack(a.previous_epoch), _I8.pack(STATES.index(a.state)),
                  _partitions(a.assigned), _partitions(a.revoking))


# -- reading values --------------------------------------------------------------------------
class _Reader(FieldReader):
    """A KIP-848 record value: flexible version 0 (a value of another version is refused)."""

    __slots__ = ()

    def __init__(self, buf: bytes) -> None:
        super().__init__(buf, "consumer group record")
        version = self.fixed(_I16)
        if version != 0:
            raise KafkaError(ErrorCode.corrupt_message, f"unknown consumer group record value version {version}")

    def uuid(self) -> str:
        return str(uuid.UUID(bytes=self.raw(16)))

    def array(self, each) -> list:
        """An array of structs (each closes with its tagged fields)."""
        return [self.item(each) for _ in range(self.uvarint() - 1)]

    def values(self, each) -> list:
        """An array of int32s or strings."""
        return [each(self) for _ in range(self.uvarint() - 1)]

    def item(self, each):
        value = each(self)
        self.tags()
        return value


def _read(value: bytes, each):
    return _Reader(value).item(each)


def _read_partitions(r: _Reader) -> frozenset[TP]:
    return frozenset((tid, p) for tid, ps in r.array(lambda t: (t.uuid(), t.values(lambda x: x.fixed(_I32))))
                     for p in ps)


def decode_epoch(value: bytes) -> int:
    return _read(value, lambda r: r.fixed(_I32))


def decode_partition_metadata(value: bytes) -> dict[str, tuple[str, int]]:
    def topic(r: _Reader):
        topic_id, name, count = r.uuid(), r.nullable_string() or "", r.fixed(_I32)
        r.array(lambda p: (p.fixed(_I32), p.values(lambda s: s.nullable_string())))  # racks: not used
        return name, (topic_id, count)
    return dict(_read(value, lambda r: r.array(topic)))


def decode_member_metadata(value: bytes) -> MemberMetadata:
    r = _Reader(value)
    fields = (r.nullable_string(), r.nullable_string(), r.nullable_string() or "", r.nullable_string() or "",
              tuple(r.values(lambda s: s.nullable_string() or "")), r.nullable_string(), r.fixed(_I32),
              r.nullable_string())
    classic = None
    for _ in range(r.uvarint()):  # the tagged fields: tag 0 is ClassicMemberMetadata
        tag, size = r.uvarint(), r.uvarint()
        end = r.pos + size
        if tag == 0 and size and r.fixed(_I8) == 1:
            classic = ClassicMetadata(r.fixed(_I32), tuple(r.array(lambda p: (p.string(), p.raw(p.length())))))
            r.tags()
        r.pos = end
    return MemberMetadata(*fields, classic)


def decode_target_member(value: bytes) -> frozenset[TP]:
    return _read(value, _read_partitions)


def decode_current_assignment(value: bytes) -> CurrentAssignment:
    def each(r: _Reader) -> CurrentAssignment:
        epoch, previous, state = r.fixed(_I32), r.fixed(_I32), r.fixed(_I8)
        if not 0 <= state < len(STATES):
            raise KafkaError(ErrorCode.corrupt_message, f"unknown member state {state}")
        return CurrentAssignment(epoch, previous, STATES[state], _read_partitions(r), _read_partitions(r))
    return _read(value, each)
