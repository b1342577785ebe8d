"""LogManager: startup (clean and unclean), create/get, delete, config updates, maintenance, close."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
from pathlib import Path

import pytest

from odradek.broker.storage import LogManager
from odradek.broker.storage.checkpoint import OffsetCheckpointFile
from odradek.errors import KafkaError

from storage_helpers import batch, read_records


def fill(log, n: int) -> None:
    for i in range(n):
        log.append(batch(b"v%d" % i, ts=1000 + i), leader_epoch=0, now_ms=0)
    log.high_watermark = log.log_end_offset


def test_create_get_close_and_reopen_cleanly(tmp_path):
    manager = LogManager(tmp_path, {"segment.bytes": "300"})
    manager.open_all()
    assert manager.get("t", 0) is None
    log0 = manager.get_or_create("t", 0, {"retention.ms": "5000"})
    log1 = manager.get_or_create("t", 1, {"retention.ms": "5000"})
    assert manager.get_or_create("t", 0, {"retention.ms": "5000"}) is log0
    assert log0.config.segment_bytes == 300 and log0.config.retention_ms == 5000
    fill(log0, 10)
    fill(log1, 2)
    manager.close()
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    assert OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint").read() == {("t", 0): 10, ("t", 1): 2}
    assert OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint").read() == {("t", 0): 10, ("t", 1): 2}

    again = LogManager(tmp_path, {"segment.bytes": "300"})
    again.open_all()
    assert again.had_clean_shutdown and not (tmp_path / ".kafka_cleanshutdown").exists()
    reopened = again.get("t", 0)
    assert (reopened.log_end_offset, reopened.high_watermark, reopened.recovery_point) == (10, 10, 10)
    assert [r.value for r in read_records(reopened)] == [b"v%d" % i for i in range(10)]
    assert sorted((lg.topic, lg.partition) for lg in again.logs()) == [("t", 0), ("t", 1)]
    again.close()


def test_unclean_restart_recovers_a_torn_tail(tmp_path):
    manager = LogManager(tmp_path)
    manager.open_all()
    log = manager.get_or_create("t", 0, {})
    fill(log, 5)
    manager.checkpoint()
    path, size = log.active_segment.log.path, log.active_segment.size
    # crash: no close(), no marker; the last batch is torn
    os.truncate(path, size - 3)
    again = LogManager(tmp_path)
    again.open_all()
    assert not again.had_clean_shutdown
    recovered = again.get("t", 0)
    assert recovered.log_end_offset == 4 and recovered.high_watermark == 4
    again.close()


def test_delete_topic_renames_then_removes(tmp_path, monkeypatch):
    manager = LogManager(tmp_path, {"file.delete.delay.ms": "0"})
    manager.open_all()
    log = manager.get_or_create("gone", 0, {})
    keep = manager.get_or_create("kept", 0, {})
    fill(log, 3)
    piece = log.read(0, 1000)
    manager.delete_topic("gone")
    assert manager.get("gone", 0) is None and manager.logs() == [keep]
    doomed = [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    assert len(doomed) == 1 and doomed[0].name.startswith("gone-0.")
    assert os.pread(piece.fd, piece.size, piece.position) == piece.read()  # still readable until the tick
    removed_on = []
    rmtree = shutil.rmtree
    monkeypatch.setattr(shutil, "rmtree", lambda *a, **k: (removed_on.append(threading.get_ident()), rmtree(*a, **k)))
    asyncio.run(manager.maintain())
    assert not doomed[0].exists()
    # unlinking a deleted topic's segments can take the kernel hundreds of ms: not on the loop
    assert removed_on and threading.get_ident() not in removed_on
    fresh = manager.get_or_create("gone", 0, {})  # the name is free again
    assert fresh.log_end_offset == 0
    manager.close()


def retention_deleted(tmp_path):
    """A manager whose log of "t" had segments deleted by retention at tick 0: (manager, log, the
    segments' ``.deleted`` files), the files kept until file.delete.delay.ms (60 s) has passed."""
    manager = LogManager(tmp_path, {"segment.bytes": "200", "retention.bytes": "300", "retention.ms": "-1",
                                    "file.delete.delay.ms": "60000"})
    manager.open_all()
    log = manager.get_or_create("t", 0, {})
    fill(log, 20)
    asyncio.run(manager.maintain(now_ms=0))
    deleted = sorted((tmp_path / "t-0").glob("*.deleted"))
    assert deleted and log.log_start_offset > 0
    with pytest.raises(KafkaError):   # out of the log at once: never served again
        log.read(0, 100)
    return manager, log, deleted


def test_segments_retention_deleted_are_unlinked_off_the_loop_once_their_delay_passed(tmp_path, monkeypatch):
    manager, log, deleted = retention_deleted(tmp_path)
    unlinked_on = []
    unlink = Path.unlink
    monkeypatch.setattr(Path, "unlink", lambda path, *a, **k: (
        unlinked_on.append(threading.get_ident()) if path.name.endswith(".deleted") else None, unlink(path, *a, **k)))
    asyncio.run(manager.maintain(now_ms=59_999))
    assert sorted((tmp_path / "t-0").glob("*.deleted")) == deleted and not unlinked_on
    asyncio.run(manager.maintain(now_ms=60_000))
    assert not list((tmp_path / "t-0").glob("*.deleted"))
    # unlinking a segment's pages can take the kernel tens of ms: not on the loop
    assert len(unlinked_on) >= len(deleted) and threading.get_ident() not in unlinked_on
    assert [r.offset for r in read_records(log)][0] == log.log_start_offset
    manager.close()


def test_a_restart_before_the_delay_passed_removes_the_deleted_segments(tmp_path):
    manager, log, _ = retention_deleted(tmp_path)
    start = log.log_start_offset
    manager.close()   # as Kafka's scheduler drops the pending deletions: the files stay until the next start
    assert list((tmp_path / "t-0").glob("*.deleted"))
    again = LogManager(tmp_path)
    again.open_all()
    assert not list((tmp_path / "t-0").glob("*.deleted"))
    assert again.get("t", 0).log_start_offset == start
    again.close()


def test_leftover_delete_dirs_are_removed_at_startup(tmp_path):
    (tmp_path / "x-0.abc-delete").mkdir()
    (tmp_path / "x-0.abc-delete" / "00000000000000000000.log").write_bytes(b"z")
    (tmp_path / "not a partition").mkdir()
    manager = LogManager(tmp_path)
    manager.open_all()
    assert not (tmp_path / "x-0.abc-delete").exists() and manager.logs() == []


def test_update_config_reaches_every_partition(tmp_path):
    manager = LogManager(tmp_path)
    manager.open_all()
    logs = [manager.get_or_create("t", p, {}) for p in range(3)]
    manager.update_config("t", {"retention.bytes": "100", "index.interval.bytes": "10"})
    assert all(lg.config.retention_bytes == 100 for lg in logs)
    assert logs[0].active_segment.index_interval_bytes == 10
    manager.get_or_create("t", 0, {"retention.bytes": "200"})  # new overrides arrive with a snapshot
    assert all(lg.config.retention_bytes == 200 for lg in logs)
    assert len({id(lg.config) for lg in logs}) == 1   # one config object per topic, not per partition
    manager.update_defaults({"retention.ms": "5000"})
    assert all(lg.config.retention_ms == 5000 and lg.config.retention_bytes == 200 for lg in logs)
    assert manager.get_or_create("u", 0, {}).config.retention_ms == 5000
    manager.close()


def test_run_applies_retention_and_writes_checkpoints(tmp_path):
    manager = LogManager(tmp_path, {"segment.bytes": "200", "retention.bytes": "300", "retention.ms": "-1",
                                    "file.delete.delay.ms": "0"},
                         tick_seconds=0.01, checkpoint_interval_seconds=0.0)
    manager.open_all()
    log = manager.get_or_create("t", 0, {})
    fill(log, 20)

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(manager.run(stop))
        await asyncio.sleep(0.2)
        stop.set()
        await asyncio.wait_for(task, 2)

    asyncio.run(scenario())
    assert log.log_start_offset > 0 and log.size < 300 + 200
    assert not list((tmp_path / "t-0").glob("*.deleted"))
    assert OffsetCheckpointFile(tmp_path / "log-start-offset-checkpoint").read() == {("t", 0): log.log_start_offset}
    assert log.recovery_point >= log.active_segment.base_offset  # rolled segments were flushed
    manager.close()


def test_delete_partition_removes_only_that_partition(tmp_path):
    from odradek.broker.storage import LogManager
    manager = LogManager(tmp_path, {"file.delete.delay.ms": "0"})
    manager.open_all()
    manager.get_or_create("t", 0)
    manager.get_or_create("t", 1)
    manager.delete_partition("t", 0)
    assert manager.get("t", 0) is None and manager.get("t", 1) is not None
    assert not (tmp_path / "t-0").exists() and (tmp_path / "t-1").exists()
    manager.close()


def test_maintenance_checkpoints_only_changed_offsets_of_the_logs_it_holds(tmp_path):
    manager = LogManager(tmp_path, checkpoint_interval_seconds=0.0)
    manager.open_all()
    logs = [manager.get_or_create("t", i) for i in range(3)]
    fill(logs[1], 4)
    hw_file = tmp_path / "replication-offset-checkpoint"
    asyncio.run(manager.maintain())
    assert OffsetCheckpointFile(hw_file).read() == {("t", 0): 0, ("t", 1): 4, ("t", 2): 0}
    hw_file.unlink()
    asyncio.run(manager.maintain())
    assert not hw_file.exists(), "the same offsets are not written again"
    fill(logs[2], 2)
    manager.delete_partition("t", 0)
    asyncio.run(manager.maintain())
    assert OffsetCheckpointFile(hw_file).read() == {("t", 1): 4, ("t", 2): 2}
    manager.close()


def test_a_broker_with_many_logs_maintains_them_a_slice_a_tick(tmp_path, monkeypatch):
    """Each tick visits at most MAINTAINED_PER_TICK logs; a round reaches every log, and a log
    created during a round is in the next one."""
    from odradek.broker.storage import manager as manager_module
    monkeypatch.setattr(manager_module, "MAINTAINED_PER_TICK", 2)
    manager = LogManager(tmp_path, {"segment.bytes": "200", "retention.bytes": "300", "retention.ms": "-1",
                                    "file.delete.delay.ms": "0"})
    manager.open_all()
    logs = [manager.get_or_create("t", i) for i in range(5)]
    for lg in logs:
        fill(lg, 20)

    def trimmed():
        return [lg.log_start_offset > 0 for lg in logs]

    asyncio.run(manager.maintain())
    assert trimmed() == [True, True, False, False, False]
    late = manager.get_or_create("t", 5)
    fill(late, 20)
    manager.delete_partition("t", 2)  # closed before its turn: skipped
    asyncio.run(manager.maintain())
    asyncio.run(manager.maintain())
    assert [t for lg, t in zip(logs, trimmed()) if lg is not logs[2]] == [True] * 4 and late.log_start_offset == 0
    for _ in range(2):  # the next round: t-0 and t-1, then t-3 and t-4, then t-5
        asyncio.run(manager.maintain())
        assert late.log_start_offset == 0
    asyncio.run(manager.maintain())
    assert late.log_start_offset > 0
    manager.close()


def test_the_checkpoint_pass_reads_the_logs_only_after_an_offset_moved(tmp_path, monkeypatch):
    manager = LogManager(tmp_path, {"retention.ms": "-1"}, checkpoint_interval_seconds=0.0)
    manager.open_all()
    lg = manager.get_or_create("t", 0)
    fill(lg, 4)
    passes = []
    real = manager._checkpoint_offsets
    monkeypatch.setattr(manager, "_checkpoint_offsets", lambda: passes.append(1) or real())
    asyncio.run(manager.maintain())
    assert len(passes) == 1
    asyncio.run(manager.maintain())
    assert len(passes) == 1, "nothing moved: no log read"
    starts = tmp_path / "log-start-offset-checkpoint"
    for move, expected in ((lambda: lg.increment_log_start_offset(2), 2), (lambda: setattr(lg, "recovery_point", 4), 2),
                           (lambda: setattr(lg, "high_watermark", 3), 2), (lambda: manager.get_or_create("t", 1), 2)):
        move()
        asyncio.run(manager.maintain())
        assert OffsetCheckpointFile(starts).read()[("t", 0)] == expected
    assert len(passes) == 5
    assert OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint").read() == {("t", 0): 3, ("t", 1): 0}
    manager.close()
