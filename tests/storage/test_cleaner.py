"""Unit tests of the log cleaner on real segment files (no broker)."""

from __future__ import annotations

import asyncio
import os
import time

from hypothesis import given, settings, strategies as st

from odradek.broker.storage import LogManager
from odradek.broker.storage.cleaner import CLEANER_CHECKPOINT, CleanerSettings, LogCleaner
from odradek.records import Compression, Record, build_batch, iter_batches

from storage_helpers import decode, open_log
from odradek.records import iter_records

NOW = 10_000_000


def compact(**overrides) -> CleanerSettings:
    values = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "1000"}
    values.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
    return CleanerSettings.of(values)


def append(log, updates, *, ts=NOW, compression=Compression.NONE, producer_id=-1, per_batch=3):
    """Append (key, value) updates in batches of ``per_batch``; roll after each batch."""
    for i in range(0, len(updates), per_batch):
        chunk = updates[i:i + per_batch]
        records = [Record(v, key=k, timestamp=ts) for k, v in chunk]
        log.append(build_batch(records, compression=compression, producer_id=producer_id, producer_epoch=0
                               if producer_id >= 0 else -1, base_sequence=i if producer_id >= 0 else -1),
                   leader_epoch=0)
        log.roll()
    log.high_watermark = log.log_end_offset


def read_records(log):
    """Every record of the log; a compacted log may end in a gap (no data up to its end)."""
    offset, out = log.log_start_offset, []
    while offset < log.log_end_offset:
        piece = log.read(offset, 1 << 20)
        if piece.size == 0:
            break
        for b in decode(piece.read()):
            assert b.compute_crc() == b.crc
            out.extend(r for r in iter_records(b) if r.offset >= offset)
        offset = piece.next_offset
    return out


def last_values(updates):
    out = {}
    for k, v in updates:
        out[k] = v
    return {k: v for k, v in out.items() if v is not None}


def test_keeps_the_last_value_of_each_key_and_offsets(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=1 << 20)
    updates = [(b"k%d" % (i % 5), b"v%d" % i) for i in range(40)]
    append(log, updates)
    cleaner = LogCleaner(tmp_path)
    cleaned = cleaner.clean_now(log, compact(), NOW)
    assert cleaned is not None and cleaned.bytes_written < cleaned.bytes_read
    records = read_records(log)
    assert {r.key: r.value for r in records} == last_values(updates)
    assert [r.offset for r in records] == [35, 36, 37, 38, 39]   # offsets keep their gaps
    assert log.log_end_offset == 40
    assert (tmp_path / CLEANER_CHECKPOINT).exists()
    log.close()


def test_never_touches_the_active_segment_nor_records_within_compaction_lag(tmp_path):
    log = open_log(tmp_path / "t-0")
    append(log, [(b"a", b"1"), (b"a", b"2")], per_batch=1)
    log.append(build_batch([Record(b"3", key=b"a", timestamp=NOW)]), leader_epoch=0)  # active
    log.high_watermark = log.log_end_offset
    cleaner = LogCleaner(tmp_path)
    assert cleaner.clean_now(log, compact(min_compaction_lag_ms=60_000), NOW) is None
    cleaner.clean_now(log, compact(), NOW)
    assert [(r.offset, r.value) for r in read_records(log)] == [(1, b"2"), (2, b"3")]
    log.close()


def test_tombstones_go_only_after_delete_retention(tmp_path):
    log = open_log(tmp_path / "t-0")
    old = NOW - 5_000
    append(log, [(b"a", b"1"), (b"b", b"1"), (b"a", None)], ts=old)
    append(log, [(b"c", b"1"), (b"c", None)], ts=NOW)
    cleaner = LogCleaner(tmp_path)
    cleaner.clean_now(log, compact(delete_retention_ms=1000), NOW)
    assert [(r.key, r.value) for r in read_records(log)] == [(b"b", b"1"), (b"c", None)]
    log.close()


def test_a_kept_tombstone_makes_the_log_due_once_it_expires(tmp_path):
    log = open_log(tmp_path / "t-0")
    append(log, [(b"a", b"1"), (b"b", b"1"), (b"a", None)], ts=NOW)
    cleaner = LogCleaner(tmp_path)
    cleaner.clean_now(log, compact(delete_retention_ms=1000), NOW)
    assert [(r.key, r.value) for r in read_records(log)] == [(b"b", b"1"), (b"a", None)]
    assert cleaner.clean_now(log, compact(delete_retention_ms=1000), NOW + 500) is None   # nothing due yet
    assert cleaner.clean_now(log, compact(delete_retention_ms=1000), NOW + 1001) is not None
    assert [(r.key, r.value) for r in read_records(log)] == [(b"b", b"1")]
    log.close()


def test_compressed_batches_keep_codec_and_producer_metadata(tmp_path):
    log = open_log(tmp_path / "t-0")
    append(log, [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", b"9")], compression=Compression.ZSTD,
           producer_id=7)
    LogCleaner(tmp_path).clean_now(log, compact(), NOW)
    from odradek.records import iter_batches
    slice_ = log.read(0, 1 << 20)
    batches = list(iter_batches(memoryview(bytearray(slice_.read()))))
    assert batches[0].compression == Compression.ZSTD and batches[0].producer_id == 7
    assert (batches[0].base_offset, batches[0].last_offset_delta, batches[0].records_count) == (0, 2, 2)
    assert all(b.compute_crc() == b.crc for b in batches)
    assert {r.key: r.value for r in read_records(log)} == {b"a": b"2", b"b": b"1", b"c": b"9"}
    log.close()


def test_dirty_ratio_and_checkpoint(tmp_path):
    log = open_log(tmp_path / "t-0")
    append(log, [(b"a", b"%d" % i) for i in range(6)])
    cleaner = LogCleaner(tmp_path)
    assert cleaner.clean_now(log, compact(), NOW) is not None
    assert cleaner.clean_now(log, compact(min_cleanable_dirty_ratio=0.5), NOW) is None  # nothing dirty
    assert LogCleaner(tmp_path).first_dirty(log) == 6     # the checkpoint survives
    log.close()


def test_crash_in_swap_is_completed_by_the_loader(tmp_path, monkeypatch):
    directory = tmp_path / "t-0"
    log = open_log(directory)
    updates = [(b"k%d" % (i % 3), b"v%d" % i) for i in range(30)]
    append(log, updates)
    cleaner = LogCleaner(tmp_path)
    cleaned = cleaner.prepare(log, cleaner.cleanable(log, compact(), NOW), compact(), NOW)
    # crash after the .swap files exist and half the old segments were renamed .deleted
    for c in cleaned.segments[: len(cleaned.segments) // 2]:
        c.old.mark_deleted()
    log.flush()
    log.close()
    names = os.listdir(directory)
    assert any(n.endswith(".swap") for n in names) and any(n.endswith(".deleted") for n in names)
    reopened = open_log(directory, recovery_point=0)
    assert not any(n.endswith((".swap", ".deleted", ".cleaned")) for n in os.listdir(directory))
    assert {r.key: r.value for r in read_records(reopened)} == last_values(updates)
    reopened.close()


def test_an_unfinished_cleaning_is_dropped_by_the_loader(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory)
    updates = [(b"k%d" % (i % 3), b"v%d" % i) for i in range(12)]
    append(log, updates)
    log.flush()
    log.close()
    (directory / ("%020d.log.cleaned" % 0)).write_bytes(b"half written")
    reopened = open_log(directory)
    assert [(r.key, r.value) for r in read_records(reopened)] == updates
    reopened.close()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.one_of(st.none(), st.binary(max_size=5))), min_size=1,
                max_size=60),
       st.integers(1, 5), st.sampled_from([Compression.NONE, Compression.LZ4]))
def test_compaction_matches_a_dict_model(tmp_path_factory, ops, per_batch, codec):
    directory = tmp_path_factory.mktemp("c")
    log = open_log(directory / "t-0")
    updates = [(b"k%d" % k, v) for k, v in ops]
    append(log, updates, ts=NOW - 10_000, per_batch=per_batch, compression=codec)
    cleaner = LogCleaner(directory)
    cleaner.clean_now(log, compact(), NOW)
    cleaner.clean_now(log, compact(), NOW, force=True)        # cleaning twice changes nothing
    records = read_records(log)
    assert {r.key: r.value for r in records} == last_values(updates)
    assert len({r.key for r in records}) == len(records)
    offsets = [r.offset for r in records]
    assert offsets == sorted(offsets)
    log.close()


def test_the_manager_compacts_consumer_offsets_in_its_cleaner_process(tmp_path):
    manager = LogManager(tmp_path)
    manager.open_all()
    offsets_log = manager.get_or_create("__consumer_offsets", 0, {"cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    updates = [(b"group-%d" % (i % 4), b"offset %d" % i) for i in range(200)]
    append(offsets_log, updates, ts=now, per_batch=10)
    async def until_cleaned():
        for _ in range(200):
            await manager.maintain()
            if len(read_records(offsets_log)) == 4:
                return
            await asyncio.sleep(0.05)
    asyncio.run(until_cleaned())
    assert {r.key: r.value for r in read_records(offsets_log)} == last_values(updates)
    manager.close()


def test_the_manager_cleans_the_logs_their_config_compacts_after_any_config_change(tmp_path):
    """Maintenance hands the cleaner only the logs whose config compacts: a topic compacted by an
    override set later or by a new broker default is cleaned, a delete-policy one never is."""
    manager = LogManager(tmp_path)
    manager.open_all()
    now = int(time.time() * 1000)
    updates = [(b"k%d" % (i % 3), b"v%d" % i) for i in range(60)]
    logs = {}
    for topic in ("by-override", "by-default", "deleting"):
        logs[topic] = manager.get_or_create(topic, 0, {"cleanup.policy": "delete"} if topic == "deleting" else {})
        append(logs[topic], updates, ts=now, per_batch=10)

    async def until_cleaned(cleaned):
        for _ in range(200):
            await manager.maintain()
            if all(len(read_records(logs[t])) == 3 for t in cleaned):
                return
            await asyncio.sleep(0.05)

    asyncio.run(until_cleaned([]))
    assert all(len(read_records(lg)) == 60 for lg in logs.values()), "nothing compacts yet"
    manager.update_config("by-override", {"cleanup.policy": "compact"})
    asyncio.run(until_cleaned(["by-override"]))
    manager.update_defaults({"cleanup.policy": "compact"})
    asyncio.run(until_cleaned(["by-override", "by-default"]))
    for topic in ("by-override", "by-default"):
        assert {r.key: r.value for r in read_records(logs[topic])} == last_values(updates)
    assert len(read_records(logs["deleting"])) == 60
    manager.close()
