"""The operations log of a verify run, in the style of a Jepsen history.

Every operation is recorded as it starts (``invoke``) and as it ends: ``ok`` (it happened),
``fail`` (it certainly did not happen) or ``info`` (unknown: a produce whose delivery report
is an error or never came may still have been written). Each entry carries the wall-clock
time (for people and logs) and the monotonic time (for durations).

Functions (``f``):

- ``send``: a producer sends ``value`` (``"<producer>-<seq>"``), aimed at ``partition``;
  the ``ok`` entry carries the partition and offset the broker acknowledged.
- ``fault`` / ``start`` / ``recovered``: the nemesis injects a fault into a process
  (``value`` names it, ``data`` gives its ``kind``, why it was chosen and, when done, what it
  did), restarts one, sees it back (older histories have ``kill`` for ``fault``).
- ``read``: a consumer read of every partition; ``value`` is a label (``snapshot-3``,
  ``final``) and ``data`` holds ``{"records": {partition: [[offset, value], ...]},
  "complete": [partitions read up to their high watermark], "started": monotonic start}``.
- ``workload`` / ``heal``: boundaries of the run (producers started / stopped, faults healed).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"


@dataclass
class Op:
    index: int
    process: str
    type: str
    f: str
    value: Any = None
    wall: float = 0.0
    mono: float = 0.0
    partition: int | None = None
    offset: int | None = None
    error: str | None = None
    data: dict | None = None

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, d: dict) -> "Op":
        return cls(**d)


@dataclass
class History:
    """An append-only, thread-safe list of operations."""

    ops: list[Op] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record(self, process: str, type: str, f: str, value: Any = None, *, mono: float | None = None,
               wall: float | None = None, **extra: Any) -> Op:
        with self._lock:
            op = Op(len(self.ops), process, type, f, value,
                    time.time() if wall is None else wall,
                    time.monotonic() if mono is None else mono, **extra)
            self.ops.append(op)
            return op

    # -- shorthands ---------------------------------------------------------------------
    def invoke(self, process: str, f: str, value: Any = None, **extra: Any) -> Op:
        return self.record(process, INVOKE, f, value, **extra)

    def ok(self, process: str, f: str, value: Any = None, **extra: Any) -> Op:
        return self.record(process, OK, f, value, **extra)

    def fail(self, process: str, f: str, value: Any = None, **extra: Any) -> Op:
        return self.record(process, FAIL, f, value, **extra)

    def info(self, process: str, f: str, value: Any = None, **extra: Any) -> Op:
        return self.record(process, INFO, f, value, **extra)

    def read(self, label: str, records: dict[int, list[tuple[int, str]]], complete: Iterable[int],
             started: float | None = None, **extra: Any) -> Op:
        """One consumer read: ``records`` is {partition: [(offset, value), ...]}; ``started``
        its monotonic start (stale reads are judged against it)."""
        data = {"records": {str(p): [[o, v] for o, v in recs] for p, recs in records.items()},
                "complete": sorted(complete)}
        if started is not None:
            data["started"] = started
        return self.record("reader", OK, "read", label, data=data, **extra)

    # -- queries ------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Op]:
        with self._lock:
            return iter(list(self.ops))

    def __len__(self) -> int:
        return len(self.ops)

    def where(self, f: str | None = None, type: str | None = None) -> list[Op]:
        return [op for op in self if (f is None or op.f == f) and (type is None or op.type == type)]

    # -- persistence (one JSON object per line) -------------------------------------------
    def dump(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w") as out:
            for op in self:
                out.write(json.dumps(op.to_json(), separators=(",", ":")) + "\n")

    @classmethod
    def load(cls, path: Path) -> "History":
        h = cls()
        with open(path) as f:
            h.ops = [Op.from_json(json.loads(line)) for line in f if line.strip()]
        return h


def read_records(op: Op) -> dict[int, list[tuple[int, str]]]:
    """The {partition: [(offset, value)]} of a ``read`` operation."""
    return {int(p): [(int(o), v) for o, v in recs] for p, recs in (op.data or {}).get("records", {}).items()}


def parse_value(value: str) -> tuple[str, int] | None:
    """``"confluent-0-17"`` -> ``("confluent-0", 17)``; None when it is not a workload value."""
    producer, sep, seq = value.rpartition("-")
    if not sep or not producer or not seq.isdigit():
        return None
    return producer, int(seq)
