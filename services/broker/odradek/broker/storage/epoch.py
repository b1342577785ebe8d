"""Leader epoch cache of one partition (Kafka's LeaderEpochFileCache, KIP-101).

Entries ``(epoch, start_offset)``: the first offset written under each leader epoch, both
strictly increasing. Persisted in the partition's ``leader-epoch-checkpoint`` (see
checkpoint) at every change; changes are rare (a new leader epoch, a truncation).
Answers OffsetsForLeaderEpoch: the end offset of an epoch is the start of the next one.
Not thread-safe: owned by its Log on the event-loop thread.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from .checkpoint import CorruptCheckpoint, read_checkpoint, write_checkpoint

__all__ = ["EpochEntry", "LeaderEpochCache", "UNDEFINED"]

UNDEFINED = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.entries = [EpochEntry(int(e), int(o)) for e, o in read_checkpoint(path, 2)]
        except (CorruptCheckpoint, ValueError):
            self.entries = []  # rebuilt as batches arrive; followers re-truncate from the leader

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else UNDEFINED

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (no-op for a known epoch)."""
        if epoch < 0 or (self.entries and epoch <= self.entries[-1].epoch):
            return
        kept = [e for e in self.entries if e.start_offset < start_offset]
        self.entries = kept + [EpochEntry(epoch, start_offset)]
        self._flush()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> EpochEntry:
        """(largest epoch <= ``epoch``, the offset where it ended), as OffsetsForLeaderEpoch answers."""
        if epoch == UNDEFINED:
            return EpochEntry(UNDEFINED, UNDEFINED)
        if epoch == self.latest_epoch:
            return EpochEntry(epoch, log_end_offset)
        later = [e for e in self.entries if e.epoch > epoch]
        if not later:
            return EpochEntry(UNDEFINED, UNDEFINED)
        earlier = [e for e in self.entries if e.epoch <= epoch]
        return EpochEntry(earlier[-1].epoch if earlier else epoch, later[0].start_offset)

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget the epochs that start at or after ``end_offset`` (log truncated there)."""
        kept = [e for e in self.entries if e.start_offset < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: the epoch covering it starts there."""
        before = [e for e in self.entries if e.start_offset <= start_offset]
        after = [e for e in self.entries if e.start_offset > start_offset]
        kept = ([EpochEntry(before[-1].epoch, start_offset)] if before else []) + after
        if kept != self.entries:
            self.entries = kept
            self._flush()

    def clear(self) -> None:
        self.entries = []
        self._flush()

    def _flush(self) -> None:
        if self.path.parent.exists():
            write_checkpoint(self.path, list(self.entries))
