"""Record batch v2 (Kafka's ``DefaultRecordBatch``): zero-copy views, validation, building.

Owns the byte layout of a batch. A ``RecordBatch`` is a view over ``buf[position:]`` of a
memoryview (a produce request, an mmap of a segment file): reading a field unpacks a few
bytes, validating hashes the batch with CRC-32C on the memoryview, and the broker's
rewrites (baseOffset, partitionLeaderEpoch, LogAppendTime) are ``struct.pack_into`` on the
same buffer. Nothing on that path touches records one by one.

Header (61 bytes, big-endian): baseOffset i64 @0, batchLength i32 @8 (= size - 12),
partitionLeaderEpoch i32 @12, magic i8 @16 (= 2), crc u32 @17 (CRC-32C of bytes 21..end),
attributes i16 @21 (bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control),
lastOffsetDelta i32 @23, baseTimestamp i64 @27, maxTimestamp i64 @35, producerId i64 @43,
producerEpoch i16 @51, baseSequence i32 @53, recordsCount i32 @57, then the records
(compressed as one block when the codec is not 0). Record: varint length, i8 attributes,
varlong timestampDelta, varint offsetDelta, varint key length + key, varint value length +
value, varint header count, headers (varint key length + utf-8 key, varint value length +
value); lengths -1 mean null.

A ``BatchHeader`` is the other way to read a header: every field unpacked at once into an
immutable value that also says where the batch starts (``iter_headers`` over a buffer, or
``read_header`` on bytes copied out of a file), for scans that look at each field of many
batches (segment scans, the log cleaner).

``build_batch`` and ``iter_records`` (a slow, record-by-record path) serve tests, ListOffsets
by timestamp and internal topics. The log cleaner has its own fast path here: ``record_keys``
reads each record's key without decoding the rest, ``filter_batch`` rebuilds a batch with some
of its records (header fields kept, count and CRC new), ``empty_batch`` is what remains of a
producer's last batch. A leader's record checks read the same way: ``keyless_records`` (compacted
topics) and ``record_times`` (timestamp limits). The codecs of the records block are ``odradek.compression``'s.

Not thread-safe: a view must not be rewritten while another thread reads it.
"""

from __future__ import annotations

import enum
import struct
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, NamedTuple

from crc32c import crc32c

from odradek.compression import Compression, compress, decompress
from odradek.errors import ErrorCode, KafkaError, ProduceRecordsError

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
MAGIC = 2
CRC_START = 21
NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
LOG_APPEND_TIME_FLAG = 0x08  # the attributes bit of timestampType = LogAppendTime

_I16, _I32, _U32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">I"), struct.Struct(">q")
_CODEC_MASK, _LOG_APPEND_TIME, _TRANSACTIONAL, _CONTROL = 0x07, LOG_APPEND_TIME_FLAG, 0x10, 0x20
_MAX_CODEC = max(Compression)   # not per batch: iterating the enum cost each check a microsecond


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


def _corrupt(message: str) -> KafkaError:
    return KafkaError(ErrorCode.corrupt_message, message)


class _HeaderFields:
    """What follows from the header fields, for ``RecordBatch`` and ``BatchHeader`` alike."""

    __slots__ = ()
    batch_length: int
    attributes: int
    base_offset: int
    last_offset_delta: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & _CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType(bool(self.attributes & _LOG_APPEND_TIME))

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL)


class RecordBatch(_HeaderFields):
    """A v2 batch at ``buf[position:position + size]``; fields are read on access."""

    __slots__ = ("buf", "position")

    def __init__(self, buf: memoryview, position: int = 0) -> None:
        self.buf = buf
        self.position = position

    def _get(self, fmt: struct.Struct, at: int) -> int:
        return fmt.unpack_from(self.buf, self.position + at)[0]

    # -- fields -----------------------------------------------------------------------
    base_offset = property(lambda self: self._get(_I64, 0))
    batch_length = property(lambda self: self._get(_I32, 8))
    partition_leader_epoch = property(lambda self: self._get(_I32, 12))
    magic = property(lambda self: self.buf[self.position + 16])
    crc = property(lambda self: self._get(_U32, 17))
    attributes = property(lambda self: self._get(_I16, 21))
    last_offset_delta = property(lambda self: self._get(_I32, 23))
    first_timestamp = property(lambda self: self._get(_I64, 27))
    max_timestamp = property(lambda self: self._get(_I64, 35))
    producer_id = property(lambda self: self._get(_I64, 43))
    producer_epoch = property(lambda self: self._get(_I16, 51))
    base_sequence = property(lambda self: self._get(_I32, 53))
    records_count = property(lambda self: self._get(_I32, 57))

    @property
    def view(self) -> memoryview:
        """The batch's bytes (no copy)."""
        return self.buf[self.position:self.position + self.size]

    def compute_crc(self) -> int:
        return crc32c(self.buf[self.position + CRC_START:self.position + self.size])

    # -- checks -----------------------------------------------------------------------
    def check(self) -> BatchHeader:
        """Raise the KafkaError Apache Kafka gives a producer for this batch, if any; else its header.

        The header must already be known to fit in the buffer (``split_batches`` checks).
        """
        return check_batch(self.buf, self.position)

    # -- in-place rewrites --------------------------------------------------------------
    def set_base_offset(self, offset: int) -> None:
        _I64.pack_into(self.buf, self.position, offset)

    def set_partition_leader_epoch(self, epoch: int) -> None:
        _I32.pack_into(self.buf, self.position + 12, epoch)

    def set_log_append_time(self, timestamp_ms: int) -> None:
        """Stamp the batch with the broker's clock (records keep theirs, as in Kafka)."""
        _I16.pack_into(self.buf, self.position + 21, self.attributes | _LOG_APPEND_TIME)
        _I64.pack_into(self.buf, self.position + 35, timestamp_ms)
        _U32.pack_into(self.buf, self.position + 17, self.compute_crc())

    def __repr__(self) -> str:
        return (f"RecordBatch(base_offset={self.base_offset}, count={self.records_count}, "
                f"size={self.size}, max_timestamp={self.max_timestamp})")


def iter_batches(buf: memoryview, start: int = 0, end: int | None = None) -> Iterator[RecordBatch]:
    """Whole batches of ``buf[start:end]``; stops quietly before a torn or short tail.

    Only the length field is trusted here; call ``RecordBatch.check`` to validate.
    """
    end = len(buf) if end is None else end
    position = start
    while end - position >= HEADER_SIZE:
        size = _I32.unpack_from(buf, position + 8)[0] + LOG_OVERHEAD
        if size < HEADER_SIZE or size > end - position:
            return
        yield RecordBatch(buf, position)
        position += size


class _BatchHeaderTuple(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    position: int               # where the batch starts (in its buffer, or in its file)


class BatchHeader(_BatchHeaderTuple, _HeaderFields):
    """Every header field of a batch, unpacked at once: a value, holding no buffer.

    Header fields only: the records need the batch itself (``records_block``, ``RecordBatch``).
    """

    __slots__ = ()


_new_header, _unpack_header = tuple.__new__, HEADER.unpack_from


def read_header(buf: bytes | memoryview, at: int = 0, position: int | None = None) -> BatchHeader:
    """The header at ``buf[at:]`` (HEADER_SIZE bytes needed); ``position`` defaults to ``at``."""
    return _new_header(BatchHeader, _unpack_header(buf, at) + (at if position is None else position,))


def check_batch(buf: memoryview, position: int) -> BatchHeader:
    """The header of the batch at ``buf[position:]`` (whose header fits in ``buf``), once
    checked as Kafka checks a producer's batch: else its KafkaError. Every field is unpacked at
    once, and the checks read the header value's fields (a struct call per field read was a
    third of a small append's check)."""
    h = read_header(buf, position)
    if h.magic != MAGIC:
        raise _bad_magic(h.magic)
    computed = crc32c(buf[position + CRC_START:position + h.batch_length + LOG_OVERHEAD])
    if computed != h.crc:
        raise _corrupt(f"record batch at offset {h.base_offset} fails its CRC-32C "
                       f"(stored {h.crc}, computed {computed})")
    if h.attributes & _CODEC_MASK > _MAX_CODEC:
        raise _corrupt(f"unknown compression codec {h.attributes & _CODEC_MASK}")
    count, delta = h.records_count, h.last_offset_delta
    if delta < 0:
        raise KafkaError(ErrorCode.invalid_record,
                         f"Batch has an invalid offset range: lastOffsetDelta {delta}")
    if count <= 0:
        raise KafkaError(ErrorCode.invalid_record, f"Invalid reported count for record batch: {count}")
    if count != delta + 1:
        raise KafkaError(ErrorCode.invalid_record,
                         f"Inconsistent batch offset range (lastOffsetDelta {delta}) "
                         f"and count of records {count}")
    return h


def stamped_header(buf: memoryview, header: BatchHeader, base_offset: int, leader_epoch: int,
                   log_append_time: int = -1) -> bytearray:
    """A copy of the header of the batch ``header`` read in ``buf``, with the broker's baseOffset
    and partitionLeaderEpoch and, given a ``log_append_time``, the LogAppendTime type bit,
    maxTimestamp and the CRC over them and the records: the leader writes it before the batch's
    records, which it neither copies nor rewrites (a produce request's bytes are read-only).
    Without one (CreateTime), a LogAppendTime bit the producer set is cleared, maxTimestamp kept,
    as Kafka's LogValidator stamps the topic's type on the batch."""
    position = header.position
    out = bytearray(buf[position:position + HEADER_SIZE])
    _I64.pack_into(out, 0, base_offset)
    _I32.pack_into(out, 12, leader_epoch)
    if log_append_time >= 0:
        _I16.pack_into(out, 21, header.attributes | _LOG_APPEND_TIME)
        _I64.pack_into(out, 35, log_append_time)
    elif header.attributes & _LOG_APPEND_TIME:
        _I16.pack_into(out, 21, header.attributes & ~_LOG_APPEND_TIME)
    else:
        return out
    crc = crc32c(memoryview(out)[CRC_START:])
    end = position + header.batch_length + LOG_OVERHEAD
    _U32.pack_into(out, 17, crc32c(buf[position + HEADER_SIZE:end], crc))
    return out


def batch_size(buf: bytes | memoryview, at: int = 0) -> int:
    """The size of the batch at ``buf[at:]`` from its length field (LOG_OVERHEAD bytes needed)."""
    return _I32.unpack_from(buf, at + 8)[0] + LOG_OVERHEAD


def iter_headers(buf, start: int = 0, end: int | None = None) -> Iterator[BatchHeader]:
    """The headers of the whole batches of ``buf[start:end]`` (any buffer: bytes, mmap...);
    stops quietly before a torn or short tail, like ``iter_batches``."""
    end = len(buf) if end is None else end
    position = start
    while end - position >= HEADER_SIZE:
        header = _new_header(BatchHeader, _unpack_header(buf, position) + (position,))
        size = header[1] + LOG_OVERHEAD
        if size < HEADER_SIZE or size > end - position:
            return
        yield header
        position += size


def _bad_magic(magic: int) -> KafkaError:
    """Kafka's refusal of a produced batch's magic: an old message set (magic 0 or 1) is
    INVALID_RECORD in a Produce v3+ request (ProduceRequest.validateRecords; v0-v2 are not served),
    an unknown magic CORRUPT_MESSAGE."""
    if 0 <= magic < MAGIC:   # Kafka reads the byte signed: a negative one is unknown
        return ProduceRecordsError(ErrorCode.invalid_record, "Produce requests (v3+) are only allowed to contain "
                                                             "record batches with magic version 2")
    return _corrupt(f"unknown record batch magic {magic}")


def _no_batch() -> ProduceRecordsError:
    return ProduceRecordsError(ErrorCode.invalid_record, "Produce requests must have at least one record batch")


def _torn(buf: memoryview, position: int, message: str) -> KafkaError:
    """A batch that is not whole: CORRUPT_MESSAGE, but as the first of a producer's records Kafka
    reads no batch at all there (INVALID_RECORD, ProduceRequest.validateRecords) unless its length
    field is below any record's (14 bytes). (Kafka appends the batches before a torn later one
    and drops it; Odradek refuses the append.)"""
    if position == 0 and not (len(buf) >= LOG_OVERHEAD and _I32.unpack_from(buf, 8)[0] < 14):
        return _no_batch()
    return _corrupt(message)


def batch_positions(buf: memoryview) -> list[int]:
    """Where each batch of a produce request's records starts, each whole and of magic 2, but
    not yet checked (``check_batch``); raise on anything wrong, a torn or short tail included."""
    positions: list[int] = []
    position, end = 0, len(buf)
    while position < end:
        if end - position < LOG_OVERHEAD + 5:
            raise _torn(buf, position, f"{end - position} trailing bytes are not a record batch")
        length = _I32.unpack_from(buf, position + 8)[0]
        if buf[position + 16] != MAGIC:
            raise _bad_magic(buf[position + 16])
        if length + LOG_OVERHEAD < HEADER_SIZE:
            raise _corrupt(f"record batch length {length} is smaller than a batch header")
        if length + LOG_OVERHEAD > end - position:
            raise _torn(buf, position, f"record batch of {length + LOG_OVERHEAD} bytes truncated to {end - position}")
        positions.append(position)
        position += length + LOG_OVERHEAD
    if not positions:
        raise _no_batch()
    return positions


def checked_headers(buf: memoryview) -> list[BatchHeader]:
    """The headers of all batches of a produce request's records, each batch checked
    (``check_batch``); raise on anything wrong, a torn or short tail included."""
    return [check_batch(buf, position) for position in batch_positions(buf)]


def split_batches(buf: memoryview) -> list[RecordBatch]:
    """All batches of a produce request's records, each checked; raise on anything wrong."""
    return [RecordBatch(buf, h.position) for h in checked_headers(buf)]


# -- records ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Record:
    """One record. ``offset`` and ``timestamp`` are absolute; -1 means "assign" when building."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int = NO_TIMESTAMP
    offset: int = -1


def _write_varint(out: bytearray, value: int) -> None:
    value = (value << 1) ^ (value >> 63)  # zigzag
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _read_varint(buf: memoryview, position: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = buf[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), position
        shift += 7
        if shift > 63:
            raise _corrupt("varint too long")


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(data))
        out += data


def _read_bytes(buf: memoryview, position: int) -> tuple[bytes | None, int]:
    size, position = _read_varint(buf, position)
    if size < 0:
        return None, position
    if position + size > len(buf):
        raise _corrupt("record field runs past the end of the batch")
    return bytes(buf[position:position + size]), position + size


def _encode_record(out: bytearray, record: Record, offset_delta: int, timestamp_delta: int) -> None:
    body = bytearray(b"\x00")  # attributes: unused in v2
    _write_varint(body, timestamp_delta)
    _write_varint(body, offset_delta)
    _write_bytes(body, record.key)
    _write_bytes(body, record.value)
    _write_varint(body, len(record.headers))
    for name, value in record.headers:
        _write_bytes(body, name.encode())
        _write_bytes(body, value)
    _write_varint(out, len(body))
    out += body


def build_batch(records: Iterable[Record], *, base_offset: int = 0,
                compression: Compression = Compression.NONE,
                timestamp_type: TimestampType = TimestampType.CREATE_TIME,
                producer_id: int = NO_PRODUCER_ID, producer_epoch: int = -1, base_sequence: int = -1,
                partition_leader_epoch: int = -1, transactional: bool = False,
                control: bool = False, now_ms: int | None = None) -> bytearray:
    """Encode a v2 batch; records without a timestamp get ``now_ms`` (default: the clock)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    records = list(records)
    if not records:
        raise ValueError("a record batch needs at least one record")
    stamps = [now if r.timestamp == NO_TIMESTAMP else r.timestamp for r in records]
    first_ts, max_ts = stamps[0], max(stamps)
    body = bytearray()
    for delta, (record, ts) in enumerate(zip(records, stamps)):
        _encode_record(body, record, delta, ts - first_ts)
    payload = compress(compression, body)
    attributes = (int(compression) | (_LOG_APPEND_TIME if timestamp_type else 0)
                  | (_TRANSACTIONAL if transactional else 0) | (_CONTROL if control else 0))
    out = bytearray(HEADER_SIZE + len(payload))
    HEADER.pack_into(out, 0, base_offset, len(out) - LOG_OVERHEAD, partition_leader_epoch, MAGIC, 0,
                     attributes, len(records) - 1, first_ts, max_ts, producer_id, producer_epoch,
                     base_sequence, len(records))
    out[HEADER_SIZE:] = payload
    _U32.pack_into(out, 17, crc32c(memoryview(out)[CRC_START:]))
    return out


def _block(batch: RecordBatch) -> bytes | memoryview:
    """The batch's records block, decompressed (a view of the batch when it is not compressed)."""
    payload = batch.view[HEADER_SIZE:]
    if batch.compression != Compression.NONE:
        return decompress(batch.compression, payload)
    return payload


def iter_records(batch: RecordBatch) -> Iterator[Record]:
    """Decode a batch's records (decompressing it): the slow path, for tools and tests.

    Under LogAppendTime every record carries the batch's max timestamp, as Kafka reports it.
    """
    payload = memoryview(_block(batch))
    base_offset, first_ts = batch.base_offset, batch.first_timestamp
    append_time = batch.max_timestamp if batch.timestamp_type == TimestampType.LOG_APPEND_TIME else None
    position = 0
    for _ in range(batch.records_count):
        length, position = _read_varint(payload, position)
        end = position + length
        if length < 0 or end > len(payload):
            raise _corrupt("record runs past the end of the batch")
        ts_delta, p = _read_varint(payload, position + 1)
        offset_delta, p = _read_varint(payload, p)
        key, p = _read_bytes(payload, p)
        value, p = _read_bytes(payload, p)
        count, p = _read_varint(payload, p)
        headers = []
        for _ in range(count):
            name, p = _read_bytes(payload, p)
            header_value, p = _read_bytes(payload, p)
            headers.append(((name or b"").decode(), header_value))
        if p != end:
            raise _corrupt("record length does not match its fields")
        position = end
        ts = append_time if append_time is not None else first_ts + ts_delta
        yield Record(value, key, tuple(headers), ts, base_offset + offset_delta)


def _rebuilt(batch: RecordBatch, block: bytes, attributes: int, records_count: int) -> bytearray:
    """The batch's header over a new records block: length, attributes, count and CRC new."""
    out = bytearray(HEADER_SIZE + len(block))
    out[:HEADER_SIZE] = batch.view[:HEADER_SIZE]
    out[HEADER_SIZE:] = block
    _I32.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    _I16.pack_into(out, 21, attributes)
    _I32.pack_into(out, 57, records_count)
    _U32.pack_into(out, 17, crc32c(memoryview(out)[CRC_START:]))
    return out


def recompress(batch: RecordBatch, codec: Compression) -> bytearray:
    """The same batch with its records block under another codec (header fields kept)."""
    return _rebuilt(batch, compress(codec, _block(batch)), (batch.attributes & ~_CODEC_MASK) | int(codec),
                    batch.records_count)


# -- the log cleaner's fast path: keys without decoding records ---------------------------------
def records_block(buf, header: BatchHeader) -> bytes:
    """The records block of the batch ``header`` describes in ``buf`` (any buffer), decompressed;
    always ``bytes``, so that keys sliced from it are ``bytes``."""
    block = buf[header.position + HEADER_SIZE:header.position + header.batch_length + LOG_OVERHEAD]
    codec = header.attributes & _CODEC_MASK
    return decompress(codec, block) if codec else bytes(block)


def _varint(buf: bytes, p: int) -> tuple[int, int]:
    """A zigzag varint, with one- and two-byte fast paths (the cleaner's scans are its hot spot)."""
    b = buf[p]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), p + 1
    b2 = buf[p + 1]
    if b2 < 0x80:
        raw = (b & 0x7F) | (b2 << 7)
        return (raw >> 1) ^ -(raw & 1), p + 2
    return _read_varint(memoryview(buf), p)


def record_keys(block: bytes, count: int) -> tuple[list[bytes | None], bool]:
    """The key of each record of a records block (None: no key), and whether any key is null
    or any value a tombstone.

    Only the varints before the key are read; the record length gives the next record.
    """
    keys: list[bytes | None] = []
    append = keys.append
    special = False
    p = 0
    for _ in range(count):
        b = block[p]                            # the record length (>= 0: zigzag is raw >> 1), inlined
        if b < 0x80:
            q, length = p + 1, b >> 1
        elif block[p + 1] < 0x80:
            q, length = p + 2, ((b & 0x7F) | (block[p + 1] << 7)) >> 1
        else:
            length, q = _varint(block, p)
        p = q + length
        q += 1                                  # attributes
        while block[q] > 0x7F:                  # the timestamp delta
            q += 1
        q += 1
        while block[q] > 0x7F:                  # the offset delta
            q += 1
        q += 1
        b = block[q]
        if b == 1:                              # key length -1 (zigzag)
            append(None)
            special = True
            continue
        if b < 0x80:
            q, key_end = q + 1, q + 1 + (b >> 1)
        else:
            key_len, q = _varint(block, q)
            key_end = q + key_len
        append(block[q:key_end])
        if block[key_end] == 1:                 # value length -1: a tombstone
            special = True
    return keys, special


def keyless_records(block: bytes, count: int) -> list[int]:
    """The indexes in its batch of the records without a key (key length -1) of a records block
    (``records_block``)."""
    keys, special = _parsed(record_keys, block, count)
    return [i for i, key in enumerate(keys) if key is None] if special else []


def record_times(block: bytes, count: int) -> list[tuple[int, int]]:
    """(timestamp delta, offset delta) of each record of a records block (``records_block``);
    the rest of each record is skipped."""
    return _parsed(_record_times, block, count)


def _parsed(parse: Callable, block: bytes, count: int):
    """``parse(block, count)``, INVALID_RECORD if the records do not parse, as Kafka's record
    reader says."""
    try:
        return parse(block, count)
    except (IndexError, KafkaError):
        raise KafkaError(ErrorCode.invalid_record, "Found invalid record structure") from None


def _record_times(block: bytes, count: int) -> list[tuple[int, int]]:
    out = []
    position = 0
    varint = _varint
    for _ in range(count):
        length, start = varint(block, position)
        timestamp_delta, p = varint(block, start + 1)   # after the attributes byte
        offset_delta, _ = varint(block, p)
        out.append((timestamp_delta, offset_delta))
        position = start + length
    return out


def _record_spans(block: bytes, count: int) -> list[tuple[int, bytes | None, bool, int, int]]:
    """(offset delta, key, is tombstone, start, end) of each record of a records block."""
    out = []
    position = 0
    varint = _varint
    for _ in range(count):
        length, start = varint(block, position)
        end = start + length
        p = start + 1                                   # attributes
        while block[p] & 0x80:                          # the timestamp delta, skipped
            p += 1
        delta, p = varint(block, p + 1)
        key_len, p = varint(block, p)
        if key_len < 0:
            out.append((delta, None, block[p] == 1, position, end))   # a value length -1 is byte 0x01
        else:
            out.append((delta, block[p:p + key_len], block[p + key_len] == 1, position, end))
        position = end
    return out


def record_offsets(block: bytes, base_offset: int, count: int) -> list[int]:
    """The offsets of the records of a block: for batches with gaps (a cleaning removed records)."""
    return [base_offset + delta for delta, *_ in _record_spans(block, count)]


def filter_batch(batch: RecordBatch, keep: Callable[[int, bytes | None, bool], bool]
                 ) -> bytes | memoryview | None:
    """The batch with only the records for which ``keep(offset, key, is_tombstone)`` holds.

    The original bytes when all stay, None when none does, else a rebuilt batch with the
    same header fields (offsets, timestamps, producer metadata) but the records count.
    """
    if batch.is_control:
        return batch.view
    base, count, block = batch.base_offset, batch.records_count, bytes(_block(batch))
    kept = [(s, e) for d, k, t, s, e in _record_spans(block, count) if keep(base + d, k, t)]
    if len(kept) == count:
        return batch.view
    if not kept:
        return None
    kept_block = b"".join(block[s:e] for s, e in kept)
    if batch.compression != Compression.NONE:
        kept_block = compress(batch.compression, kept_block)
    return _rebuilt(batch, kept_block, batch.attributes, len(kept))


# -- control batches (transaction markers) ------------------------------------------------------
class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


class ControlMarker(NamedTuple):
    type: ControlType
    coordinator_epoch: int


_CONTROL_KEY, _MARKER_VALUE = struct.Struct(">hh"), struct.Struct(">hi")


def build_control_batch(control_type: ControlType, producer_id: int, producer_epoch: int,
                        coordinator_epoch: int, *, base_offset: int = 0, partition_leader_epoch: int = -1,
                        now_ms: int | None = None) -> bytearray:
    """A commit or abort marker batch, as a transaction coordinator's WriteTxnMarkers appends it."""
    record = Record(_MARKER_VALUE.pack(0, coordinator_epoch), _CONTROL_KEY.pack(0, control_type))
    return build_batch([record], base_offset=base_offset, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=-1,
                       partition_leader_epoch=partition_leader_epoch, transactional=True, control=True,
                       now_ms=now_ms)


def read_control(batch: RecordBatch) -> ControlMarker:
    """The marker a control batch carries; CORRUPT_MESSAGE if it is not a v0 end-transaction marker."""
    record = next(iter_records(batch), None)
    if record is None or record.key is None or len(record.key) < _CONTROL_KEY.size:
        raise _corrupt(f"control batch at offset {batch.base_offset} has no control record key")
    version, kind = _CONTROL_KEY.unpack_from(record.key)
    if version != 0 or kind not in (ControlType.ABORT, ControlType.COMMIT):
        raise _corrupt(f"control record at offset {batch.base_offset}: version {version}, type {kind} "
                       f"is not an end-transaction marker")
    if record.value is None or len(record.value) < _MARKER_VALUE.size:
        raise _corrupt(f"end-transaction marker at offset {batch.base_offset} has a short value")
    value_version, coordinator_epoch = _MARKER_VALUE.unpack_from(record.value)
    if value_version != 0:
        raise _corrupt(f"end-transaction marker version {value_version} at offset {batch.base_offset}")
    return ControlMarker(ControlType(kind), coordinator_epoch)


def empty_batch(header: BatchHeader) -> bytes:
    """Kafka's empty batch: a header without records that keeps the batch's offsets, producer
    id, epoch and base sequence (its codec dropped, both timestamps its max timestamp).

    Kafka's cleaner keeps one (BatchRetention.RETAIN_EMPTY) for a producer's last batch that
    loses every record, so the producer's state survives compaction and a reload.
    """
    out = bytearray(HEADER.pack(header.base_offset, HEADER_SIZE - LOG_OVERHEAD, header.partition_leader_epoch,
                                MAGIC, 0, header.attributes & ~_CODEC_MASK, header.last_offset_delta,
                                header.max_timestamp, header.max_timestamp, header.producer_id,
                                header.producer_epoch, header.base_sequence, 0))
    _U32.pack_into(out, 17, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)
