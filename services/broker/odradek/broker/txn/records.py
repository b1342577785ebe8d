"""The records of ``__transaction_state``, in Apache Kafka's byte format (TransactionLog).

Key (version 0): int16 version, TransactionalId as an int16-length UTF-8 string.
Value: int16 version, then ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs int32,
TransactionStatus int8 (the state's id), TransactionPartitions (nullable array of Topic string
and PartitionIds int32 array), TransactionLastUpdateTimestampMs int64,
TransactionStartTimestampMs int64. Version 0 uses classic encodings (int16 string lengths,
int32 array lengths, -1 = null); version 1 is Kafka's first flexible version (unsigned varint
lengths plus one, tagged-field sections after each struct, tags skipped here). We write
version 0, as Kafka 3.9 does, and read both. A null value is a tombstone: the id is gone.
Kafka's ``kafka-console-consumer --formatter ...TransactionLogMessageFormatter`` reads these.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.primitives import FieldReader

KEY_VERSION = 0
VALUE_VERSION = 0

_I8, _I16, _I32, _I64 = (struct.Struct(f">{c}") for c in "bhiq")


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int                                   # TxnState's id
    partitions: tuple[tuple[str, int], ...]       # (topic, partition), sorted
    last_update_ms: int
    start_ms: int


def _string(s: str) -> bytes:
    data = s.encode()
    return _I16.pack(len(data)) + data


_WHAT = "__transaction_state record"   # in the corrupt-record errors


def txn_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def txn_value(v: TxnLogValue) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(v.partitions):
        by_topic.setdefault(topic, []).append(partition)
    out = bytearray(_I16.pack(VALUE_VERSION))
    out += _I64.pack(v.producer_id) + _I16.pack(v.producer_epoch) + _I32.pack(v.timeout_ms) + _I8.pack(v.status)
    out += _I32.pack(len(by_topic))
    for topic, ids in by_topic.items():
        out += _string(topic) + _I32.pack(len(ids)) + b"".join(_I32.pack(p) for p in ids)
    out += _I64.pack(v.last_update_ms) + _I64.pack(v.start_ms)
    return bytes(out)



def decode_key(key: bytes) -> str | None:
    """The transactional id; None for a key version this coordinator does not know."""
    r = FieldReader(key, _WHAT, flexible=False)
    if r.fixed(_I16) != KEY_VERSION:
        return None
    return r.string()


def decode_value(value: bytes) -> TxnLogValue:
    version = FieldReader(value, _WHAT).fixed(_I16)
    if not 0 <= version <= 1:
        raise KafkaError(ErrorCode.corrupt_message, f"unknown transaction log value version {version}")
    r = FieldReader(value, _WHAT, flexible=version >= 1)
    r.pos = 2
    pid, epoch, timeout, status = r.fixed(_I64), r.fixed(_I16), r.fixed(_I32), r.fixed(_I8)
    partitions = []
    for _ in range(max(0, r.length(_I32))):
        topic = r.string()
        partitions += [(topic, r.fixed(_I32)) for _ in range(max(0, r.length(_I32)))]
        r.tags()
    last_update, start = r.fixed(_I64), r.fixed(_I64)
    r.tags()
    return TxnLogValue(pid, epoch, timeout, status, tuple(sorted(partitions)), last_update, start)
