"""Record batch v2 views: fields, CRC, in-place rewrites, validation codes, torn tails, codecs."""

from __future__ import annotations

import io
import random
import struct

import crc32c
import lz4.frame
import pytest
import snappy
from kio.records.readers import read_batch

from odradek.errors import ErrorCode, KafkaError
from odradek.records import (HEADER_SIZE, Compression, Record, RecordBatch, TimestampType, build_batch,
                             compress, decompress, iter_batches, iter_records, recompress, split_batches)

from storage_helpers import batch

RECORDS = [Record(b"v1", key=b"k1", headers=(("h", b"x"), ("n", None)), timestamp=1_700_000_000_123),
           Record(None, key=b"tombstone", timestamp=1_700_000_000_100),
           Record(b"v" * 3000, timestamp=1_700_000_000_500)]


@pytest.mark.parametrize("codec", list(Compression))
def test_build_and_decode_roundtrip(codec):
    raw = build_batch(RECORDS, base_offset=10, compression=codec, producer_id=7, producer_epoch=2,
                      base_sequence=5, partition_leader_epoch=3)
    b = RecordBatch(memoryview(raw))
    assert (b.base_offset, b.last_offset, b.records_count, b.size) == (10, 12, 3, len(raw))
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.partition_leader_epoch) == (7, 2, 5, 3)
    assert (b.first_timestamp, b.max_timestamp) == (1_700_000_000_123, 1_700_000_000_500)
    assert b.compression == codec and b.magic == 2 and not b.is_control and not b.is_transactional
    assert b.crc == crc32c.crc32c(bytes(raw[21:]))
    b.check()
    decoded = list(iter_records(b))
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in decoded] == [
        (10 + i, r.key, r.value, r.headers, r.timestamp) for i, r in enumerate(RECORDS)]


def test_kio_reads_what_we_build():
    raw = build_batch(RECORDS, base_offset=4)
    parsed, size = read_batch(memoryview(bytes(raw)), 0)
    assert size == len(raw)
    assert [(r.offset, r.key, r.value) for r in parsed.records] == [(4 + i, r.key, r.value) for i, r in enumerate(RECORDS)]


def test_codecs_interoperate_with_reference_libraries():
    data = bytes(random.Random(1).randbytes(50_000)) + b"abc" * 40_000
    assert lz4.frame.decompress(compress(Compression.LZ4, data)) == data
    assert decompress(Compression.LZ4, lz4.frame.compress(data)) == data
    assert decompress(Compression.SNAPPY, snappy.compress(data)) == data  # raw snappy accepted
    assert decompress(Compression.SNAPPY, compress(Compression.SNAPPY, data)) == data  # xerial framing
    assert compress(Compression.SNAPPY, data).startswith(b"\x82SNAPPY\x00")
    with pytest.raises(KafkaError) as e:
        decompress(Compression.GZIP, b"not gzip")
    assert e.value.code == ErrorCode.corrupt_message


def test_rewrites_in_place_keep_or_fix_the_crc():
    raw = batch(b"a", b"b", ts=500)
    b = RecordBatch(memoryview(raw))
    b.set_base_offset(1234)
    b.set_partition_leader_epoch(9)
    b.check()  # offset and epoch lie before the CRC'd range
    assert (b.base_offset, b.last_offset, b.partition_leader_epoch) == (1234, 1235, 9)
    b.set_log_append_time(99_999)
    b.check()
    assert b.timestamp_type == TimestampType.LOG_APPEND_TIME and b.max_timestamp == 99_999
    assert [r.timestamp for r in iter_records(b)] == [99_999, 99_999]


def test_flipped_byte_fails_the_crc():
    raw = batch(b"hello", b"world")
    for position in (21, 30, HEADER_SIZE, len(raw) - 1):
        bad = bytearray(raw)
        bad[position] ^= 0x40
        with pytest.raises(KafkaError) as e:
            RecordBatch(memoryview(bad)).check()
        assert e.value.code == ErrorCode.corrupt_message
    bad = bytearray(raw)
    bad[-1] ^= 1
    with pytest.raises(KafkaError) as e:
        RecordBatch(memoryview(bad)).check()
    assert e.value.code == ErrorCode.corrupt_message


def _with(raw: bytearray, fmt: str, at: int, value: int, fix_crc: bool = True) -> bytearray:
    out = bytearray(raw)
    struct.pack_into(fmt, out, at, value)
    if fix_crc:
        struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return out


@pytest.mark.parametrize("mutate, code", [
    (lambda r: _with(r, ">b", 16, 1, False), ErrorCode.invalid_record),   # an old message set, Produce v3+
    (lambda r: _with(r, ">b", 16, 3, False), ErrorCode.corrupt_message),
    (lambda r: _with(r, ">I", 17, 12345, False), ErrorCode.corrupt_message),
    (lambda r: r[:-3], ErrorCode.invalid_record),   # Kafka reads no batch in it
    (lambda r: r + r[:-3], ErrorCode.corrupt_message),
    (lambda r: r + b"\x00" * 5, ErrorCode.corrupt_message),
    (lambda r: _with(r, ">i", 8, 10, False), ErrorCode.corrupt_message),
    (lambda r: _with(r, ">i", 57, 3), ErrorCode.invalid_record),
    (lambda r: _with(_with(r, ">i", 57, 0), ">i", 23, -1), ErrorCode.invalid_record),
    (lambda r: _with(r, ">h", 21, 6), ErrorCode.corrupt_message),
    (lambda r: bytearray(), ErrorCode.invalid_record),
])
def test_split_batches_reports_kafka_error_codes(mutate, code):
    raw = batch(b"a", b"b")
    with pytest.raises(KafkaError) as e:
        split_batches(memoryview(mutate(raw)))
    assert e.value.code == code


def test_iter_batches_stops_before_a_torn_tail():
    raws = [batch(b"x" * n) for n in (1, 50, 200)]
    whole = b"".join(raws)
    ends = [sum(len(r) for r in raws[:i + 1]) for i in range(3)]
    for cut in random.Random(3).sample(range(len(whole) + 1), 60) + ends:
        found = list(iter_batches(memoryview(whole[:cut])))
        assert len(found) == sum(1 for e in ends if e <= cut)
    assert [b.records_count for b in split_batches(memoryview(bytearray(whole)))] == [1, 1, 1]


def test_recompress_keeps_records_and_header_fields():
    raw = build_batch(RECORDS, producer_id=3, producer_epoch=1, base_sequence=0)
    original = RecordBatch(memoryview(raw))
    for codec in Compression:
        out = RecordBatch(memoryview(recompress(original, codec)))
        out.check()
        assert out.compression == codec and out.producer_id == 3 and out.records_count == 3
        assert list(iter_records(out)) == list(iter_records(original))
