"""The cleaner's Kafka rules on real segment files (no broker): recovery of cleaned segments,
max.compaction.lag.ms, the producer's last batch, retention of producer-state snapshots."""

from __future__ import annotations

from odradek.broker.storage.cleaner import CleanerSettings, LogCleaner
from odradek.records import Record, build_batch, iter_records

from tests.storage.storage_helpers import open_log

NOW = 10_000_000


def compact(**overrides) -> CleanerSettings:
    values = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.5", "delete.retention.ms": "1000"}
    values.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
    return CleanerSettings.of(values)


def append(log, keys, *, ts=NOW, producer_id=-1, sequence=-1):
    """One batch of ``keys`` (value = key + offset-free suffix), then roll: one batch per segment."""
    records = [Record(b"v-" + k, key=k, timestamp=ts) for k in keys]
    log.append(build_batch(records, producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                           base_sequence=sequence), leader_epoch=0)
    log.roll()
    log.high_watermark = log.log_end_offset


def records_of(log):
    out = []
    for segment in log.segments:
        for header in segment.log.batches_from(0):
            out.extend(iter_records(segment.log.read_batch(header.position, header.size)))
    return [(r.offset, r.key) for r in out]


def test_a_cleaned_segment_survives_recovery_after_a_crash(tmp_path):
    """Cleaned batches have gaps in their offsets: recovery checks only what Kafka's does (CRC, magic)."""
    log = open_log(tmp_path / "t-0")
    append(log, [b"a", b"b", b"c"])
    append(log, [b"a"])
    append(log, [b"x"])
    assert LogCleaner(tmp_path).clean_now(log, compact(), NOW, force=True) is not None
    kept = records_of(log)
    assert kept == [(1, b"b"), (2, b"c"), (3, b"a"), (4, b"x")]
    log.close()
    reopened = open_log(tmp_path / "t-0", clean=False, recovery_point=0)
    try:
        assert records_of(reopened) == kept
        assert reopened.log_end_offset == 5
    finally:
        reopened.close()
