"""LogLoader: crash recovery (torn tails, flipped bytes), index rebuilds, leftover files."""

from __future__ import annotations

import os
import random

import pytest

from odradek.broker.storage.loader import LogLoader

from storage_helpers import batch, config, open_log, read_records


def fill(log, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        log.append(batch(b"%d" % i * 20, ts=1000 + i), leader_epoch=0, now_ms=0)


def crash(log) -> None:
    """Drop the log without a clean shutdown: no fsync, no final index entries (the page cache keeps the bytes)."""
    for segment in log.segments:
        for index in (segment.offset_index, segment.time_index):
            index._map.close() if index._map is not None else None   # no trim, no flush
            index._map = None
        segment.log.close()
    log.closed = True


@pytest.mark.parametrize("seed", range(8))
def test_torn_active_segment_at_a_random_byte(tmp_path, seed):
    rng = random.Random(seed)
    directory = tmp_path / "t-0"
    log = open_log(directory, segment_bytes=600, index_interval_bytes=64)
    fill(log, 25)
    active = log.active_segment
    sizes = [b.size for b in active.log.batches_from(0)]
    cut = rng.randrange(active.size + 1)
    kept = 0
    while kept < len(sizes) and sum(sizes[:kept + 1]) <= cut:
        kept += 1
    expected_end = active.base_offset + kept
    path = active.log.path
    crash(log)
    os.truncate(path, cut)
    reopened = open_log(directory, segment_bytes=600, index_interval_bytes=64, recovery_point=active.base_offset)
    assert reopened.log_end_offset == expected_end
    assert os.path.getsize(path) == sum(sizes[:kept])
    assert [r.value for r in read_records(reopened)] == [b"%d" % i * 20 for i in range(expected_end)]
    fill(reopened, 3, start=expected_end)
    assert [r.offset for r in read_records(reopened)] == list(range(expected_end + 3))


def test_flipped_byte_past_the_recovery_point_truncates_there(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory, segment_bytes=600)
    fill(log, 30)
    segments = log.segments
    victim = segments[1]
    batches = list(victim.log.batches_from(0))
    bad = batches[2]
    flip_at = bad.position + 40
    victim_path, later = victim.log.path, [s.log.path for s in segments[2:]]
    crash(log)
    with open(victim_path, "r+b") as f:
        f.seek(flip_at)
        byte = f.read(1)
        f.seek(flip_at)
        f.write(bytes([byte[0] ^ 0xFF]))
    reopened = open_log(directory, segment_bytes=600, recovery_point=victim.base_offset)
    assert reopened.log_end_offset == victim.base_offset + 2
    assert os.path.getsize(victim_path) == bad.position
    assert not any(p.exists() for p in later)  # every segment after the bad batch is gone
    assert [r.offset for r in read_records(reopened)] == list(range(victim.base_offset + 2))
    assert reopened.recovery_point <= reopened.log_end_offset


def test_segments_before_the_recovery_point_are_not_rescanned(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory, segment_bytes=600)
    fill(log, 30)
    log.flush()
    rp = log.segments[-2].base_offset
    log.close()
    loader = LogLoader(directory, config(segment_bytes=600), recovery_point=rp, log_start_offset=0,
                       clean_shutdown=False)
    loaded = loader.load()
    assert sorted(loader.recovered) == [s.base_offset for s in loaded.segments if s.base_offset >= rp]
    for segment in loaded.segments:
        segment.close()
    clean = LogLoader(directory, config(segment_bytes=600), recovery_point=0, log_start_offset=0,
                      clean_shutdown=True)
    assert clean.load().recovery_point == 30 and clean.recovered == {}


@pytest.mark.parametrize("damage", ["missing", "garbage", "zero-padded", "truncated"])
def test_corrupt_or_missing_index_is_rebuilt(tmp_path, damage):
    directory = tmp_path / "t-0"
    log = open_log(directory, segment_bytes=2000, index_interval_bytes=100)
    fill(log, 30)
    first = log.segments[0]
    index_path = first.offset_index.path
    entries = first.offset_index.entries
    assert entries > 2
    log.flush()
    log.close()
    if damage == "missing":
        index_path.unlink()
        (directory / "00000000000000000000.timeindex").unlink()
    elif damage == "garbage":
        index_path.write_bytes(os.urandom(entries * 8 - 3))
    elif damage == "zero-padded":
        index_path.write_bytes(index_path.read_bytes() + b"\0" * 800)
    else:
        index_path.write_bytes(index_path.read_bytes()[:-8] + (10**6).to_bytes(4, "big") + b"\0\0\0\0")
    reopened = open_log(directory, clean=True, segment_bytes=2000, index_interval_bytes=100)
    assert reopened.segments[0].offset_index.entries == entries
    assert [r.offset for r in read_records(reopened)] == list(range(30))
    for offset in range(30):
        assert reopened.read(offset, 1).first_offset == offset


def test_leftover_files_are_removed(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory)
    fill(log, 3)
    log.flush()
    log.close()
    leftovers = ["00000000000000000000.log.deleted", "00000000000000000000.index.deleted",
                 "00000000000000000000.log.cleaned", "00000000000000000000.log.swap",
                 "leader-epoch-checkpoint.tmp", "00000000000000000099.index", "00000000000000000099.timeindex"]
    for name in leftovers:
        (directory / name).write_bytes(b"junk")
    reopened = open_log(directory, clean=True)
    assert not any((directory / name).exists() for name in leftovers)
    assert reopened.log_end_offset == 3


def test_log_ending_below_the_checkpointed_start_starts_empty_there(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory)
    fill(log, 3)
    log.close()
    reopened = open_log(directory, log_start_offset=50)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (50, 50)
    assert [s.base_offset for s in reopened.segments] == [50]
