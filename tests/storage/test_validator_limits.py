"""Checks of Kafka 3.9's LogValidator on a leader's append: record timestamps against
message.timestamp.before/after.max.ms (and the deprecated difference.max.ms), one batch
per append, a producer's baseOffset (0) and a producer's batch flagged LogAppendTime."""

from __future__ import annotations

import pytest

from odradek.broker.storage.config import LogConfig
from odradek.broker.storage.validator import validate_append
from odradek.config import LONG_MAX
from odradek.errors import ErrorCode, KafkaError, ProduceRecordsError, RecordError, RecordValidationError
from odradek.records import Compression, Record, RecordBatch, TimestampType, build_batch

from storage_helpers import batch, open_log

NOW = 1_700_000_000_000
HOUR = 3_600_000


def _stamped(*timestamps: int, compression: Compression = Compression.NONE, key: bytes | None = b"k",
             timestamp_type: TimestampType = TimestampType.CREATE_TIME) -> bytearray:
    return build_batch([Record(b"v", key=key, timestamp=t) for t in timestamps], compression=compression,
                       timestamp_type=timestamp_type)


def _late(index: int, timestamp: int, low: int, high: int) -> RecordError:
    return RecordError(index, f"Timestamp {timestamp} of message with offset {index} is out of range. "
                              f"The timestamp should be within [{low}, {high}]")


@pytest.mark.parametrize("overrides, defaults, limits", [
    ({}, {}, None),
    ({"message.timestamp.before.max.ms": "5"}, {}, (5, LONG_MAX)),
    ({"message.timestamp.difference.max.ms": "7"}, {}, (7, 7)),
    ({"message.timestamp.difference.max.ms": "7", "message.timestamp.after.max.ms": "3"}, {}, (7, 3)),
    # Kafka's broker-wide derivation first: the broker's difference fills its own before/after,
    # which a topic inherits over its own difference.max.ms
    ({"message.timestamp.difference.max.ms": "9"}, {"message.timestamp.difference.max.ms": "4"}, (4, 4)),
    ({"message.timestamp.after.max.ms": "2"}, {"message.timestamp.before.max.ms": "8"}, (8, 2)),
    ({"message.timestamp.before.max.ms": "5", "message.timestamp.type": "LogAppendTime"}, {}, None),
])
def test_limits_in_force_as_kafka_derives_them(overrides, defaults, limits):
    assert LogConfig.from_overrides(overrides, defaults).timestamp_limits == limits


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.ZSTD])
def test_records_stamped_too_early_or_too_late_are_refused_and_nothing_is_written(tmp_path, compression):
    log = open_log(tmp_path / "t-0", message_timestamp_before_max_ms=HOUR, message_timestamp_after_max_ms=1_000)
    log.append(_stamped(NOW - HOUR, NOW + 1_000, compression=compression), leader_epoch=0, now_ms=NOW)
    size = log.size
    with pytest.raises(RecordValidationError) as e:
        log.append(_stamped(NOW, NOW - HOUR - 1, NOW + 1_001, compression=compression), leader_epoch=0, now_ms=NOW)
    low, high = NOW - HOUR, NOW + 1_000
    assert (e.value.code, e.value.message) == (ErrorCode.invalid_timestamp,
                                               "One or more records have been rejected due to invalid timestamp")
    assert e.value.record_errors == (_late(1, NOW - HOUR - 1, low, high), _late(2, NOW + 1_001, low, high))
    assert (log.log_end_offset, log.size) == (2, size)


def test_difference_max_ms_bounds_both_sides_and_the_message_has_kafkas_java_figures(tmp_path):
    log = open_log(tmp_path / "t-0", message_timestamp_difference_max_ms=10)
    with pytest.raises(RecordValidationError) as e:
        log.append(_stamped(NOW + 11), leader_epoch=0, now_ms=NOW)
    assert e.value.record_errors == (_late(0, NOW + 11, NOW - 10, NOW + 10),)
    only_before = open_log(tmp_path / "u-0", message_timestamp_before_max_ms=10)
    with pytest.raises(RecordValidationError) as e:
        only_before.append(_stamped(NOW - 11), leader_epoch=0, now_ms=NOW)
    # now + Long.MAX wraps in Kafka's message, as Java's long arithmetic does
    assert e.value.record_errors == (_late(0, NOW - 11, NOW - 10, NOW + LONG_MAX - 2**64),)
    only_before.append(_stamped(NOW + 10**12), leader_epoch=0, now_ms=NOW)


def test_log_append_time_and_default_topics_take_any_timestamp(tmp_path):
    stamped = open_log(tmp_path / "t-0", message_timestamp_type="LogAppendTime", message_timestamp_before_max_ms=1)
    assert stamped.append(_stamped(0, NOW + HOUR), leader_epoch=0, now_ms=NOW).log_append_time_ms == NOW
    plain = open_log(tmp_path / "u-0")
    assert plain.append(_stamped(0, 2**62), leader_epoch=0, now_ms=NOW).last_offset == 1


def test_a_producer_batch_flagged_log_append_time_is_checked_by_its_max_timestamp(tmp_path):
    """Kafka reads each record of such a batch as the batch's max timestamp."""
    log = open_log(tmp_path / "t-0", message_timestamp_before_max_ms=HOUR)
    flagged = _stamped(NOW, NOW - 2 * HOUR, timestamp_type=TimestampType.LOG_APPEND_TIME)
    assert log.append(flagged, leader_epoch=0, now_ms=NOW + HOUR // 2).last_offset == 1
    with pytest.raises(RecordValidationError) as e:
        log.append(flagged, leader_epoch=0, now_ms=NOW + 2 * HOUR)
    assert [r.batch_index for r in e.value.record_errors] == [0, 1]


def test_on_a_compacted_topic_keyless_and_late_records_are_refused_together_as_invalid_timestamp(tmp_path):
    """Kafka: a record's key error first, else its timestamp; any timestamp error makes it INVALID_TIMESTAMP."""
    log = open_log(tmp_path / "t-0", cleanup_policy="compact", message_timestamp_before_max_ms=HOUR)
    sent = build_batch([Record(b"v", key=None, timestamp=0), Record(b"v", key=b"k", timestamp=0),
                        Record(b"v", key=b"k", timestamp=NOW)])
    with pytest.raises(RecordValidationError) as e:
        log.append(sent, leader_epoch=0, now_ms=NOW)
    assert e.value.code == ErrorCode.invalid_timestamp and e.value.keyless == 1
    keyless = "Compacted topic cannot accept message without key in topic partition t-0"
    assert e.value.record_errors == (RecordError(0, keyless), _late(1, 0, NOW - HOUR, NOW + LONG_MAX - 2**64))


@pytest.mark.parametrize("topic_codec, codecs", [
    ("producer", (Compression.NONE, Compression.NONE)),
    ("producer", (Compression.GZIP, Compression.NONE)),
    ("uncompressed", (Compression.ZSTD, Compression.ZSTD)),
    ("gzip", (Compression.NONE, Compression.LZ4)),
])
def test_more_than_one_batch_is_refused_compressed_or_not_as_kafka_3_9_does(tmp_path, topic_codec, codecs):
    log = open_log(tmp_path / "t-0", compression_type=topic_codec)
    with pytest.raises(ProduceRecordsError) as e:   # answered with a null message and no log start offset
        log.append(b"".join(batch(b"a", compression=c) for c in codecs), leader_epoch=0)
    assert e.value.code == ErrorCode.invalid_record
    assert log.log_end_offset == 0


def _flagged(max_timestamp: int, compression: Compression = Compression.NONE) -> bytearray:
    """A producer's batch flagged LogAppendTime with ``max_timestamp`` (-1: none), a keyless record second."""
    sent = build_batch([Record(b"v1", key=b"k", timestamp=NOW - 5), Record(b"value2", key=None, timestamp=NOW)],
                       compression=compression)
    RecordBatch(memoryview(sent)).set_log_append_time(max_timestamp)
    return sent


def _stamp_type_error(index: int, kind: str, timestamp: int, key: int, value: int) -> RecordError:
    return RecordError(index, f"Invalid timestamp type in message {kind}(offset={index}, timestamp={timestamp}, "
                              f"key={key} bytes, value={value} bytes). Producer should not set timestamp type to "
                              f"LogAppendTime.")


# the messages as a Kafka 3.9.2 broker answered the same bytes (a null key: -1 bytes when Kafka
# keeps the compressed batch as it is, and reads its records partially; 0 bytes otherwise)
@pytest.mark.parametrize("topic, codec, kind, null_key", [
    ({"message.timestamp.type": "LogAppendTime"}, Compression.NONE, "DefaultRecord", 0),
    ({"message.timestamp.type": "LogAppendTime"}, Compression.GZIP, "PartialDefaultRecord", -1),
    ({"message.timestamp.type": "LogAppendTime", "compression.type": "lz4"}, Compression.GZIP, "DefaultRecord", 0),
    ({}, Compression.NONE, "DefaultRecord", 0),       # CreateTime: refused only without a max timestamp
])
def test_a_producer_batch_flagged_log_append_time_is_refused_as_kafka_3_9_refuses_it(topic, codec, kind, null_key):
    max_timestamp = NOW if topic else -1
    with pytest.raises(RecordValidationError) as e:
        validate_append(_flagged(max_timestamp, codec), LogConfig.from_overrides(topic), next_offset=3,
                        leader_epoch=0, now_ms=NOW + 9)
    assert (e.value.code, e.value.message) == (ErrorCode.invalid_timestamp,
                                               "One or more records have been rejected due to invalid timestamp")
    assert e.value.record_errors == (_stamp_type_error(0, kind, max_timestamp, 1, 2),
                                     _stamp_type_error(1, kind, max_timestamp, null_key, 6))


def test_under_create_time_a_flagged_batch_with_a_max_timestamp_is_written_with_the_flag_cleared():
    """As Kafka 3.9.2 stores it: CreateTime, maxTimestamp kept, the CRC over the new attributes."""
    appended = validate_append(_flagged(NOW), LogConfig.from_overrides({}), next_offset=3, leader_epoch=0, now_ms=NOW)
    written = RecordBatch(memoryview(b"".join(appended.pieces)))
    assert (written.timestamp_type, written.max_timestamp) == (TimestampType.CREATE_TIME, NOW)
    assert written.compute_crc() == written.crc and appended.log_append_time_ms == -1


@pytest.mark.parametrize("base_offset", [5, -1])
def test_a_producer_batch_whose_base_offset_is_not_0_is_invalid_record_before_its_size_is_checked(base_offset):
    sent = batch(b"x" * 100)
    RecordBatch(memoryview(sent)).set_base_offset(base_offset)
    with pytest.raises(KafkaError) as e:
        validate_append(sent, LogConfig.from_overrides({"max.message.bytes": "50"}), next_offset=0, leader_epoch=0,
                        now_ms=NOW, topic_partition="t-0")
    assert (e.value.code, e.value.message) == (
        ErrorCode.invalid_record, f"The baseOffset of the record batch in the append to t-0 should be 0, but it is "
                                  f"{base_offset}")
