"""Model-based test: a Log against a plain list of records, through appends, rolls, reads,
timestamp lookups, retention, clean restarts and crashes with a torn active segment."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from odradek.broker.storage import Log, LogConfig, TimestampOffset
from odradek.records import Record, build_batch

from storage_helpers import decode, read_records
from test_loader import crash

SETTINGS = {"segment.bytes": "400", "index.interval.bytes": "64", "segment.index.bytes": "48",
            "retention.ms": "-1", "file.delete.delay.ms": "0"}

records_st = st.lists(st.tuples(st.binary(max_size=60), st.integers(1_000, 5_000)), min_size=1, max_size=4)


class LogModel(RuleBasedStateMachine):
    @initialize()
    def open(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="odradek-model-")) / "t-0"
        self.overrides = dict(SETTINGS)
        self.log = self._open(clean=True, recovery_point=0)
        self.batches: list[tuple[int, int, list[tuple[int, bytes, int]]]] = []  # base, size, records
        self.start = 0

    def _open(self, *, clean: bool, recovery_point: int) -> Log:
        return Log.open(self.dir, LogConfig.from_overrides(self.overrides), topic="t", partition=0,
                        clean_shutdown=clean, recovery_point=recovery_point, log_start_offset=getattr(self, "start", 0))

    @property
    def end(self) -> int:
        return self.batches[-1][0] + len(self.batches[-1][2]) if self.batches else self.start

    def model_records(self, start: int) -> list[tuple[int, bytes, int]]:
        return [r for _, _, recs in self.batches for r in recs if r[0] >= start]

    @rule(batches=st.lists(records_st, min_size=1, max_size=3))
    def append(self, batches) -> None:
        offset = self.end
        for recs in batches:    # one append each: Kafka refuses several batches in one
            raw = build_batch([Record(v, timestamp=ts) for v, ts in recs])
            self.batches.append((offset, len(raw), [(offset + i, v, ts) for i, (v, ts) in enumerate(recs)]))
            info = self.log.append(memoryview(raw), leader_epoch=1, now_ms=0)
            assert (info.first_offset, info.last_offset) == (offset, offset + len(recs) - 1)
            offset += len(recs)
        self.log.high_watermark = self.log.log_end_offset

    @rule(data=st.data(), max_bytes=st.integers(1, 600), min_one=st.booleans())
    def read(self, data, max_bytes, min_one) -> None:
        offset = data.draw(st.integers(self.start, self.end))
        piece = self.log.read(offset, max_bytes, min_one_batch=min_one)
        if offset == self.end:
            assert piece.size == 0
            return
        got = decode(piece.read())
        containing = next(b for b in self.batches if b[0] <= offset < b[0] + len(b[2]))
        if not got:
            assert not min_one and containing[1] > max_bytes
            return
        assert got[0].base_offset == containing[0] == piece.first_offset
        assert piece.size <= max_bytes or len(got) == 1
        by_base = {b[0]: b for b in self.batches}
        for b in got:
            assert b.size == by_base[b.base_offset][1] and b.records_count == len(by_base[b.base_offset][2])

    @rule(ts=st.integers(900, 5_100))
    def lookup_timestamp(self, ts) -> None:
        expected = next(((t, o) for o, _, t in self.model_records(self.start) if t >= ts), None)
        assert self.log.offset_for_timestamp(ts) == (TimestampOffset(*expected) if expected else None)

    @rule()
    def latest_timestamp(self) -> None:
        records = self.model_records(self.log.segments[0].base_offset)
        if not records:
            return
        top = max(t for _, _, t in records)
        assert self.log.latest_timestamp() == TimestampOffset(top, next(o for o, _, t in records if t == top))

    @rule(limit=st.integers(0, 1_500))
    def retention_by_bytes(self, limit) -> None:
        self.overrides = dict(self.overrides, **{"retention.bytes": str(limit)})
        self.log.update_config(LogConfig.from_overrides(self.overrides))
        before = self.log.size
        self.log.apply_retention(now_ms=0)
        for path in self.log.purge_deleted(now_ms=0):   # closed; the manager unlinks them in a worker thread
            path.unlink(missing_ok=True)
        self._moved_start()
        if self.log.size < before:
            assert self.log.size >= limit
        assert self.log.size - self.log.segments[0].size < limit or len(self.log.segments) == 1

    @rule(cutoff=st.integers(1_000, 5_100))
    def retention_by_time(self, cutoff) -> None:
        self.overrides = dict(self.overrides, **{"retention.ms": "1000", "retention.bytes": "-1"})
        self.log.update_config(LogConfig.from_overrides(self.overrides))
        self.log.apply_retention(now_ms=cutoff + 1000)
        old_start = self.start
        self._moved_start()
        assert all(t < cutoff for o, _, t in self.model_records(old_start) if o < self.start)
        self.overrides["retention.ms"] = "-1"
        self.log.update_config(LogConfig.from_overrides(self.overrides))

    def _moved_start(self) -> None:
        new_start = self.log.log_start_offset
        assert new_start >= self.start
        assert new_start == self.end or any(b[0] == new_start for b in self.batches)
        self.batches = [b for b in self.batches if b[0] >= new_start]
        self.start = new_start

    @rule()
    def clean_restart(self) -> None:
        self.log.flush()
        self.log.close()
        self.log = self._open(clean=True, recovery_point=self.log.recovery_point)
        self.log.high_watermark = self.log.log_end_offset  # the manager restores it from its checkpoint

    @rule(fraction=st.floats(0, 1))
    def crash_with_torn_tail(self, fraction) -> None:
        active = self.log.active_segment
        cut = int(active.size * fraction)
        path, base, recovery_point = active.log.path, active.base_offset, self.log.recovery_point
        crash(self.log)
        os.truncate(path, cut)
        kept, used = [b for b in self.batches if b[0] < base], 0
        for b in (b for b in self.batches if b[0] >= base):
            if used + b[1] > cut:
                break
            kept.append(b)
            used += b[1]
        self.batches = kept
        self.log = self._open(clean=False, recovery_point=min(recovery_point, base))
        self.log.high_watermark = self.log.log_end_offset

    @invariant()
    def offsets_agree(self) -> None:
        if not hasattr(self, "log"):
            return
        assert (self.log.log_start_offset, self.log.log_end_offset) == (self.start, self.end)
        assert all(s.size <= 400 for s in self.log.segments)

    @invariant()
    def everything_reads_back(self) -> None:
        if not hasattr(self, "log"):
            return
        got = [(r.offset, r.value, r.timestamp) for r in read_records(self.log)]
        assert got == self.model_records(self.start)

    def teardown(self) -> None:
        if hasattr(self, "log"):
            self.log.close()
            shutil.rmtree(self.dir.parent, ignore_errors=True)


LogModel.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestLogModel = LogModel.TestCase
