"""FileRecords' header scans: whatever the batch sizes around its read sizes (4 KiB first,
doubling to 64 KiB, a header alone past a batch as large as a chunk)."""

from __future__ import annotations

import os
import random

from odradek.broker.storage.file_records import FileRecords
from odradek.records import split_batches

from storage_helpers import batch


def test_scans_find_every_whole_batch_from_any_batch_up_to_any_end(tmp_path):
    rng = random.Random(7)
    records = FileRecords(tmp_path / "00000000000000000000.log")
    layout, offset = [], 0   # (position, size, base offset) of each batch
    for _ in range(40):   # from one small record to ~200 KiB: on both sides of every read size
        value = os.urandom(rng.choice([10, 500, 3000, 5000, 20_000, 70_000, 200_000]))
        data = memoryview(batch(*[value] * rng.choice([1, 1, 2])))
        (first,) = split_batches(data)
        first.set_base_offset(offset)
        layout.append((records.append(data), first.size, offset))
        offset = first.next_offset
    for i, (position, _, _) in enumerate(layout):
        for j in range(i, len(layout) + 1):
            end = layout[j][0] if j < len(layout) else records.size
            for cut in (end, end - 1, end + 60):   # a limit on a batch's start, within the one before, within a header
                got = [(h.position, h.size, h.base_offset) for h in records.batches_from(position, cut)]
                assert got == [b for b in layout[i:] if b[0] + b[1] <= min(cut, records.size)], (i, j, cut)
    records.close()
