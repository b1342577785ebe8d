"""The cleaner's transaction rules (Kafka's): aborted data removed and kept out of the key map,
a marker kept while its transaction's data remains and for delete.retention.ms after, the
cleaned segment's .txnindex keeping the aborts whose marker stayed, and no cleaning past the
last stable offset."""

from odradek.broker.storage.cleaner import CleanerSettings, LogCleaner
from odradek.records import ControlType, Record, build_batch, iter_records, read_control
from tests.storage.storage_helpers import decode, open_log

NOW = 10_000_000


def settings() -> CleanerSettings:
    return CleanerSettings.of({"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                               "delete.retention.ms": "1000"})


def txn(log, pid: int, seq: int, *pairs: tuple[bytes, bytes]) -> None:
    log.append(build_batch([Record(v, k, timestamp=NOW) for k, v in pairs], producer_id=pid, producer_epoch=0,
                           base_sequence=seq, transactional=True), leader_epoch=0)


def end(log, pid: int, control: ControlType) -> None:
    log.append_marker(control, pid, 0, 0, leader_epoch=0, now_ms=NOW)


def contents(log):
    """(offset, key, value) of data records and (offset, 'COMMIT'/'ABORT') of markers."""
    out = []
    piece = log.read(log.log_start_offset, 1 << 20)
    offset = log.log_start_offset
    while piece.size:
        for b in decode(piece.read()):
            if b.is_control:
                out.append((b.base_offset, read_control(b).type.name))
            else:
                out.extend((r.offset, r.key, r.value) for r in iter_records(b))
        offset = piece.next_offset
        piece = log.read(offset, 1 << 20)
    return out


def test_aborted_data_goes_and_markers_follow_kafkas_rules(tmp_path):
    log = open_log(tmp_path / "t-0")
    txn(log, 1, 0, (b"a", b"committed"))                       # 0
    end(log, 1, ControlType.COMMIT)                            # 1
    txn(log, 2, 0, (b"a", b"aborted"), (b"b", b"aborted"))     # 2-3
    log.roll()
    end(log, 2, ControlType.ABORT)                             # 4 (the abort in the second segment)
    log.append(build_batch([Record(b"1", b"c", timestamp=NOW)]), leader_epoch=0)   # 5
    log.roll()
    log.append(build_batch([Record(b"2", b"c", timestamp=NOW)]), leader_epoch=0)   # 6, active
    txn(log, 2, 2, (b"d", b"x"))       # 7: producer 2's last batch is no longer the aborted one,
    end(log, 2, ControlType.COMMIT)    # 8  which Kafka would keep as an empty batch (and its marker)
    log.high_watermark = log.log_end_offset
    tail = [(5, b"c", b"1"), (6, b"c", b"2"), (7, b"d", b"x"), (8, "COMMIT")]
    cleaner = LogCleaner(tmp_path)
    assert cleaner.clean_now(log, settings(), NOW + 10, force=True) is not None
    assert contents(log) == [(0, b"a", b"committed"), (1, "COMMIT"), (4, "ABORT"), *tail]
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in log.aborted_transactions(0, 9)] == [(2, 2, 4)]
    # the next cleaning sees no data of the aborted transaction: its marker may go once
    # delete.retention.ms has passed; the commit marker stays while its data does
    assert cleaner.clean_now(log, settings(), NOW + 10, force=True) is not None
    assert (4, "ABORT") in contents(log)
    assert cleaner.clean_now(log, settings(), NOW + 5_000, force=True) is not None
    assert contents(log) == [(0, b"a", b"committed"), (1, "COMMIT"), *tail]
    assert log.aborted_transactions(0, 9) == []
    log.close()
    reopened = open_log(tmp_path / "t-0", clean=True)
    assert contents(reopened) == [(0, b"a", b"committed"), (1, "COMMIT"), *tail]
    reopened.close()


def test_nothing_past_the_last_stable_offset_is_cleaned(tmp_path):
    log = open_log(tmp_path / "t-0")
    log.append(build_batch([Record(b"1", b"k", timestamp=NOW)]), leader_epoch=0)
    log.roll()
    txn(log, 3, 0, (b"k", b"open"))                            # 1: an open transaction
    log.roll()
    log.append(build_batch([Record(b"3", b"k", timestamp=NOW)]), leader_epoch=0)
    log.roll()
    log.append(build_batch([Record(b"4", b"k", timestamp=NOW)]), leader_epoch=0)
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 1
    assert [s.base_offset for s in LogCleaner.cleanable(log, settings(), NOW)] == [0]
    log.close()
