"""Log: append (offsets, validation codes, rolls), reads, timestamp lookups, retention, truncation."""

from __future__ import annotations

import os

import pytest
from crc32c import crc32c

from odradek.broker.storage import AppendInfo, TimestampOffset
from odradek.broker.storage.checkpoint import read_checkpoint
from odradek.errors import ErrorCode, KafkaError, RecordError, RecordValidationError
from odradek.records import Compression, Record, RecordBatch, TimestampType, build_batch, iter_records

from storage_helpers import batch, decode, open_log, read_records


def fill(log, n: int, *, per_batch: int = 1, size: int = 40, ts0: int = 1_000) -> None:
    for i in range(n):
        values = [bytes([65 + i % 26]) * size for _ in range(per_batch)]
        log.append(batch(*values, ts=ts0 + i * per_batch), leader_epoch=0, now_ms=ts0)
    log.high_watermark = log.log_end_offset


def test_append_assigns_offsets_and_rewrites_headers(tmp_path):
    log = open_log(tmp_path / "t-0")
    data = batch(b"a", b"b", b"c", ts=500, step=100)
    info = log.append(memoryview(data), leader_epoch=4, now_ms=9)
    assert info == AppendInfo(first_offset=0, last_offset=2, max_timestamp=700, offset_of_max_timestamp=2,
                              log_append_time_ms=-1, log_start_offset=0, records_count=3, valid_bytes=len(data))
    assert log.append(batch(b"d", ts=600), leader_epoch=4).first_offset == 3
    info2 = log.append(batch(b"e"), leader_epoch=5)
    assert (info2.first_offset, info2.last_offset, log.log_end_offset) == (4, 4, 5)
    stored = decode(log.read(0, 10_000).read())
    assert [(b.base_offset, b.partition_leader_epoch) for b in stored] == [(0, 4), (3, 4), (4, 5)]
    assert all(b.compute_crc() == b.crc for b in stored)
    assert [r.value for r in read_records(log)] == [b"a", b"b", b"c", b"d", b"e"]
    assert log.leader_epochs.entries == [(4, 0), (5, 4)]
    assert read_checkpoint(tmp_path / "t-0" / "leader-epoch-checkpoint", 2) == [["4", "0"], ["5", "4"]]
    assert log.end_offset_for_epoch(4) == (4, 4) and log.end_offset_for_epoch(5) == (5, 5)


def test_read_only_buffers_are_written_with_stamped_headers_and_left_as_they_were(tmp_path):
    log = open_log(tmp_path / "t-0", message_timestamp_type="LogAppendTime")
    log.append(bytes(batch(b"x")), leader_epoch=0)
    sent = bytes(batch(*(bytes([i % 256]) for i in range(700))))
    info = log.append(memoryview(sent), leader_epoch=3, now_ms=5_000)
    assert (info.first_offset, info.last_offset, info.valid_bytes) == (1, 700, len(sent))
    assert all(b.base_offset == 0 and b.partition_leader_epoch == -1 for b in decode(sent))   # untouched
    stored = decode(log.read(0, 10**6).read())
    assert [(b.base_offset, b.partition_leader_epoch) for b in stored] == [(0, 0), (1, 3)]
    assert stored[1].compute_crc() == stored[1].crc and stored[1].max_timestamp == 5_000
    assert [r.value for r in read_records(log)] == [b"x"] + [bytes([i % 256]) for i in range(700)]


def _bad_crc(raw):
    raw[-1] ^= 1
    return raw


@pytest.mark.parametrize("bad, code", [   # a second whole batch: refused as one batch too many, unchecked
    (lambda: _bad_crc(batch(b"x")), ErrorCode.invalid_record),
    (lambda: batch(b"x")[:-1], ErrorCode.corrupt_message),
    (lambda: batch(b"x", control=True), ErrorCode.invalid_record),
    (lambda: batch(b"x", producer_id=5, producer_epoch=0, base_sequence=-1), ErrorCode.invalid_record),
    (lambda: batch(b"x" * 2000), ErrorCode.invalid_record),
])
def test_a_refused_append_writes_none_of_its_batches(tmp_path, bad, code):
    log = open_log(tmp_path / "t-0", max_message_bytes=1000)
    fill(log, 2)
    size = log.size
    with pytest.raises(KafkaError) as e:
        log.append(batch(b"good") + bad(), leader_epoch=0)
    assert e.value.code == code
    assert (log.log_end_offset, log.size, os.path.getsize(log.active_segment.log.path)) == (2, size, size)


def _keyed(*keys: bytes | None, compression: Compression = Compression.NONE) -> bytearray:
    return build_batch([Record(b"v", key=k, timestamp=1_000) for k in keys], compression=compression)


KEYLESS = "Compacted topic cannot accept message without key in topic partition t-0"


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.LZ4, Compression.ZSTD])
def test_a_compacted_topic_refuses_records_without_a_key_and_writes_nothing(tmp_path, compression):
    """Kafka's LogValidator.validateKey: INVALID_RECORD, a record error per keyless record of the
    first batch that has one (its index in that batch), the whole append refused."""
    log = open_log(tmp_path / "t-0", cleanup_policy="compact")
    log.append(_keyed(b"a"), leader_epoch=0)
    size = log.size
    with pytest.raises(RecordValidationError) as e:
        log.append(_keyed(b"c", None, b"d", None, compression=compression), leader_epoch=0)
    assert e.value.code == ErrorCode.invalid_record
    assert e.value.record_errors == (RecordError(1, KEYLESS), RecordError(3, KEYLESS))
    assert e.value.message == (
        "One or more records have been rejected due to 2 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=1, message='{KEYLESS}'), "
        f"RecordError(batchIndex=3, message='{KEYLESS}')]")
    assert (log.log_end_offset, log.size) == (1, size)


@pytest.mark.parametrize("policy, keys", [("compact", (b"a", b"", b"c")), ("compact,delete", (b"k",)),
                                          ("delete", (None, None))])
def test_keyed_records_and_other_topics_are_appended_as_before(tmp_path, policy, keys):
    """An empty key is a key; a topic without ``compact`` takes records without one."""
    log = open_log(tmp_path / "t-0", cleanup_policy=policy, compression_type="gzip")
    info = log.append(_keyed(*keys, compression=Compression.SNAPPY), leader_epoch=0)
    assert (info.first_offset, info.last_offset) == (0, len(keys) - 1)
    assert [r.key for r in read_records(log)] == list(keys)


def test_a_compacted_topic_refuses_records_that_do_not_parse_as_kafka_does(tmp_path):
    raw = _keyed(b"a", b"b")
    raw[61] = 0x7E                                  # the first record's length (63) now runs past the batch
    raw[17:21] = crc32c(memoryview(raw)[21:]).to_bytes(4, "big")
    with pytest.raises(KafkaError) as e:
        open_log(tmp_path / "t-0", cleanup_policy="compact").append(raw, leader_epoch=0)
    assert (e.value.code, e.value.message) == (ErrorCode.invalid_record, "Found invalid record structure")


def test_append_larger_than_a_segment_is_refused(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=500)
    with pytest.raises(KafkaError) as e:
        log.append(batch(b"x" * 300, b"y" * 300), leader_epoch=0)
    assert e.value.code == ErrorCode.record_list_too_large


def test_log_append_time(tmp_path):
    log = open_log(tmp_path / "t-0", message_timestamp_type="LogAppendTime")
    info = log.append(batch(b"a", b"b", ts=5), leader_epoch=0, now_ms=77_000)
    assert info.log_append_time_ms == 77_000 and info.max_timestamp == 77_000
    (stored,) = decode(log.read(0, 1000).read())
    assert stored.timestamp_type == TimestampType.LOG_APPEND_TIME and stored.max_timestamp == 77_000
    assert stored.compute_crc() == stored.crc
    assert log.offset_for_timestamp(77_000) == TimestampOffset(77_000, 0)
    assert log.latest_timestamp() == TimestampOffset(77_000, 0)


def test_topic_compression_type_recompresses(tmp_path):
    log = open_log(tmp_path / "t-0", compression_type="zstd")
    log.append(batch(b"a" * 500, b"b", compression=Compression.GZIP), leader_epoch=0)
    log.append(batch(b"c"), leader_epoch=0)
    stored = decode(log.read(0, 10_000).read())
    assert [b.compression for b in stored] == [Compression.ZSTD, Compression.ZSTD]
    assert [r.value for r in read_records(log)] == [b"a" * 500, b"b", b"c"]


def test_roll_by_size_keeps_segments_under_segment_bytes(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=400)
    fill(log, 30)  # ~100-byte batches
    assert len(log.segments) > 5
    assert all(s.size <= 400 for s in log.segments)
    bases = [s.base_offset for s in log.segments]
    assert bases == sorted(bases) and bases[0] == 0
    assert all(a.next_offset == b.base_offset for a, b in zip(log.segments, log.segments[1:]))
    assert [r.offset for r in read_records(log)] == list(range(30))
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.log"))[1] == f"{bases[1]:020d}.log"


def test_roll_by_segment_ms_uses_batch_timestamps(tmp_path):
    log = open_log(tmp_path / "t-0", segment_ms=1000)
    log.append(batch(b"a", ts=10_000), leader_epoch=0, now_ms=0)
    log.append(batch(b"b", ts=10_900), leader_epoch=0, now_ms=0)
    assert len(log.segments) == 1
    log.append(batch(b"c", ts=11_001), leader_epoch=0, now_ms=0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_when_the_index_is_full(tmp_path):
    log = open_log(tmp_path / "t-0", segment_index_bytes=24, index_interval_bytes=1)
    fill(log, 12)
    assert len(log.segments) > 2
    assert all(s.offset_index.entries <= 3 for s in log.segments)
    assert [r.offset for r in read_records(log)] == list(range(12))


def test_read_limits(tmp_path):
    log = open_log(tmp_path / "t-0", index_interval_bytes=150)
    fill(log, 10, per_batch=3)  # batches of 3 records, offsets 0..29
    size = decode(log.read(0, 10**6).read())[0].size
    whole = log.read(4, 3 * size + size // 2)  # offset 4 lies in the batch 3..5
    assert (whole.first_offset, whole.next_offset, whole.size) == (3, 12, 3 * size)
    assert [b.base_offset for b in decode(whole.read())] == [3, 6, 9]
    one = log.read(4, 10, min_one_batch=True)
    assert (one.first_offset, one.next_offset, one.size) == (3, 6, size)
    none = log.read(4, 10, min_one_batch=False)
    assert none.size == 0
    capped = log.read(0, 10**6, max_offset=9)  # the high watermark
    assert (capped.first_offset, capped.next_offset) == (0, 9)
    assert log.read(9, 10**6, max_offset=9).size == 0
    end = log.read(30, 100)
    assert (end.size, end.fd) == (0, -1)
    for bad in (31, -1):
        with pytest.raises(KafkaError) as e:
            log.read(bad, 100)
        assert e.value.code == ErrorCode.offset_out_of_range
    for offset in range(30):  # every offset, found through the sparse index
        assert log.read(offset, 1).first_offset == offset - offset % 3


def test_read_crosses_segments_one_at_a_time(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=300)
    fill(log, 9)
    second = log.segments[1]
    piece = log.read(second.base_offset, 10**6)
    assert (piece.first_offset, piece.next_offset) == (second.base_offset, second.next_offset)
    assert piece.fd == second.log.fd


def test_timestamp_lookups(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=600, index_interval_bytes=100)
    for i in range(20):  # records at 1000 + 10*i*3 + {0, 10, 20}, except one out-of-order record
        ts = 1000 + 30 * i
        recs = [Record(b"v", timestamp=ts), Record(b"w", timestamp=ts + 20 if i != 7 else 5_000),
                Record(b"x", timestamp=ts + 10)]
        log.append(build_batch(recs), leader_epoch=0)
    assert len(log.segments) > 2
    assert log.offset_for_timestamp(0) == TimestampOffset(1000, 0)
    assert log.offset_for_timestamp(1011) == TimestampOffset(1020, 1)   # first record >= ts, in order
    assert log.offset_for_timestamp(1221) == TimestampOffset(5_000, 22)  # batch 7's max
    assert log.offset_for_timestamp(1589) == TimestampOffset(5_000, 22)
    assert log.offset_for_timestamp(1580) == TimestampOffset(5_000, 22)  # not (1580, 57): 22 comes first
    assert log.offset_for_timestamp(5_001) is None
    assert log.latest_timestamp() == TimestampOffset(5_000, 22)
    records = read_records(log)
    for ts in range(990, 1620, 7):  # against a brute-force scan of all records
        expected = next(((r.timestamp, r.offset) for r in records if r.timestamp >= ts), None)
        assert log.offset_for_timestamp(ts) == (TimestampOffset(*expected) if expected else None)


def test_retention_by_time_deletes_old_segments_and_rolls_the_active(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=300, retention_ms=1000, file_delete_delay_ms=0)
    fill(log, 12, ts0=10_000)  # timestamps 10_000..10_011
    segments = log.segments
    assert log.apply_retention(now_ms=10_500) == 0
    piece = log.read(0, 1000)
    last_of_first = segments[0].largest_timestamp
    deleted = log.apply_retention(now_ms=last_of_first + 1001)
    assert deleted >= 1 and log.log_start_offset == log.segments[0].base_offset > 0
    assert (tmp_path / "t-0" / "00000000000000000000.log.deleted").exists()
    assert os.pread(piece.fd, piece.size, piece.position) == piece.read()  # the fd still works
    with pytest.raises(KafkaError):
        log.read(0, 100)
    purged = log.purge_deleted(now_ms=last_of_first + 1001)   # closed; the caller unlinks (off the loop)
    assert set(purged) >= set((tmp_path / "t-0").glob("*.deleted")) > set()
    for path in purged:
        path.unlink(missing_ok=True)
    remaining = len(log.segments)
    assert log.apply_retention(now_ms=10**9) == remaining
    assert log.log_start_offset == log.log_end_offset == 12 and log.size == 0  # everything expired
    log.append(batch(b"z"), leader_epoch=0)
    assert log.log_end_offset == 13 and [r.offset for r in read_records(log)] == [12]


def test_retention_by_bytes_and_the_high_watermark(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=300, retention_bytes=700, retention_ms=-1)
    fill(log, 20)
    log.high_watermark = 5  # nothing whose end passes the high watermark may go
    log.apply_retention(now_ms=0)
    assert log.log_start_offset <= 5 and log.segments[0].base_offset <= 5
    log.high_watermark = log.log_end_offset
    assert log.size > 700
    assert log.apply_retention(now_ms=0) > 0
    assert log.size >= 700  # never more than the excess goes...
    assert log.size - log.segments[0].size < 700  # ...but all of it that whole segments make up
    assert log.log_start_offset == log.segments[0].base_offset
    assert [r.offset for r in read_records(log)] == list(range(log.log_start_offset, 20))


def test_increment_log_start_offset_then_retention(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=300, retention_ms=-1)
    fill(log, 12)
    target = log.segments[2].base_offset + 1
    log.increment_log_start_offset(target)
    assert log.log_start_offset == target
    assert log.apply_retention(now_ms=0) == 2
    assert log.segments[0].base_offset < target
    assert read_records(log)[0].offset == target


@pytest.mark.parametrize("records", [0, 3])
@pytest.mark.parametrize("retention_ms, retention_bytes", [(-1, -1), (1000, -1), (10**9, -1), (-1, 0), (-1, 50), (1000, 0)])
@pytest.mark.parametrize("now_ms", [1_500, 10**8])
@pytest.mark.parametrize("hw_at_end", [True, False])
def test_a_single_segment_logs_shortcut_decides_as_the_retention_rules(tmp_path, records, retention_ms,
                                                                       retention_bytes, now_ms, hw_at_end):
    """The idle-log shortcut (most logs of a large broker, every tick) keeps exactly what the
    full rules keep: the same log, retention applied with and without it."""
    def outcome(directory, shortcut: bool):
        log = open_log(directory, retention_ms=retention_ms, retention_bytes=retention_bytes, file_delete_delay_ms=0)
        fill(log, records)
        if not hw_at_end:
            log.high_watermark = 0
        if not shortcut:
            log._single_segment_kept = lambda now: False
        deleted = log.apply_retention(now_ms=now_ms)
        return deleted, log.log_start_offset, [s.base_offset for s in log.segments]

    assert outcome(tmp_path / "a-0", True) == outcome(tmp_path / "b-0", False)


def test_truncate_to_and_continue(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=300, index_interval_bytes=50)
    fill(log, 15)
    log.truncate_to(7)
    assert log.log_end_offset == 7 and log.high_watermark == 7
    assert [s.base_offset for s in log.segments if s.base_offset >= 7] == []
    fill(log, 3)
    assert [r.offset for r in read_records(log)] == list(range(10))
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (100, 100, 1)
    fill(log, 1)
    assert [r.offset for r in read_records(log)] == [100]


def test_follower_append_keeps_offsets_and_epochs(tmp_path):
    leader = open_log(tmp_path / "t-0")
    leader.append(batch(b"a", b"b"), leader_epoch=3)
    leader.append(batch(b"c"), leader_epoch=4)
    follower = open_log(tmp_path / "t-1")
    follower.append_as_follower(leader.read(0, 10**6).read())
    assert follower.log_end_offset == 3 and follower.leader_epochs.entries == [(3, 0), (4, 2)]
    with pytest.raises(KafkaError):
        follower.append_as_follower(leader.read(0, 10**6).read())  # offsets go backwards


def test_flush_messages_moves_the_recovery_point(tmp_path):
    log = open_log(tmp_path / "t-0", flush_messages=3)
    fill(log, 2)
    assert log.recovery_point == 0
    fill(log, 1)
    assert log.recovery_point == 3
    log.roll()
    fill(log, 1)
    assert log.flush_plan(now_ms=0) is None  # the rolled segment was already flushed
    log.flush()
    assert log.recovery_point == log.log_end_offset == 4


def test_rolled_segments_are_flushed_by_the_plan(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=300)
    fill(log, 10)
    plan = log.flush_plan(now_ms=0)
    assert plan.up_to == log.active_segment.base_offset
    plan.run()
    log.flushed(plan)
    assert log.recovery_point == log.active_segment.base_offset
    assert log.flush_plan(now_ms=0) is None


def test_closed_log_refuses_work(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.close()
    with pytest.raises(KafkaError):
        log.append(batch(b"x"), leader_epoch=0)


def _flip_a_record_byte(data: bytearray) -> bytearray:
    data[-3] ^= 0xFF
    return data


@pytest.mark.parametrize("spoil, why", [
    (_flip_a_record_byte, "is corrupt"),
    (lambda data: data + b"\0" * 20, "not whole record batches"),   # a torn tail after a whole batch
    (lambda data: bytearray(), "not whole record batches"),
])
def test_a_follower_refuses_replicated_bytes_that_are_not_whole_sound_batches_and_writes_nothing(tmp_path, spoil, why):
    """Kafka's follower checks each batch's magic and CRC (``ensureValid``) and that the fetched
    bytes are whole batches: CORRUPT_MESSAGE, and the log is as it was."""
    leader, follower = open_log(tmp_path / "l-0"), open_log(tmp_path / "f-0")
    fill(leader, 3)
    follower.append_as_follower(leader.read(0, 1 << 20, max_offset=2).read())
    rest = bytearray(leader.read(2, 1 << 20).read())
    with pytest.raises(KafkaError) as refused:
        follower.append_as_follower(spoil(rest))
    assert refused.value.code == ErrorCode.corrupt_message and why in refused.value.message
    assert follower.log_end_offset == 2 and follower.size == leader.read(0, 1 << 20, max_offset=2).size
    follower.append_as_follower(leader.read(2, 1 << 20).read())   # the sound bytes are taken as they are
    assert follower.log_end_offset == 3 and read_records(follower) == read_records(leader)
    leader.close()
    follower.close()


def test_control_batches_from_the_log_are_served_as_is(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append_as_follower(build_batch([Record(b"m")], control=True, transactional=True, producer_id=1,
                                       producer_epoch=0, base_sequence=-1))
    (b,) = decode(log.read(0, 100).read())
    assert b.is_control and b.is_transactional
    assert list(iter_records(RecordBatch(memoryview(bytearray(log.read(0, 100).read())))))[0].value == b"m"
