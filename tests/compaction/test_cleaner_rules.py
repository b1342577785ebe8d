"""The cleaner's Kafka rules on real segment files (no broker): recovery of cleaned segments,
max.compaction.lag.ms, the producer's last batch, retention of producer-state snapshots."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

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


def test_a_follower_accepts_cleaned_batches(tmp_path):
    """A follower catching up on a compacted log fetches thinned-out batches: Kafka's replication
    checks CRC and magic, not the producer rule count == lastOffsetDelta + 1."""
    leader = open_log(tmp_path / "leader" / "t-0")
    append(leader, [b"a", b"b", b"c"])
    append(leader, [b"a"])
    append(leader, [b"x"])
    LogCleaner(tmp_path / "leader").clean_now(leader, compact(), NOW, force=True)
    follower = open_log(tmp_path / "follower" / "t-0")
    try:
        offset = 0
        while offset < leader.log_end_offset:
            piece = leader.read(offset, 1 << 20)
            follower.append_as_follower(piece.read(), now_ms=NOW)
            offset = follower.log_end_offset
        assert records_of(follower) == records_of(leader)
        assert follower.log_end_offset == leader.log_end_offset == 5
    finally:
        leader.close()
        follower.close()


def test_max_compaction_lag_cleans_a_log_below_the_dirty_ratio(tmp_path):
    """KIP-354: a dirty segment whose first batch is older than max.compaction.lag.ms is cleaned now."""
    log = open_log(tmp_path / "t-0")
    cleaner = LogCleaner(tmp_path)
    append(log, [b"a", b"b", b"c", b"d", b"e", b"f"])
    append(log, [b"g", b"h", b"i", b"j", b"k", b"l"])
    cleaner.clean_now(log, compact(), NOW, force=True)
    append(log, [b"a"])                                    # a small dirty tail: ratio ~ 1/13 < 0.5
    lagging = compact(max_compaction_lag_ms=60_000)
    try:
        assert cleaner.clean_now(log, lagging, NOW + 59_999) is None
        assert cleaner.clean_now(log, compact(), NOW + 3_600_000) is None     # default: no deadline
        assert cleaner.clean_now(log, lagging, NOW + 60_001) is not None
        assert (0, b"a") not in records_of(log) and (12, b"a") in records_of(log)
    finally:
        log.close()


def test_a_compacted_log_rolls_by_max_compaction_lag(tmp_path):
    """Kafka's LogConfig.maxSegmentMs: min(segment.ms, max.compaction.lag.ms) for a compacted log."""
    log = open_log(tmp_path / "t-0", cleanup_policy="compact", max_compaction_lag_ms=1000)
    plain = open_log(tmp_path / "p-0", max_compaction_lag_ms=1000)
    try:
        for target in (log, plain):
            for ts in (NOW, NOW + 1001):
                target.append(build_batch([Record(b"v", key=b"k", timestamp=ts)]), leader_epoch=0, now_ms=NOW)
        assert [s.base_offset for s in log.segments] == [0, 1]
        assert [s.base_offset for s in plain.segments] == [0]
    finally:
        log.close()
        plain.close()


def batch_headers(log):
    return [(b.base_offset, b.last_offset, b.producer_id, b.base_sequence, b.records_count)
            for s in log.segments for b in s.log.batches_from(0)]


def test_the_producers_last_batch_stays_as_an_empty_batch(tmp_path):
    """Kafka's BatchRetention.RETAIN_EMPTY: the producer's state survives compaction and a reload."""
    log = open_log(tmp_path / "t-0")
    append(log, [b"a"], producer_id=7, sequence=0)
    append(log, [b"b"], producer_id=7, sequence=1)        # producer 7's last batch
    append(log, [b"a", b"b"])                             # both of its records are superseded
    LogCleaner(tmp_path).clean_now(log, compact(), NOW, force=True)
    assert batch_headers(log) == [(1, 1, 7, 1, 0), (2, 3, -1, -1, 2)]
    log.close()
    for snapshot in (tmp_path / "t-0").glob("*.snapshot"):
        snapshot.unlink()                                 # rebuilt from the log alone
    reopened = open_log(tmp_path / "t-0", clean=False, recovery_point=0)
    try:
        assert reopened.producer_state.producers[7].last_seq == 1
        retry = build_batch([Record(b"v-b", key=b"b", timestamp=NOW)], producer_id=7, producer_epoch=0,
                            base_sequence=1)
        assert reopened.append(retry, leader_epoch=0).first_offset == 1   # a duplicate: its original offset
        assert reopened.log_end_offset == 4
        reopened.roll()
        append(reopened, [b"c"], producer_id=7, sequence=2)       # no longer its last: the empty batch goes
        LogCleaner(tmp_path).clean_now(reopened, compact(), NOW, force=True)
        assert batch_headers(reopened) == [(2, 3, -1, -1, 2), (4, 4, 7, 2, 1)]
    finally:
        reopened.close()


def test_retention_deletes_the_snapshots_below_the_log_start(tmp_path):
    """Kafka deletes a deleted segment's producer snapshot: those at/after the log start stay."""
    log = open_log(tmp_path / "t-0", retention_ms=1000, file_delete_delay_ms=0)
    for i in range(4):
        append(log, [b"k%d" % i], ts=NOW + i * 10_000, producer_id=7, sequence=i)
    snapshots = lambda: sorted(int(p.stem) for p in (tmp_path / "t-0").glob("*.snapshot"))   # noqa: E731
    try:
        assert snapshots() == [1, 2, 3, 4]
        assert log.apply_retention(NOW + 20_500) == 2    # offsets 0 and 1 are older than 1 s
        assert log.log_start_offset == 2
        assert snapshots() == [2, 3, 4]
    finally:
        log.close()


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the check reads ioprio_get by its x86_64 number")
def test_the_cleaner_process_runs_at_idle_cpu_and_io_priority():
    """The manager's cleaner process initializer: SCHED_IDLE and the idle I/O class (Linux)."""
    code = ("import ctypes, os; from odradek.broker.storage.priority import lower_priority; lower_priority(); "
            "print(os.sched_getscheduler(0) == os.SCHED_IDLE, ctypes.CDLL(None).syscall(252, 1, 0) >> 13)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["True", "3"]       # 3: IOPRIO_CLASS_IDLE
