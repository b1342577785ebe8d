"""Offset and time indexes: binary search against brute force, truncation, full, reopen, sanity."""

from __future__ import annotations

import random

import pytest

from odradek.broker.storage.index import CorruptIndex, OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset
from tests.support.descriptors import descriptors_under


def test_offset_index_lookup_matches_brute_force(tmp_path):
    rng = random.Random(7)
    index = OffsetIndex(tmp_path / "a.index", 1000, 8 * 100)
    entries, offset, position = [], 1000, 0
    for _ in range(60):
        offset += rng.randint(1, 20)
        position += rng.randint(1, 500)
        index.append(offset, position)
        entries.append((offset, position))
    for target in range(990, offset + 30):
        below = [e for e in entries if e[0] <= target]
        assert index.lookup(target) == (OffsetPosition(*below[-1]) if below else OffsetPosition(1000, 0))


def test_offset_index_full_truncate_and_reopen(tmp_path):
    path = tmp_path / "b.index"
    index = OffsetIndex(path, 50, 8 * 4 + 5)  # rounded down to 4 entries
    assert index.max_entries == 4 and path.stat().st_size == 0  # pre-allocated when first mapped
    for i in range(4):
        index.append(50 + 10 * (i + 1), 100 * (i + 1))
    assert path.stat().st_size == 32
    assert index.is_full
    with pytest.raises(CorruptIndex):
        index.append(200, 900)
    index.truncate_to(80)  # drops the entries for offsets >= 80
    assert index.entries == 2 and index.lookup(10_000) == OffsetPosition(70, 200)
    index.truncate_to(71)
    assert index.entries == 2
    index.close()
    assert path.stat().st_size == 16  # trimmed to valid entries on close
    reopened = OffsetIndex(path, 50, 8 * 10)
    assert reopened.entries == 2 and reopened.max_entries == 10 and reopened.lookup(75) == OffsetPosition(70, 200)
    reopened.sanity_check()
    with pytest.raises(CorruptIndex):
        reopened.append(70, 300)  # offsets must increase


def test_zero_padded_index_fails_the_sanity_check(tmp_path):
    path = tmp_path / "d.index"
    index = OffsetIndex(path, 0, 8 * 10)
    index.append(5, 100)
    index.append(9, 300)
    index.flush()
    # A crash leaves the pre-allocated file at full size: the zero tail reads as entries.
    with pytest.raises(CorruptIndex):
        OffsetIndex(path, 0, 8 * 10).sanity_check()
    (tmp_path / "e.index").write_bytes(b"\x00" * 13)
    with pytest.raises(CorruptIndex):
        OffsetIndex(tmp_path / "e.index", 0, 80).sanity_check()


def test_time_index(tmp_path):
    index = TimeIndex(tmp_path / "a.timeindex", 100, 12 * 5)
    assert index.lookup(5) == TimestampOffset(-1, 100) and index.last_entry() == TimestampOffset(-1, 100)
    index.maybe_append(1000, 105)
    index.maybe_append(1000, 106)  # not larger: ignored
    index.maybe_append(900, 107)   # smaller: ignored
    index.maybe_append(2000, 110)
    index.maybe_append(3000, 120)
    assert index.entries == 3
    assert index.lookup(999) == TimestampOffset(-1, 100)
    assert index.lookup(1500) == TimestampOffset(1000, 105)
    assert index.lookup(10**12) == TimestampOffset(3000, 120)
    index.maybe_append(4000, 130)
    assert index.is_full  # one slot stays for the entry written when the segment becomes inactive
    index.maybe_append(5000, 140)
    assert index.entries == 4
    index.maybe_append(5000, 140, skip_full_check=True)
    assert index.entries == 5 and index.last_entry() == TimestampOffset(5000, 140)
    index.truncate_to(120)
    assert index.entries == 2 and index.last_entry() == TimestampOffset(2000, 110)
    index.close()
    reopened = TimeIndex(tmp_path / "a.timeindex", 100, 12 * 5)
    reopened.sanity_check()
    assert reopened.entries == 2


def test_appending_on_a_full_disk_is_enospc_not_sigbus(tmp_path):
    """The pre-allocated index is sparse: its blocks are allocated before entries are stored
    in the mapping, so a full filesystem raises ENOSPC (a store to an unbacked page would be
    SIGBUS, killing the process)."""
    import errno

    from tests.support.small_fs import fill, free, small_tmpfs

    with small_tmpfs(tmp_path / "fs", 1) as fs:
        index = OffsetIndex(fs / "a.index", 0, 8 * 100_000)
        fill(fs)
        with pytest.raises(OSError) as raised:
            index.append(1, 10)
        assert raised.value.errno == errno.ENOSPC and index.entries == 0
        free(fs)
        index.append(1, 10)
        assert index.lookup(1) == OffsetPosition(1, 10)
        index.close()



def test_reopening_a_sparse_index_on_a_full_disk_reads_no_hole(tmp_path):
    """After a crash the active index is still sparse at its pre-allocated size; reopened on a
    full tmpfs (where reading a hole through the mapping needs a page: SIGBUS) its entries end
    at the first hole, and rebuilding it is ENOSPC."""
    import errno

    from tests.support.small_fs import fill, small_tmpfs

    with small_tmpfs(tmp_path / "fs", 1) as fs:
        index = OffsetIndex(fs / "a.index", 0, 8 * 100_000)
        index.append(1, 10)
        index._map.close()  # a crash: the file keeps its pre-allocated size
        fill(fs)
        reopened = OffsetIndex(fs / "a.index", 0, 8 * 100_000)
        assert 1 <= reopened.entries <= 65536 // 8 and reopened.entry(0) == (1, 10)
        with pytest.raises(CorruptIndex):  # zeros after the entry, up to the allocation chunk
            reopened.sanity_check()
        reopened.reset()
        with pytest.raises(OSError) as raised:
            for offset in range(1, 10_000):
                reopened.append(offset, offset * 10)
        assert raised.value.errno == errno.ENOSPC


def test_indexes_are_mapped_lazily_and_released_when_inactive(tmp_path):
    """Kafka's LazyIndex: a partition that holds no index entry maps nothing and keeps only its
    log's descriptor; rolled segments unmap their indexes, and a lookup maps them again."""
    from storage_helpers import batch, open_log

    idle = [open_log(tmp_path / f"idle-{i}", segment_bytes=2000, index_interval_bytes=64) for i in range(20)]
    assert descriptors_under(tmp_path) == 20  # one .log each (the indexes mapped eagerly held 4 more each)
    assert not any(s.offset_index.mapped or s.time_index.mapped for lg in idle for s in lg.segments)
    assert all(lg.read(0, 1 << 20).size == 0 for lg in idle)   # lookups in empty indexes map nothing
    assert not any(s.offset_index.mapped for lg in idle for s in lg.segments)

    log = open_log(tmp_path / "busy", segment_bytes=2000, index_interval_bytes=64)
    for i in range(60):   # one record a batch, its timestamp 1000 + its offset
        log.append(batch(b"%d" % i * 20, ts=1_000 + i), leader_epoch=0, now_ms=0)
    *rolled, active = log.segments
    assert rolled and not any(s.offset_index.mapped or s.time_index.mapped for s in rolled)
    first = rolled[0]
    assert first.offset_index.entries > 0 and not first.offset_index.mapped
    target = first.offset_index.entry(first.offset_index.entries - 1)[0] + first.base_offset
    assert first.offset_index.mapped   # mapped again by the lookup
    assert log.read(target, 1 << 20).first_offset == target
    assert log.offset_for_timestamp(1_000 + target).offset == target
    log.close()
    reopened = open_log(tmp_path / "busy", clean=True, segment_bytes=2000, index_interval_bytes=64)
    assert [s.base_offset for s in reopened.segments] == [s.base_offset for s in log.segments]
    assert not any(s.offset_index.mapped or s.time_index.mapped for s in reopened.segments)
    assert reopened.log_end_offset == 60 and reopened.offset_for_timestamp(1_000 + target).offset == target
    reopened.append(batch(b"x" * 100, ts=5_000), leader_epoch=0, now_ms=0)
    assert reopened.log_end_offset == 61
    for lg in (*idle, reopened):
        lg.close()
    assert descriptors_under(tmp_path) == 0


def test_a_released_index_is_made_durable_by_the_next_flush(tmp_path, monkeypatch):
    """Unmapping (a roll) does not msync inside the append that rolls: the entries written stay
    dirty in the page cache until the log's flush, which then fsyncs the file once."""
    import odradek.broker.storage.index as index_module

    synced = []
    monkeypatch.setattr(index_module.os, "fsync", lambda fd: synced.append(fd))
    index = OffsetIndex(tmp_path / "r.index", 0, 8 * 100)
    index.append(5, 100)
    index.trim_to_valid_size()
    index.release()
    assert not index.mapped and synced == []
    index.flush()
    index.flush()
    assert len(synced) == 1 and index.lookup(7) == OffsetPosition(5, 100)
    index.close()
