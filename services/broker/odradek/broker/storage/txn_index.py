"""TransactionIndex: one segment's aborted transactions, the ``.txnindex`` file (Kafka's).

On disk, beside the segment's ``.log``: ``<20-digit base offset>.txnindex``, a sequence of
34-byte entries, one per transaction aborted by a marker written in this segment, in marker
order: version i16 (0), producer id i64, first offset i64 (the transaction's first data
offset, possibly in an earlier segment), last offset i64 (the abort marker's offset), last
stable offset i64 (the partition's LSO right after the abort). Like the other indexes it is
disposable: a missing or torn file is rebuilt from the log by the producer-state replay.

The entries are also kept in memory (aborts are rare): ``collect`` answers a read_committed
fetch without touching the file. Entries are appended unbuffered to the file and fsynced
with the segment. Not thread-safe: the event-loop thread owns it.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from .checkpoint import fsync_path

__all__ = ["AbortedTxn", "TransactionIndex"]

_ENTRY = struct.Struct(">hqqqq")
_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.entries: list[AbortedTxn] = self._read()
        self._dirty = False

    def _read(self) -> list[AbortedTxn]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        entries = []
        for at in range(0, len(data) - len(data) % _ENTRY.size, _ENTRY.size):
            version, *fields = _ENTRY.unpack_from(data, at)
            if version != _VERSION:
                break   # a torn or foreign tail: the replay re-adds what is missing
            entries.append(AbortedTxn(*fields))
        return entries

    def append(self, txn: AbortedTxn) -> None:
        self.entries.append(txn)
        with open(self.path, "ab") as f:
            f.write(_ENTRY.pack(_VERSION, txn.producer_id, txn.first_offset, txn.last_offset,
                                txn.last_stable_offset))
        self._dirty = True

    def __contains__(self, key: tuple[int, int]) -> bool:
        """Is the abort of (producer id, marker offset) recorded?"""
        return any((e.producer_id, e.last_offset) == key for e in self.entries)

    def collect(self, start: int, upper: int) -> tuple[list[AbortedTxn], bool]:
        """The aborted transactions overlapping [``start``, ``upper``), and whether the search is
        complete (an entry's LSO reached ``upper``: no later segment can add one)."""
        found = [e for e in self.entries if e.last_offset >= start and e.first_offset < upper]
        return found, any(e.last_stable_offset >= upper for e in self.entries)

    def truncate_to(self, offset: int) -> None:
        """Forget the aborts whose marker is at or after ``offset`` (a truncated log)."""
        kept = [e for e in self.entries if e.last_offset < offset]
        if len(kept) != len(self.entries):
            self.entries = kept
            self._rewrite()

    def reset(self) -> None:
        self.entries = []
        self.path.unlink(missing_ok=True)

    def replace(self, entries: list[AbortedTxn]) -> None:
        self.entries = list(entries)
        self._rewrite()

    def _rewrite(self) -> None:
        if not self.entries:
            self.path.unlink(missing_ok=True)
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(b"".join(_ENTRY.pack(_VERSION, e.producer_id, e.first_offset, e.last_offset,
                                             e.last_stable_offset) for e in self.entries))
        os.replace(tmp, self.path)
        self._dirty = True

    def flush(self) -> None:
        if self._dirty and self.path.exists():
            fsync_path(self.path)
        self._dirty = False

    def rename(self, path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, path)
        self.path = Path(path)

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
