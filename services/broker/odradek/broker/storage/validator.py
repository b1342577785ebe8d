"""Validation and offset assignment of appended batches (Kafka's LogValidator, header-only).

Owns no files. A producer's append is checked before any of it is touched, with the error
code Apache Kafka answers a producer. First what Kafka's ProduceRequest.validateRecords refuses
before any other check (ProduceRecordsError): no batch, magic 0/1 (an old message set, Produce
v3+), more than one batch: INVALID_RECORD. Then the one batch:
- a baseOffset other than 0: INVALID_RECORD, then a batch larger than ``max.message.bytes``:
  MESSAGE_TOO_LARGE (UnifiedLog.analyzeAndValidateRecords, before any other check of the batch);
- magic > 2, bad CRC-32C, a truncated batch (the first one: no batch, INVALID_RECORD), a
  length shorter than a header, an unknown codec: CORRUPT_MESSAGE;
- recordsCount <= 0, recordsCount != lastOffsetDelta + 1, a control batch from a client, a
  producer id without a base sequence: INVALID_RECORD;
- the whole append larger than ``segment.bytes``: RECORD_LIST_TOO_LARGE;
- on a compacted topic (``cleanup.policy`` has ``compact``), a record without a key:
  INVALID_RECORD with a record error per keyless record of the first batch that has one (its
  index in the batch), Kafka's LogValidator.validateKey;
- under CreateTime with ``message.timestamp.before.max.ms`` / ``after.max.ms`` (or the
  deprecated ``difference.max.ms``) set, a record stamped too far from the broker's clock:
  INVALID_TIMESTAMP with a record error per such record of the first batch that has one
  (validateTimestamp);
- a batch flagged LogAppendTime on a LogAppendTime topic, or without a maxTimestamp (-1):
  INVALID_TIMESTAMP with a record error per record ("Producer should not set timestamp type to
  LogAppendTime", validateTimestamp). Under CreateTime, one with a maxTimestamp is taken, each
  record read as stamped with it, and written with the flag cleared, as Kafka does.
Only for these three checks are records read (compressed batches decompressed): other appends
stay header-only.
Then each batch's header is stamped on a copy of its 61 bytes: baseOffset and
partitionLeaderEpoch (no CRC recompute), and under ``message.timestamp.type=LogAppendTime`` the
timestamp type bit and maxTimestamp (CRC recomputed); what is written is that header followed by
the batch's records, straight from the caller's buffer (read-only, never copied: a copy of each
produce request's records was 4-7% of a produce's CPU). A topic ``compression.type`` other than
``producer`` recompresses batches that use another codec (their records block only; record bytes
are not re-encoded). Followers' and markers' batches are written as they are.
Not thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass

from crc32c import crc32c

from odradek.errors import ErrorCode, KafkaError, ProduceRecordsError, RecordError, RecordValidationError
from odradek.records import (CRC_START, HEADER_SIZE, LOG_APPEND_TIME_FLAG, LOG_OVERHEAD, MAGIC, NO_TIMESTAMP,
                             BatchHeader, Compression, RecordBatch, TimestampType, batch_positions, check_batch,
                             checked_headers, iter_headers, iter_records, keyless_records, read_header, recompress,
                             record_times, records_block, stamped_header)

from .config import LogConfig

__all__ = ["ValidatedAppend", "validate_append"]

_CODECS = {"uncompressed": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
           "lz4": Compression.LZ4, "zstd": Compression.ZSTD}


@dataclass(slots=True)
class ValidatedAppend:
    batches: list[BatchHeader | RecordBatch]   # headers (the leader's: stamped copies); control batches as views
    pieces: list[memoryview | bytearray]       # what to write, in order
    size: int                                  # their bytes
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    records_count: int
    log_append_time_ms: int


def _check_offset_and_size(batch: BatchHeader, config: LogConfig, topic_partition: str) -> None:
    """What Kafka checks first of a producer's batch (UnifiedLog.analyzeAndValidateRecords),
    before its CRC and counts: a baseOffset of 0, then its size."""
    if batch.base_offset != 0:
        raise KafkaError(ErrorCode.invalid_record, f"The baseOffset of the record batch in the append to "
                                                   f"{topic_partition} should be 0, but it is {batch.base_offset}")
    size = batch.batch_length + LOG_OVERHEAD
    if size > config.max_message_bytes:
        raise KafkaError(ErrorCode.message_too_large,
                         f"The record batch of {size} bytes exceeds max.message.bytes "
                         f"({config.max_message_bytes})")


def _check_client_batch(batch: BatchHeader, config: LogConfig, topic_partition: str) -> None:
    _check_offset_and_size(batch, config, topic_partition)
    if batch.is_control:
        raise KafkaError(ErrorCode.invalid_record, "Clients are not allowed to write control records")
    if batch.producer_id >= 0 and batch.base_sequence < 0:
        raise KafkaError(ErrorCode.invalid_record,
                         f"Invalid sequence number {batch.base_sequence} in record batch "
                         f"with producerId {batch.producer_id}")


def _java_long(value: int) -> int:
    """``value`` as Java's long arithmetic has it (wrapped to 64 bits), for Kafka's exact figures."""
    return (value + 2**63) % 2**64 - 2**63


def _timestamp_errors(times: list[tuple[int, int]], batch: BatchHeader, limits: tuple[int, int],
                      now: int) -> dict[int, RecordError]:
    """Kafka's LogValidator.validateTimestamp under CreateTime: each record stamped more than
    ``before`` ms before ``now`` or ``after`` ms after it (no timestamp, -1: unchecked)."""
    before, after = limits
    stamped = batch.max_timestamp if batch.timestamp_type == TimestampType.LOG_APPEND_TIME else None
    errors = {}
    for index, (timestamp_delta, offset_delta) in enumerate(times):
        # a producer's batch flagged LogAppendTime: each record reads as the batch's max timestamp
        timestamp = _java_long(batch.first_timestamp + timestamp_delta) if stamped is None else stamped
        difference = _java_long(now - timestamp)
        if timestamp != NO_TIMESTAMP and (difference > before or _java_long(-difference) > after):
            errors[index] = RecordError(index, (
                f"Timestamp {timestamp} of message with offset {batch.base_offset + offset_delta} is out of "
                f"range. The timestamp should be within [{_java_long(now - before)}, {_java_long(now + after)}]"))
    return errors


def _refuses_stamp_type(batch: BatchHeader, config: LogConfig) -> bool:
    """Kafka's validateTimestamp refuses a producer's batch flagged LogAppendTime when its
    records are not range-checked instead: on a LogAppendTime topic, or when the batch's
    maxTimestamp (each record's timestamp under the flag) is -1."""
    return bool(batch.attributes & LOG_APPEND_TIME_FLAG) and (   # the bit: no enum on every append
        config.log_append_time or batch.max_timestamp == NO_TIMESTAMP)


def _stamp_type_errors(data: memoryview, batch: BatchHeader, config: LogConfig) -> dict[int, RecordError]:
    """A record error per record, naming it as Java's toString does: a PartialDefaultRecord
    (null key or value: -1 bytes) when Kafka keeps the compressed batch as it is, else a
    DefaultRecord (null: 0 bytes)."""
    in_place = batch.compression != Compression.NONE and _CODECS.get(config.compression_type,
                                                                       batch.compression) == batch.compression
    kind, null_size = ("PartialDefaultRecord", -1) if in_place else ("DefaultRecord", 0)
    errors = {}
    for index, r in enumerate(iter_records(RecordBatch(data, batch.position))):
        key, value = (null_size if b is None else len(b) for b in (r.key, r.value))
        errors[index] = RecordError(index, (
            f"Invalid timestamp type in message {kind}(offset={r.offset}, timestamp={r.timestamp}, key={key} bytes, "
            f"value={value} bytes). Producer should not set timestamp type to LogAppendTime."))
    return errors


def _check_records(data: memoryview, batch: BatchHeader, config: LogConfig, topic_partition: str,
                   now: int) -> None:
    """What Kafka checks of each record (LogValidator.validateRecord): a key on a compacted
    topic, else the timestamp (its type, or within the topic's limits). Any refused record
    refuses the append, listing the refused records (INVALID_TIMESTAMP if one has a bad timestamp)."""
    block = records_block(data, batch)          # a codec that cannot read it: CORRUPT_MESSAGE
    keyless = keyless_records(block, batch.records_count) if config.compacted else []
    message = f"Compacted topic cannot accept message without key in topic partition {topic_partition}"
    errors = {i: RecordError(i, message) for i in keyless}
    if _refuses_stamp_type(batch, config):
        late = _stamp_type_errors(data, batch, config)
    elif config.timestamp_limits is not None:
        late = _timestamp_errors(record_times(block, batch.records_count), batch, config.timestamp_limits, now)
    else:
        late = {}
    late = {i: e for i, e in late.items() if i not in errors}   # a keyless record is refused for its key
    if errors or late:
        errors.update(late)
        raise RecordValidationError([errors[i] for i in sorted(errors)], timestamps=bool(late), keyless=len(keyless))


def check_stored_batch(batch: RecordBatch) -> None:
    """What Kafka checks of a batch it did not build from a client's (replication, recovery:
    ``ensureValid``): magic and CRC. Not count == lastOffsetDelta + 1, which every batch the
    cleaner thinned out breaks."""
    _check_stored(batch.buf, read_header(batch.buf, batch.position))


def _check_stored(buf: memoryview, h: BatchHeader) -> None:
    if h.magic != MAGIC or crc32c(buf[h.position + CRC_START:h.position + h.size]) != h.crc:
        raise KafkaError(ErrorCode.corrupt_message, f"batch at offset {h.base_offset} is corrupt")


def _split_replicated(data: memoryview) -> list[BatchHeader | RecordBatch]:
    """The replicated batches' headers, each checked (``check_stored_batch``): every field is
    unpacked once, as the follower reads each of them several times (a ``RecordBatch`` unpacks a
    field per read: 30 reads were a third of a follower's append). A control batch stays a
    ``RecordBatch`` view: the producer state reads its marker."""
    batches: list[BatchHeader | RecordBatch] = []
    end = 0
    for h in iter_headers(data):
        _check_stored(data, h)
        end = h.position + h.size
        batches.append(RecordBatch(data, h.position) if h.is_control else h)
    if not batches or end != len(data):
        raise KafkaError(ErrorCode.corrupt_message, "replicated records are not whole record batches")
    return batches


def _recompressed(batches: list[BatchHeader], data: memoryview, codec: Compression
                  ) -> tuple[list[BatchHeader], memoryview]:
    if all(b.compression == codec for b in batches):
        return batches, data
    out = bytearray()
    for h in batches:
        batch = RecordBatch(data, h.position)
        out += batch.view if h.compression == codec else recompress(batch, codec)
    view = memoryview(out)
    return checked_headers(view), view


def _check_size(size: int, config: LogConfig) -> None:
    if size > config.segment_bytes:
        raise KafkaError(ErrorCode.record_list_too_large,
                         f"Message batch size is {size} bytes which exceeds the maximum "
                         f"configured segment size of {config.segment_bytes}")


def _stamp(data: memoryview, batches: list[BatchHeader], next_offset: int, leader_epoch: int, append_time: int
           ) -> ValidatedAppend:
    """The leader's append: each batch's stamped header (a copy) and the pieces to write (header,
    records, header, ...), with the offsets, max timestamp and count read on the way."""
    headers: list[BatchHeader] = []
    pieces: list[memoryview | bytearray] = []
    offset, max_ts, offset_of_max, count = next_offset, -1, next_offset, 0
    for batch in batches:
        stamped = stamped_header(data, batch, offset, leader_epoch, append_time)
        header = read_header(stamped, 0, batch.position)
        headers.append(header)
        pieces += (stamped, data[batch.position + HEADER_SIZE:batch.position + batch.batch_length + LOG_OVERHEAD])
        if header.max_timestamp > max_ts:
            max_ts, offset_of_max = header.max_timestamp, offset + header.last_offset_delta
        count += header.records_count
        offset += header.last_offset_delta + 1
    return ValidatedAppend(headers, pieces, len(data), next_offset, offset - 1, max_ts, offset_of_max, count,
                           append_time)


def _replicated(data: memoryview, config: LogConfig, next_offset: int) -> ValidatedAppend:
    """A follower's (or a marker's) batches, as they are: offsets must start at or after
    ``next_offset`` and increase."""
    batches = _split_replicated(data)
    _check_size(len(data), config)
    offset = next_offset
    max_ts, offset_of_max, count = -1, next_offset, 0
    for batch in batches:
        if batch.base_offset < offset:
            raise KafkaError(ErrorCode.corrupt_message,
                             f"batch base offset {batch.base_offset} is below the next offset {offset}")
        if batch.max_timestamp > max_ts:
            max_ts, offset_of_max = batch.max_timestamp, batch.last_offset
        count += batch.records_count
        offset = batch.next_offset
    return ValidatedAppend(batches, [data], len(data), batches[0].base_offset, offset - 1, max_ts, offset_of_max,
                           count, -1)


def validate_append(records: memoryview | bytes | bytearray, config: LogConfig, *, next_offset: int,
                    leader_epoch: int, now_ms: int, assign_offsets: bool = True,
                    topic_partition: str = "") -> ValidatedAppend:
    """Check every batch; the leader's (``assign_offsets``) get offsets and times on stamped
    copies of their headers. ``topic_partition`` (``<topic>-<partition>``) is named in the
    keyless-record and baseOffset errors, as Kafka's messages do.

    Followers append with ``assign_offsets=False``: offsets and epochs are the leader's and
    must start at or after ``next_offset`` and increase.
    """
    data = memoryview(records).cast("B")
    if not assign_offsets:
        return _replicated(data, config, next_offset)
    positions = batch_positions(data)
    if len(positions) > 1:   # refused before any batch is checked (ProduceRequest.validateRecords)
        raise ProduceRecordsError(ErrorCode.invalid_record, "Produce requests (v3+) are only allowed to contain "
                                                            "exactly one record batch per partition")
    try:
        first = check_batch(data, 0)
    except KafkaError:   # Kafka refuses a baseOffset or size first
        _check_offset_and_size(read_header(data), config, topic_partition)
        raise
    batches = [first]
    _check_client_batch(first, config, topic_partition)
    if config.compacted or config.timestamp_limits is not None or _refuses_stamp_type(first, config):
        _check_records(data, first, config, topic_partition, now_ms)
    codec = _CODECS.get(config.compression_type)
    if codec is not None:
        batches, data = _recompressed(batches, data, codec)
    _check_size(len(data), config)
    return _stamp(data, batches, next_offset, leader_epoch, now_ms if config.log_append_time else -1)
