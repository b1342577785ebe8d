"""What a cleaning does with transactions (Kafka's CleanedTransactionMetadata).

One ``TxnCleaning`` follows one pass over the cleaned range, batch by batch in offset order,
knowing the aborted transactions of the range (from the ``.txnindex`` files, as (producer id,
first offset, marker offset, LSO), in first-offset order):
- a transactional data batch of a producer whose aborted transaction is open at that offset
  is *aborted*: it stays out of the key map and its records are removed;
- an ABORT marker may go once no batch of its transaction was seen in this pass (its data is
  already gone); while some was, it stays and its transaction is recorded in the cleaned
  segment's ``.txnindex`` (``kept_aborts``), so a read_committed reader still skips what a
  concurrent fetch may hold;
- a COMMIT marker may go once no batch of its transaction was seen in this pass;
- a marker that may go still waits for ``delete.retention.ms`` past its timestamp (Kafka counts
  from a delete horizon it stamps in the batch at the first such cleaning; here the marker's own
  timestamp stands for it), so a consumer that read the data also gets the marker.
Plain data only: it runs in the cleaner process. Not thread-safe.
"""

from __future__ import annotations

from collections import deque
from typing import Iterable

from odradek.records import ControlType

__all__ = ["TxnCleaning"]

Abort = tuple[int, int, int, int]   # producer id, first offset, marker offset, last stable offset


class TxnCleaning:
    def __init__(self, aborted: Iterable[Abort]) -> None:
        aborted = sorted(aborted, key=lambda a: a[1])
        self._ranges: dict[int, list[tuple[int, int]]] = {}
        for pid, first, last, _ in aborted:
            self._ranges.setdefault(pid, []).append((first, last))
        self._pending = deque(aborted)
        self._aborting: dict[int, list] = {}     # producer id -> [abort, data seen in this pass]
        self._committing: set[int] = set()       # producers whose committed data was seen
        self.kept_aborts: list[Abort] = []

    def _open_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0][1] <= offset:
            abort = self._pending.popleft()
            self._aborting.setdefault(abort[0], [abort, False])

    def aborted_at(self, producer_id: int, offset: int) -> bool:
        """Does ``offset`` fall in an aborted transaction of the producer? (No pass order needed:
        for the key map, which skips the clean part.)"""
        return any(first <= offset <= last for first, last in self._ranges.get(producer_id, ()))

    def on_data(self, producer_id: int, transactional: bool, last_offset: int) -> bool:
        """Is this data batch part of an aborted transaction (to be removed)?"""
        if not transactional or producer_id < 0:
            return False
        self._open_up_to(last_offset)
        aborting = self._aborting.get(producer_id)
        if aborting is not None:
            aborting[1] = True
            return True
        self._committing.add(producer_id)
        return False

    def on_marker(self, producer_id: int, control_type: ControlType | None, offset: int) -> bool:
        """May this marker go (once ``delete.retention.ms`` has passed)? None: an emptied or
        unknown control batch, which may go."""
        self._open_up_to(offset)
        if control_type == ControlType.ABORT:
            aborting = self._aborting.pop(producer_id, None)
            if aborting is not None and aborting[1]:
                self.kept_aborts.append(aborting[0])
                return False
            return True
        if control_type == ControlType.COMMIT:
            seen = producer_id in self._committing
            self._committing.discard(producer_id)
            return not seen
        return control_type is None
