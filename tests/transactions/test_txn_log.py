"""The partition-log side of transactions, without a cluster: control batches, producer state
with ongoing transactions, the last stable offset, the ``.txnindex`` and its recovery."""

import struct

import pytest

from odradek.broker.storage.producer_state import ProducerStateManager, snapshot_path
from odradek.errors import ErrorCode, KafkaError
from odradek.records import (ControlMarker, ControlType, Record, RecordBatch, build_batch, build_control_batch,
                             iter_records, read_control)
from tests.storage.storage_helpers import open_log

PID, EPOCH = 7, 0


def txn_batch(*values: bytes, pid: int = PID, epoch: int = EPOCH, seq: int = 0) -> bytearray:
    return build_batch([Record(v, b"k" + v) for v in values], producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq, transactional=True)


def plain(*values: bytes) -> bytearray:
    return build_batch([Record(v, b"k" + v) for v in values])


def leader_log(path, **settings):
    return open_log(path, **settings)


def commit(log, pid=PID, epoch=EPOCH, coordinator_epoch=0, control=ControlType.COMMIT):
    return log.append_marker(control, pid, epoch, coordinator_epoch, leader_epoch=0)


def settle(log):
    log.high_watermark = log.log_end_offset


def test_control_batch_is_kafkas_end_transaction_marker():
    data = build_control_batch(ControlType.ABORT, 5, 3, 11, base_offset=40)
    batch = RecordBatch(memoryview(data))
    batch.check()
    assert (batch.is_control, batch.is_transactional, batch.base_sequence, batch.producer_id,
            batch.producer_epoch) == (True, True, -1, 5, 3)
    (record,) = iter_records(batch)
    assert record.key == struct.pack(">hh", 0, 0) and record.value == struct.pack(">hi", 0, 11)
    assert read_control(batch) == ControlMarker(ControlType.ABORT, 11)
    with pytest.raises(KafkaError):
        read_control(RecordBatch(memoryview(build_batch([Record(b"x", b"\x00\x01\x00\x07")], control=True))))


def test_producer_state_tracks_ongoing_and_completed_transactions():
    state = ProducerStateManager()
    first = RecordBatch(memoryview(txn_batch(b"a", b"b")))
    first.set_base_offset(10)
    assert state.update([first]) == []
    assert state.ongoing == {PID: 10} and state.first_unstable_offset(0) == 10
    marker = RecordBatch(memoryview(build_control_batch(ControlType.ABORT, PID, EPOCH, 2, base_offset=12)))
    (done,) = state.update([marker])
    assert (done.first_offset, done.last_offset, done.aborted) == (10, 12, True)
    assert state.ongoing == {}
    assert state.first_unstable_offset(12) == 10      # the marker is not below the HW yet
    assert state.first_unstable_offset(13) is None
    with pytest.raises(KafkaError) as e:
        state.check_marker(PID, EPOCH, 1)
    assert e.value.code == ErrorCode.transaction_coordinator_fenced
    state.check_marker(PID, EPOCH, 2)
    bumped = RecordBatch(memoryview(build_control_batch(ControlType.ABORT, PID, EPOCH + 1, 2, base_offset=13)))
    assert state.update([bumped]) == []               # a marker without data completes nothing
    with pytest.raises(KafkaError) as e:
        state.check_marker(PID, EPOCH, 2)
    assert e.value.code == ErrorCode.invalid_producer_epoch


def test_lso_waits_for_the_oldest_open_transaction(tmp_path):
    log = leader_log(tmp_path / "t-0")
    log.append(plain(b"x"), leader_epoch=0)                       # 0
    log.append(txn_batch(b"a"), leader_epoch=0)                   # 1: opens PID's transaction
    log.append(txn_batch(b"b", pid=8), leader_epoch=0)            # 2: opens 8's
    log.append(plain(b"y"), leader_epoch=0)                       # 3
    settle(log)
    assert (log.high_watermark, log.last_stable_offset) == (4, 1)
    commit(log)                                                   # 4
    assert log.last_stable_offset == 1                            # marker not replicated yet
    settle(log)
    assert log.last_stable_offset == 2
    commit(log, pid=8, control=ControlType.ABORT)                 # 5
    settle(log)
    assert log.last_stable_offset == log.high_watermark == 6
    assert [(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
            for t in log.aborted_transactions(0, 6)] == [(8, 2, 5, 6)]
    assert log.aborted_transactions(6, 7) == []


def test_non_transactional_write_during_a_transaction_is_invalid_txn_state(tmp_path):
    log = leader_log(tmp_path / "t-0")
    log.append(txn_batch(b"a"), leader_epoch=0)
    idempotent = build_batch([Record(b"b")], producer_id=PID, producer_epoch=EPOCH, base_sequence=1)
    with pytest.raises(KafkaError) as e:
        log.append(idempotent, leader_epoch=0)
    assert e.value.code == ErrorCode.invalid_txn_state


def txnindex_entries(path):
    data = path.read_bytes()
    return [struct.unpack_from(">hqqqq", data, at) for at in range(0, len(data), 34)]


def test_txnindex_file_is_kafkas_format_and_goes_with_its_segment(tmp_path):
    log = leader_log(tmp_path / "t-0", retention_ms=-1)
    log.append(txn_batch(b"a"), leader_epoch=0)
    commit(log, control=ControlType.ABORT)
    assert txnindex_entries(tmp_path / "t-0" / f"{0:020d}.txnindex") == [(0, PID, 0, 1, 2)]
    log.roll()
    log.append(plain(b"z"), leader_epoch=0)
    settle(log)
    log.increment_log_start_offset(2)
    assert log.apply_retention(0) == 1
    for path in log.purge_deleted(0, force=True):
        path.unlink(missing_ok=True)
    assert not (tmp_path / "t-0" / f"{0:020d}.txnindex").exists()
    assert not list((tmp_path / "t-0").glob("*.txnindex*"))
    log.close()


def test_snapshot_keeps_ongoing_transactions_across_a_clean_restart(tmp_path):
    log = leader_log(tmp_path / "t-0")
    log.append(plain(b"x"), leader_epoch=0)
    log.append(txn_batch(b"a"), leader_epoch=0)
    settle(log)
    log.flush()
    log.close()
    reopened = open_log(tmp_path / "t-0", clean=True)
    assert snapshot_path(tmp_path / "t-0", 2).exists()
    reopened.high_watermark = 2
    assert reopened.producer_state.ongoing == {PID: 1} and reopened.last_stable_offset == 1
    reopened.append_marker(ControlType.COMMIT, PID, EPOCH, 0, leader_epoch=0)
    reopened.high_watermark = 3
    assert reopened.last_stable_offset == 3
    reopened.close()


def test_recovery_rebuilds_a_lost_txnindex_and_the_lso(tmp_path):
    log = leader_log(tmp_path / "t-0")
    log.append(txn_batch(b"a"), leader_epoch=0)                   # 0
    log.append(txn_batch(b"b", pid=8), leader_epoch=0)            # 1
    commit(log, control=ControlType.ABORT)                        # 2
    log.roll()
    log.append(txn_batch(b"c", pid=9), leader_epoch=0)            # 3, still open
    log.flush()
    for segment in log.segments:
        segment.close()                                           # a crash: no snapshot at close
    for path in (tmp_path / "t-0").glob("*.txnindex"):
        path.unlink()
    recovered = open_log(tmp_path / "t-0", recovery_point=0)
    recovered.high_watermark = 4
    assert recovered.producer_state.ongoing == {8: 1, 9: 3}
    assert recovered.last_stable_offset == 1
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in recovered.aborted_transactions(0, 4)] == [
        (PID, 0, 2)]
    recovered.close()


def test_truncation_forgets_aborts_past_the_new_end(tmp_path):
    log = leader_log(tmp_path / "t-0")
    log.append(txn_batch(b"a"), leader_epoch=0)
    commit(log, control=ControlType.ABORT)
    assert len(log.aborted_transactions(0, 2)) == 1
    log.truncate_to(1)
    assert log.aborted_transactions(0, 2) == [] and log.producer_state.ongoing == {PID: 0}
    log.close()


def test_followers_replay_markers_into_their_state(tmp_path):
    leader = leader_log(tmp_path / "l-0")
    leader.append(txn_batch(b"a"), leader_epoch=0)
    commit(leader, control=ControlType.ABORT)
    follower = open_log(tmp_path / "f-0")
    follower.append_as_follower(leader.read(0, 1 << 20).read())
    assert [(t.first_offset, t.last_offset) for t in follower.aborted_transactions(0, 2)] == [(0, 1)]
    assert follower.producer_state.ongoing == {} and len(follower.producer_state.unreplicated) == 1
    follower.high_watermark = 2        # a follower's HW moves on: completed transactions are forgotten
    assert follower.producer_state.unreplicated == []
    leader.close()
    follower.close()
