"""Helpers for the storage tests: building batches, opening logs, reading everything back."""

from __future__ import annotations

from pathlib import Path

from odradek.broker.storage import Log, LogConfig
from odradek.records import Compression, Record, RecordBatch, build_batch, iter_batches, iter_records


def batch(*values: bytes, ts: int = 1_000, step: int = 1, compression: Compression = Compression.NONE,
          **kwargs) -> bytearray:
    """A v2 batch of ``values`` (timestamps ts, ts+step, ...), base offset 0, as a producer sends it."""
    return build_batch([Record(v, key=b"k" + v, timestamp=ts + i * step) for i, v in enumerate(values)],
                       compression=compression, **kwargs)


def config(**settings) -> LogConfig:
    """LogConfig from keyword settings: ``segment_bytes=1000`` means ``segment.bytes=1000``."""
    return LogConfig.from_overrides({k.replace("_", "."): str(v) for k, v in settings.items()})


def open_log(directory: Path, *, clean: bool = False, recovery_point: int = 0, log_start_offset: int = 0,
             **settings) -> Log:
    return Log.open(directory, config(**settings), topic="t", partition=0, clean_shutdown=clean,
                    recovery_point=recovery_point, log_start_offset=log_start_offset)


def decode(data: bytes) -> list[RecordBatch]:
    view = memoryview(bytearray(data))
    batches = list(iter_batches(view))
    assert sum(b.size for b in batches) == len(data), "a slice must hold whole batches only"
    return batches


def read_records(log: Log, start: int | None = None) -> list[Record]:
    """Every record from ``start`` (default: the log start) to the log end, through read()."""
    offset = log.log_start_offset if start is None else start
    out: list[Record] = []
    while offset < log.log_end_offset:
        piece = log.read(offset, 1 << 20)
        assert piece.size > 0, f"no data at {offset} below the log end {log.log_end_offset}"
        for b in decode(piece.read()):
            assert b.compute_crc() == b.crc
            out.extend(r for r in iter_records(b) if r.offset >= offset)
        offset = piece.next_offset
    return out
