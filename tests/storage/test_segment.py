"""LogSegment on its own: appends and sparse indexing, offset translation, truncation, recovery, rolls."""

from __future__ import annotations

from odradek.broker.storage import LogSegment
from odradek.errors import KafkaError
from odradek.records import RecordBatch, split_batches

from storage_helpers import batch


def append(segment: LogSegment, n: int, *, values: int = 2, ts: int = 1000) -> None:
    for _ in range(n):
        data = memoryview(batch(*[b"x" * 30] * values, ts=ts))
        batches = split_batches(data)
        for b in batches:
            b.set_base_offset(segment.next_offset)
        segment.append(batches, data)
        ts += 10


def test_append_index_translate(tmp_path):
    segment = LogSegment(tmp_path, 100, index_bytes=1024, index_interval_bytes=200)
    append(segment, 20)
    assert segment.next_offset == 140 and tmp_path.joinpath(f"{100:020d}.log").stat().st_size == segment.size
    assert 0 < segment.offset_index.entries < 20  # sparse
    assert segment.max_timestamp_so_far == 1191 and segment.offset_of_max_timestamp == 139
    for offset in range(100, 140):
        location = segment.translate_offset(offset)
        assert location.base_offset <= offset <= location.last_offset and location.last_offset - location.base_offset == 1
    assert segment.translate_offset(140) is None
    piece = segment.read(101, 10**6, None, True)
    assert (piece.first_offset, piece.next_offset, piece.position) == (100, 140, 0)
    assert segment.read(140, 10**6, None, True) is None


def test_truncate_and_recover(tmp_path):
    segment = LogSegment(tmp_path, 0, index_bytes=1024, index_interval_bytes=100)
    append(segment, 10)
    entries_before = segment.offset_index.entries
    size_of_one = segment.size // 10
    assert segment.truncate_to(7) == 7 * size_of_one  # batches 6..7 and later go
    assert segment.next_offset == 6 and segment.size == 3 * size_of_one
    assert segment.offset_index.entries < entries_before
    assert segment.max_timestamp_so_far == 1021
    append(segment, 1, ts=5000)
    with open(segment.log.path, "ab") as f:
        f.write(b"\x00" * 30)  # a torn tail
    segment.log.size += 30
    assert segment.recover(lambda b: b.check()) == 30
    assert segment.next_offset == 8 and segment.max_timestamp_so_far == 5001


def test_recover_stops_at_a_bad_batch(tmp_path):
    segment = LogSegment(tmp_path, 0, index_bytes=1024, index_interval_bytes=100)
    append(segment, 5)
    seen: list[int] = []

    def check(b: RecordBatch) -> None:
        seen.append(b.base_offset)
        if b.base_offset == 4:
            raise KafkaError(0, "bad")

    removed = segment.recover(check)
    assert seen == [0, 2, 4] and segment.next_offset == 4 and removed == 3 * (segment.size // 2)


def test_should_roll(tmp_path):
    segment = LogSegment(tmp_path, 0, index_bytes=1024, index_interval_bytes=100, now_ms=0)
    kwargs = dict(size=100, max_timestamp=1000, last_offset=1, now_ms=0, segment_bytes=10**6, segment_ms=10**6)
    assert not segment.should_roll(**kwargs)  # an empty segment never rolls
    append(segment, 1, ts=1000)
    assert not segment.should_roll(**kwargs)
    assert segment.should_roll(**dict(kwargs, size=10**6))
    assert segment.should_roll(**dict(kwargs, max_timestamp=1001 + 10**6 + 1))
    assert segment.should_roll(**dict(kwargs, last_offset=2**31))


def test_recover_indexes_batches_past_the_first_read_chunk_at_their_file_positions(tmp_path):
    """Recovery reads the log in 1 MiB chunks: index entries past the first chunk must hold
    file positions, not positions within the chunk (else lookups land mid-file and a follower
    can never truncate)."""
    segment = LogSegment(tmp_path, 0, index_bytes=1 << 20, index_interval_bytes=4096)
    for _ in range(600):  # ~3 MiB of 5 KiB batches
        data = memoryview(batch(*[b"y" * 1000] * 5))
        batches = split_batches(data)
        batches[0].set_base_offset(segment.next_offset)
        segment.append(batches, data)
    written = [(segment.offset_index.entry(i)) for i in range(segment.offset_index.entries)]
    assert segment.recover(lambda b: b.check()) == 0
    assert [segment.offset_index.entry(i) for i in range(segment.offset_index.entries)] == written
    assert segment.size > 2 << 20
    for offset in (0, 1234, 2500, 2999):
        location = segment.translate_offset(offset)
        assert location is not None and location.base_offset <= offset <= location.last_offset
    assert segment.truncate_to(2500) > 0 and segment.next_offset == 2500


def test_a_read_at_the_tail_finds_the_last_batch_after_appends_and_truncations(tmp_path):
    """The last batch appended is found without the index (the single-record path's woken
    fetch); a truncation forgets it, and the next append's batch is found where it was written."""
    segment = LogSegment(tmp_path, 0, index_bytes=1024, index_interval_bytes=100)
    append(segment, 5)                     # batches of 2 records: offsets 8-9 last
    size_of_one = segment.size // 5
    piece = segment.read(9, 10**6, None, True)
    assert (piece.position, piece.first_offset, piece.next_offset, piece.size) == (4 * size_of_one, 8, 10, size_of_one)
    segment.truncate_to(9)                 # the last batch goes
    assert segment.translate_offset(8) is None and segment.read(8, 10**6, None, True) is None
    append(segment, 1, values=3)           # offsets 8-10, written where the old last batch was
    location = segment.translate_offset(10)
    assert (location.base_offset, location.last_offset, location.position) == (8, 10, 4 * size_of_one)
    piece = segment.read(9, 10**6, None, True)
    assert (piece.position, piece.size, piece.next_offset) == (location.position, location.size, 11)
    assert RecordBatch(memoryview(bytearray(piece.read()))).last_offset == 10


def test_reads_whole_batches_among_batches_larger_than_a_scan_chunk(tmp_path):
    """Headers past a batch over 64 KiB are read alone (not a 64 KiB chunk each), small batches
    after large ones in chunks again: every boundary found, a read ends on a whole batch."""
    segment = LogSegment(tmp_path, 0, index_bytes=1024, index_interval_bytes=10**9)  # no index help
    for values in (100, 1, 300, 2, 2, 80):   # 100 x 1 KiB: a ~100 KiB batch; 1-2: small ones
        if values < 10:
            append(segment, 1, values=values)
        else:
            append_large(segment, values)
    sizes = [b.size for b in segment.log.batches_from(0)]
    assert len(sizes) == 6 and sum(sizes) == segment.size
    piece = segment.read(0, sum(sizes[:4]) + 10, None, True)
    assert (piece.size, piece.next_offset) == (sum(sizes[:4]), 100 + 1 + 300 + 2)


def append_large(segment: LogSegment, values: int) -> None:
    data = memoryview(batch(*[b"y" * 1024] * values))
    batches = split_batches(data)
    for b in batches:
        b.set_base_offset(segment.next_offset)
    segment.append(batches, data)


def expected_read(segment: LogSegment, offset: int, max_bytes: int, max_offset: int | None, min_one: bool):
    """What a read answers, by walking every batch header from the start (position, size, next offset)."""
    limit = segment.next_offset if max_offset is None else min(max_offset, segment.next_offset)
    first, size, next_offset = None, 0, None
    for b in segment.log.batches_from(0):
        if b.last_offset < offset:
            continue
        if b.base_offset >= limit or (first is not None and size + b.size > max_bytes):
            break
        if first is None:
            if b.size > max_bytes and not min_one:
                break
            first = b.position
        size, next_offset = size + b.size, b.next_offset
    return (first, size, next_offset) if size else (None, 0, None)


def test_a_read_ends_on_the_last_whole_batch_within_its_bytes_and_offsets_found_from_the_index(tmp_path, monkeypatch):
    """Every (offset, byte limit, offset limit) reads what a walk of all headers finds, with
    batches of several sizes and a sparse index; an 8 MiB-like read of many batches reads a
    few headers near its end, not one per batch."""
    segment = LogSegment(tmp_path, 0, index_bytes=4096, index_interval_bytes=150)
    for values in (1, 3, 2, 5, 1, 1, 4, 2, 3, 1, 6, 2):
        append(segment, 1, values=values)
    sizes = [b.size for b in segment.log.batches_from(0)]
    for offset in range(segment.next_offset):
        for max_bytes in sorted({0, 1, *range(min(sizes), segment.size + 2, 37)}):
            for max_offset in (None, *range(offset, segment.next_offset + 1, 3)):
                for min_one in (True, False):
                    got = segment.read(offset, max_bytes, max_offset, min_one)
                    want = expected_read(segment, offset, max_bytes, max_offset, min_one)
                    assert (got.position if got.size else None, got.size, got.next_offset if got.size else None) == want, \
                        (offset, max_bytes, max_offset, min_one)
    read_headers = []
    real = segment.log.batches_from
    monkeypatch.setattr(segment.log, "batches_from",
                        lambda *a: (read_headers.append(h) or h for h in real(*a)))
    piece = segment.read(0, segment.size - 1, None, True)
    assert piece.size == sum(sizes[:-1]) and len(read_headers) <= 4
