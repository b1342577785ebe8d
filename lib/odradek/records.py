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

``build_batch`` and ``iter_records`` (a slow, record-by-record path) serve tests, ListOffsets
by timestamp and internal topics. Compression uses cramjam: gzip, snappy (xerial framing
written, raw snappy accepted), lz4 (frame format, independent blocks), zstd.

Not thread-safe: a view must not be rewritten while another thread reads it.
"""

from __future__ import annotations

import enum
import struct
import time
from dataclasses import dataclass
from typing import Iterable, Iterator

import cramjam
from crc32c import crc32c

from odradek.errors import ErrorCode, KafkaError

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
MAGIC = 2
CRC_START = 21
NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1

_I16, _I32, _U32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">I"), struct.Struct(">q")
_LENGTH = struct.Struct(">qi")  # baseOffset, batchLength
_CODEC_MASK, _LOG_APPEND_TIME, _TRANSACTIONAL, _CONTROL = 0x07, 0x08, 0x10, 0x20


class Compression(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


def _corrupt(message: str) -> KafkaError:
    return KafkaError(ErrorCode.corrupt_message, message)


class RecordBatch:
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

    @property
    def view(self) -> memoryview:
        """The batch's bytes (no copy)."""
        return self.buf[self.position:self.position + self.size]

    def compute_crc(self) -> int:
        return crc32c(self.buf[self.position + CRC_START:self.position + self.size])

    # -- checks -----------------------------------------------------------------------
    def check(self) -> None:
        """Raise the KafkaError Apache Kafka gives a producer for this batch, if any.

        The header must already be known to fit in the buffer (``split_batches`` checks).
        """
        magic = self.magic
        if magic < MAGIC:
            raise KafkaError(ErrorCode.unsupported_for_message_format,
                             f"record batch magic {magic}: only magic 2 (Kafka 0.11+) is supported")
        if magic > MAGIC:
            raise _corrupt(f"unknown record batch magic {magic}")
        if self.compute_crc() != self.crc:
            raise _corrupt(f"record batch at offset {self.base_offset} fails its CRC-32C "
                           f"(stored {self.crc}, computed {self.compute_crc()})")
        if self.attributes & _CODEC_MASK > max(Compression):
            raise _corrupt(f"unknown compression codec {self.attributes & _CODEC_MASK}")
        count, delta = self.records_count, self.last_offset_delta
        if delta < 0:
            raise KafkaError(ErrorCode.invalid_record,
                             f"Batch has an invalid offset range: lastOffsetDelta {delta}")
        if count <= 0:
            raise KafkaError(ErrorCode.invalid_record, f"Invalid reported count for record batch: {count}")
        if count != delta + 1:
            raise KafkaError(ErrorCode.invalid_record,
                             f"Inconsistent batch offset range (lastOffsetDelta {delta}) "
                             f"and count of records {count}")

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


def split_batches(buf: memoryview) -> list[RecordBatch]:
    """All batches of a produce request's records, each checked; raise on anything wrong."""
    batches: list[RecordBatch] = []
    position, end = 0, len(buf)
    while position < end:
        if end - position < LOG_OVERHEAD + 5:
            raise _corrupt(f"{end - position} trailing bytes are not a record batch")
        base_offset, length = _LENGTH.unpack_from(buf, position)
        magic = buf[position + 16]
        if magic < MAGIC:
            raise KafkaError(ErrorCode.unsupported_for_message_format,
                             f"record batch magic {magic}: only magic 2 (Kafka 0.11+) is supported")
        if length + LOG_OVERHEAD < HEADER_SIZE:
            raise _corrupt(f"record batch length {length} is smaller than a batch header")
        if length + LOG_OVERHEAD > end - position:
            raise _corrupt(f"record batch of {length + LOG_OVERHEAD} bytes truncated to {end - position}")
        batch = RecordBatch(buf, position)
        batch.check()
        batches.append(batch)
        position += batch.size
    if not batches:
        raise KafkaError(ErrorCode.invalid_record, "Produce requests must have at least one record batch")
    return batches


# -- compression --------------------------------------------------------------------------
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


def _snappy_compress(data: bytes | memoryview) -> bytes:
    out, view = bytearray(_XERIAL_HEADER), memoryview(data)
    for i in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[i:i + _XERIAL_BLOCK]))
        out += _I32.pack(len(block)) + block
    return bytes(out)


def _snappy_decompress(data: bytes | memoryview) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    out, position = bytearray(), len(_XERIAL_HEADER)
    while position < len(view):
        size = _I32.unpack_from(view, position)[0]
        out += cramjam.snappy.decompress_raw(view[position + 4:position + 4 + size])
        position += 4 + size
    return bytes(out)


def _lz4_compress(data: bytes | memoryview) -> bytes:
    compressor = cramjam.lz4.Compressor(block_linked=False, content_checksum=False)
    compressor.compress(bytes(data))
    return bytes(compressor.finish())


_CODECS = {
    Compression.NONE: (bytes, bytes),
    Compression.GZIP: (cramjam.gzip.compress, cramjam.gzip.decompress),
    Compression.SNAPPY: (_snappy_compress, _snappy_decompress),
    Compression.LZ4: (_lz4_compress, cramjam.lz4.decompress),
    Compression.ZSTD: (cramjam.zstd.compress, cramjam.zstd.decompress),
}


def compress(codec: Compression, data: bytes | memoryview) -> bytes:
    return bytes(_CODECS[Compression(codec)][0](data))


def decompress(codec: Compression, data: bytes | memoryview) -> bytes:
    try:
        return bytes(_CODECS[Compression(codec)][1](data))
    except (cramjam.DecompressionError, ValueError, struct.error) as e:
        raise _corrupt(f"cannot decompress a {Compression(codec).name} batch: {e}") from None


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


def iter_records(batch: RecordBatch) -> Iterator[Record]:
    """Decode a batch's records (decompressing it): the slow path, for tools and tests.

    Under LogAppendTime every record carries the batch's max timestamp, as Kafka reports it.
    """
    payload = batch.view[HEADER_SIZE:]
    if batch.compression != Compression.NONE:
        payload = memoryview(decompress(batch.compression, payload))
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


def recompress(batch: RecordBatch, codec: Compression) -> bytearray:
    """The same batch with its records block under another codec (header fields kept)."""
    payload = batch.view[HEADER_SIZE:]
    if batch.compression != Compression.NONE:
        payload = decompress(batch.compression, payload)
    payload = compress(codec, payload)
    out = bytearray(HEADER_SIZE + len(payload))
    out[:HEADER_SIZE] = batch.view[:HEADER_SIZE]
    out[HEADER_SIZE:] = payload
    _I32.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    _I16.pack_into(out, 21, (batch.attributes & ~_CODEC_MASK) | int(codec))
    _U32.pack_into(out, 17, crc32c(memoryview(out)[CRC_START:]))
    return out
