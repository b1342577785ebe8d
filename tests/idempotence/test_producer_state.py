"""Producer-state checks on a real partition log: dedupe, sequence gaps, fencing, reload, truncation."""

import contextlib

import pytest

from odradek.errors import ErrorCode, KafkaError
from tests.storage.storage_helpers import batch, open_log

PID = 4711


def produce(log, *values: bytes, seq: int, epoch: int = 0, pid: int = PID):
    return log.append(batch(*values, producer_id=pid, producer_epoch=epoch, base_sequence=seq), leader_epoch=0)


def error_of(log, *values: bytes, **ids) -> ErrorCode:
    with pytest.raises(KafkaError) as e:
        produce(log, *values, **ids)
    return e.value.code


@contextlib.contextmanager
def opened(directory):
    log = open_log(directory)
    try:
        yield log
    finally:
        log.close()


@pytest.fixture
def log(tmp_path):
    opened = open_log(tmp_path / "t-0")
    yield opened
    opened.close()


def test_in_order_batches_append(log):
    assert produce(log, b"a", b"b", seq=0).first_offset == 0
    assert produce(log, b"c", seq=2).first_offset == 2
    assert log.log_end_offset == 3


@pytest.mark.parametrize("retried", [0, 1, 4])
def test_retry_of_any_of_last_five_batches_answers_its_original_offset(log, retried):
    for seq in range(5):
        produce(log, bytes([seq]), seq=seq)
    info = produce(log, bytes([retried]), seq=retried)
    assert (info.first_offset, info.last_offset) == (retried, retried)
    assert log.log_end_offset == 5  # nothing written


def test_retry_older_than_five_batches_is_out_of_order(log):
    for seq in range(6):
        produce(log, bytes([seq]), seq=seq)
    assert error_of(log, b"\x00", seq=0) == ErrorCode.out_of_order_sequence_number


def test_gap_in_sequence_is_out_of_order_and_writes_nothing(log):
    produce(log, b"a", seq=0)
    assert error_of(log, b"c", seq=2) == ErrorCode.out_of_order_sequence_number
    assert log.log_end_offset == 1


def test_older_epoch_is_invalid_producer_epoch(log):
    produce(log, b"a", seq=0, epoch=3)
    assert error_of(log, b"b", seq=1, epoch=2) == ErrorCode.invalid_producer_epoch


def test_new_epoch_must_start_at_sequence_zero(log):
    produce(log, b"a", seq=0, epoch=0)
    assert error_of(log, b"b", seq=5, epoch=1) == ErrorCode.out_of_order_sequence_number
    assert produce(log, b"b", seq=0, epoch=1).first_offset == 1


def test_unknown_producer_is_accepted_at_any_sequence(log):
    # Kafka >= 2.5 (KIP-360) no longer answers UNKNOWN_PRODUCER_ID on produce
    assert produce(log, b"a", seq=17, pid=99).first_offset == 0
    assert produce(log, b"b", seq=18, pid=99).first_offset == 1


def test_sequence_wraps_at_int_max(log):
    produce(log, b"a", seq=2**31 - 1)
    assert produce(log, b"b", seq=0).first_offset == 1


def test_non_idempotent_batches_are_not_checked(log):
    log.append(batch(b"a"), leader_epoch=0)
    log.append(batch(b"a"), leader_epoch=0)
    assert log.log_end_offset == 2


def test_dedupe_survives_reopen(tmp_path):
    log = open_log(tmp_path / "t-0")
    produce(log, b"a", seq=0)
    produce(log, b"b", seq=1)
    log.close()
    with opened(tmp_path / "t-0") as reopened:
        assert produce(reopened, b"b", seq=1).first_offset == 1
        assert error_of(reopened, b"d", seq=3) == ErrorCode.out_of_order_sequence_number
        assert produce(reopened, b"c", seq=2).first_offset == 2


def test_truncation_forgets_truncated_batches(log):
    produce(log, b"a", seq=0)
    produce(log, b"b", seq=1)
    log.truncate_to(1)
    assert produce(log, b"b", seq=1).first_offset == 1  # written again, not a duplicate
    assert log.log_end_offset == 2


def test_follower_append_builds_the_same_state(tmp_path):
    leader, follower = open_log(tmp_path / "leader"), open_log(tmp_path / "follower")
    try:
        produce(leader, b"a", seq=0)
        follower.append_as_follower(leader.read(0, 1 << 20).read())
        assert produce(follower, b"a", seq=0).first_offset == 0
        assert follower.log_end_offset == 1
    finally:
        leader.close()
        follower.close()


def test_snapshots_at_roll_and_close_and_reload_from_snapshot_plus_tail(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory)
    produce(log, b"a", seq=0)
    produce(log, b"b", seq=1, pid=7)
    log.roll()
    assert (directory / "00000000000000000002.snapshot").exists()
    produce(log, b"c", seq=1)
    log.close()
    assert (directory / "00000000000000000003.snapshot").exists()
    (directory / "00000000000000000003.snapshot").unlink()  # load from the roll's snapshot + the tail
    with opened(directory) as reopened:
        assert produce(reopened, b"c", seq=1).first_offset == 2   # from the tail
        assert produce(reopened, b"b", seq=1, pid=7).first_offset == 1   # from the snapshot
        assert error_of(reopened, b"e", seq=9) == ErrorCode.out_of_order_sequence_number


def test_corrupt_snapshot_falls_back_to_the_whole_log(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory)
    produce(log, b"a", seq=0)
    log.close()
    snapshot = directory / "00000000000000000001.snapshot"
    snapshot.write_bytes(snapshot.read_bytes()[:-3] + b"xyz")
    with opened(directory) as reopened:
        assert produce(reopened, b"a", seq=0).first_offset == 0
        assert reopened.log_end_offset == 1


def test_truncation_drops_later_snapshots(tmp_path):
    directory = tmp_path / "t-0"
    log = open_log(directory)
    produce(log, b"a", seq=0)
    log.roll()
    produce(log, b"b", seq=1)
    log.truncate_to(0)
    assert not (directory / "00000000000000000001.snapshot").exists()
    assert produce(log, b"x", seq=0, pid=5).first_offset == 0
    log.close()
