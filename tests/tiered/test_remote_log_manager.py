"""The remote log manager against a real S3 server (S3Proxy), on logs written by the broker's own
code: rolled segments reach the store oldest first and only below the last stable offset; local
retention then deletes only what the store holds; with the store stopped nothing more leaves the
disk and the copies resume once it is back, without a gap or a second copy; a new leader (another
replica with the same history, then a newer epoch) resumes from what the store holds; every
record stays readable, from the disk or from the store.

The read side (``remote_read``, ``remote_follower``): the remote log reader serves every offset
below the local log start, in order, whole batches within the byte limit (the first whole when
the fetch must progress), from the offset index's position; a timestamp below the local log start
is found from the remote time index (the first record at or after it, with its batch's leader
epoch), one on the disk only is not found in the store; chunks are cached and read ahead; a
corrupt chunk raises and is never returned; a follower's log rebuilt from the store starts at
the leader's local log start with the leader epochs and producer state the store kept."""

from __future__ import annotations

import asyncio
import time

import pytest

from odradek.broker.storage.remote_follower import rebuild, segment_before
from odradek.broker.storage.remote_log_manager import HostedPartition, RemoteLogManager
from odradek.broker.storage.remote_metadata import CorruptRemoteObject
from odradek.broker.storage.remote_read import RemoteLogReader
from odradek.broker.storage.remote_storage import RemoteStorageManager, object_key
from odradek.broker.storage.remote_timestamp import TimestampAndOffset, find_offset_by_timestamp
from odradek.dev.waiting import wait_until
from odradek.errors import KafkaError
from odradek.records import iter_batches, iter_records
from tests.storage.storage_helpers import batch, open_log
from tests.tiered.conftest import rsm_config
from tests.tiered.segments import write_rolled_segment

TOPIC_ID = "tiered-rlm-topic-id"
TIERED = dict(remote_storage_enable="true", segment_bytes=300, local_retention_bytes=600)
NOW = time.time_ns() // 1_000_000   # records of now: within retention.ms (7 days), so remote retention keeps them


def _append(lg, start: int, count: int, epoch: int) -> None:
    for i in range(start, start + count):
        lg.append(batch(b"value-%04d" % i, ts=NOW + i), leader_epoch=epoch)
    lg.high_watermark = lg.log_end_offset


def _manager(rsm, lg, leading=True) -> RemoteLogManager:
    return RemoteLogManager(1, rsm, lambda: [HostedPartition(TOPIC_ID, lg, leading)], interval_ms=1000)


def _values(data: bytes) -> list[tuple[int, bytes]]:
    out = []
    for b in iter_batches(memoryview(bytearray(data))):
        out += [(r.offset, bytes(r.value)) for r in iter_records(b)]
    return out


def _everything(rsm, lg) -> dict[int, bytes]:
    """Every record, by offset: the store's segments, then the local log."""
    found: dict[int, bytes] = {}
    for m in rsm.list_log_segments(TOPIC_ID, lg.topic, lg.partition):
        found.update(_values(rsm.fetch_log_segment(m, 0)))
    offset = lg.local_log_start_offset
    while offset < lg.log_end_offset:
        piece = lg.read(offset, 1 << 20)
        found.update(_values(piece.read()))
        offset = piece.next_offset
    return found


def _assert_no_gap_nor_second_copy(rsm, lg) -> None:
    listed = rsm.list_log_segments(TOPIC_ID, lg.topic, lg.partition)
    starts = [m.start_offset for m in listed]
    assert starts == sorted(set(starts)), f"a segment copied twice: {starts}"
    for a, b in zip(listed, listed[1:]):
        assert b.start_offset == a.end_offset + 1, f"gap or overlap between {a} and {b}"


def test_copies_then_local_retention_outage_and_resume(s3proxy, tmp_path):
    rsm = RemoteStorageManager(rsm_config(s3proxy))
    lg = open_log(tmp_path / "t-0", **TIERED)
    _append(lg, 0, 40, epoch=0)
    rlm = _manager(rsm, lg)
    asyncio.run(rlm.run_once())
    rolled = lg.segments[:-1]
    listed = rsm.list_log_segments(TOPIC_ID, "t", 0)
    assert [m.start_offset for m in listed] == [s.base_offset for s in rolled]
    assert lg.highest_remote_offset == lg.active_segment.base_offset - 1
    lg.apply_retention(now_ms=NOW + 1_000)
    assert lg.size <= 600 + 300 and lg.log_start_offset == 0 and lg.local_log_start_offset > 0

    s3proxy.stop()
    try:
        _append(lg, 40, 40, epoch=0)
        asyncio.run(rlm.run_once())
        assert rlm.failures == 1
        held = lg.highest_remote_offset
        lg.apply_retention(now_ms=NOW + 1_000)
        assert lg.local_log_start_offset == held + 1, "segments not in the store stay on disk"
    finally:
        s3proxy.start()
    asyncio.run(rlm.run_once())
    assert lg.highest_remote_offset == lg.active_segment.base_offset - 1
    _assert_no_gap_nor_second_copy(rsm, lg)
    lg.apply_retention(now_ms=NOW + 1_000)
    assert lg.size <= 600 + 300
    assert _everything(rsm, lg) == {i: b"value-%04d" % i for i in range(80)}
    lg.close()


def test_a_new_leader_resumes_from_the_store(s3proxy, tmp_path):
    rsm = RemoteStorageManager(rsm_config(s3proxy, prefix="leader-change/"))
    old = open_log(tmp_path / "old" / "t-0", **TIERED)
    new = open_log(tmp_path / "new" / "t-0", **TIERED)
    _append(old, 0, 30, epoch=0)
    offset = 0
    while offset < old.log_end_offset:    # the follower replicates the leader's batches
        piece = old.read(offset, 1 << 20)
        new.append_as_follower(piece.read())
        offset = piece.next_offset
    new.high_watermark = new.log_end_offset
    asyncio.run(_manager(rsm, old).run_once())
    asyncio.run(_manager(rsm, new, leading=False).run_once())   # a follower only learns what is there
    assert new.highest_remote_offset == old.highest_remote_offset > 0
    copied_before = len(rsm.list_log_segments(TOPIC_ID, "t", 0))
    new.leader_epochs.assign(1, new.log_end_offset)                # the follower becomes leader
    _append(new, 30, 30, epoch=1)
    leader = _manager(rsm, new)
    asyncio.run(leader.run_once())
    assert leader.copied == len(rsm.list_log_segments(TOPIC_ID, "t", 0)) - copied_before > 0
    _assert_no_gap_nor_second_copy(rsm, new)
    assert 1 in rsm.list_log_segments(TOPIC_ID, "t", 0)[-1].segment_leader_epochs
    new.apply_retention(now_ms=NOW + 1_000)
    assert _everything(rsm, new) == {i: b"value-%04d" % i for i in range(60)}
    old.close()
    new.close()


BIG = dict(TIERED, segment_bytes=3000, local_retention_bytes=3000)   # segments of several chunks


@pytest.fixture
def tiered(s3proxy, tmp_path, request):
    """A log of 120 records in two epochs whose older segments are in the store only."""
    rsm = RemoteStorageManager(rsm_config(s3proxy, prefix=f"{request.node.name}/", chunk_bytes=1024))
    lg = open_log(tmp_path / "t-0", **BIG)
    _append(lg, 0, 60, epoch=0)
    lg.leader_epochs.assign(3, lg.log_end_offset)
    _append(lg, 60, 60, epoch=3)
    rlm = _manager(rsm, lg)
    asyncio.run(rlm.run_once())
    lg.apply_retention(now_ms=NOW + 1_000)
    assert lg.log_start_offset == 0 and lg.local_log_start_offset > 60
    yield rsm, lg, rlm.reader
    lg.close()


def _read_all(reader: RemoteLogReader, lg, start: int, max_bytes: int) -> list[tuple[int, bytes]]:
    async def go():
        found, offset = [], start
        while offset < lg.local_log_start_offset:
            remote = await reader.segments(lg, TOPIC_ID, offset)
            piece = reader.read(remote[reader.covering(remote, offset)], offset, max_bytes, lg.high_watermark, True)
            assert piece.size > 0 and piece.first_offset <= offset < piece.next_offset
            found += _values(piece.data)
            offset = piece.next_offset
        return found
    return asyncio.run(go())


def test_every_remote_offset_is_read_in_order_with_cache_and_read_ahead(tiered):
    rsm, lg, reader = tiered
    local = lg.local_log_start_offset
    found = _read_all(reader, lg, 0, 1500)
    assert found == [(i, b"value-%04d" % i) for i in range(local)]
    assert reader.read_ahead > 0 and reader.reads > 0
    wait_until(lambda: reader.reading_ahead == 0, 30, "the read-aheads done")
    reads = reader.reads
    again = _read_all(reader, lg, 0, 1500)
    assert again == found and reader.reads == reads, "a second pass is served from the cache"
    # from the middle of the store: whole batches from the one holding the offset
    middle = _read_all(RemoteLogReader(rsm), lg, 37, 100)
    assert middle[0][0] == 37 and [o for o, _ in middle] == list(range(37, local))


def test_byte_limit_upper_bound_and_no_segment(tiered):
    _, lg, reader = tiered

    async def remote():
        return await reader.segments(lg, TOPIC_ID, 0)
    segments = asyncio.run(remote())
    first = reader.read(segments[0], 0, 1, lg.high_watermark, min_one=True)
    assert first.next_offset == 1 and first.size > 1, "the first batch whole when the fetch must progress"
    assert reader.read(segments[0], 0, 1, lg.high_watermark, min_one=False).size == 0
    assert reader.read(segments[0], 0, 1 << 20, 5, min_one=True).next_offset == 5, "nothing at or past the bound"
    with pytest.raises(KafkaError):
        reader.covering(segments, lg.log_end_offset + 10)


def test_a_corrupt_chunk_is_never_returned(tiered, s3proxy):
    rsm, lg, _ = tiered
    reader = RemoteLogReader(rsm)

    async def remote():
        return await reader.segments(lg, TOPIC_ID, 0)
    segment = asyncio.run(remote())[0]
    path = s3proxy.object_path(object_key(rsm.config.prefix, segment, "log"))
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF
    path.write_bytes(data)
    with pytest.raises(CorruptRemoteObject):
        reader.read(segment, 0, 1 << 20, lg.high_watermark, True)
    assert reader.reads == 0


def test_a_follower_is_rebuilt_at_the_leaders_local_log_start(tiered, tmp_path):
    rsm, leader, reader = tiered
    follower = open_log(tmp_path / "follower" / "t-0", **BIG)
    _append(follower, 0, 5, epoch=0)      # far behind the leader's local log start
    local = leader.local_log_start_offset
    listed = rsm.list_log_segments(TOPIC_ID, "t", 0)
    assert segment_before(listed, local).end_offset == local - 1
    asyncio.run(rebuild(reader, TOPIC_ID, follower, local, leader.log_start_offset))
    assert follower.log_end_offset == follower.local_log_start_offset == local
    assert follower.log_start_offset == 0
    assert [(e.epoch, e.start_offset) for e in follower.leader_epochs.entries] == [(0, 0), (3, 60)]
    offset = local
    while offset < leader.log_end_offset:   # then it fetches from the leader's disk as usual
        piece = leader.read(offset, 1 << 20)
        follower.append_as_follower(piece.read())
        offset = piece.next_offset
    assert follower.log_end_offset == leader.log_end_offset
    assert follower.leader_epochs.entries == leader.leader_epochs.entries
    follower.close()


def test_remote_reads_equal_local_ones_and_aborted_transactions_come_from_the_txnindex(s3proxy, tmp_path):
    rolled = write_rolled_segment(tmp_path / "t-0")     # 60 batches of 20, then an aborted transaction at 1200
    rsm = RemoteStorageManager(rsm_config(s3proxy, prefix="aborted/"))
    meta = rolled.metadata()
    rsm.copy_log_segment_data(meta, rolled.data)
    reader = RemoteLogReader(rsm)
    for offset, max_bytes in ((0, 5000), (710, 5000), (1199, 1 << 20), (333, 1)):
        local = rolled.log.read(offset, max_bytes, max_offset=meta.end_offset + 1)
        remote = reader.read(meta, offset, max_bytes, meta.end_offset + 1, min_one=True)
        assert (remote.data, remote.first_offset, remote.next_offset) == (local.read(), local.first_offset,
                                                                         local.next_offset)
    assert reader.aborted([meta], 0, meta.end_offset + 1) == [(4242, 1200)]
    assert reader.aborted([meta], 0, 1200) == []
    rolled.log.close()


def test_a_timestamp_below_the_local_log_start_is_found_in_the_store(tiered):
    _, lg, reader = tiered
    local = lg.local_log_start_offset

    def find(ts: int):
        return asyncio.run(find_offset_by_timestamp(reader, lg, TOPIC_ID, ts))
    for i in (0, 1, 37, 59, 60, 61, local - 1):
        assert find(NOW + i) == TimestampAndOffset(NOW + i, i, 0 if i < 60 else 3)
    assert find(NOW - 10_000) == TimestampAndOffset(NOW, 0, 0), "before every record: the first"
    assert find(NOW + local + 1) == TimestampAndOffset(NOW + local + 1, local + 1, 3), "in both: the store's"
    assert find(NOW + lg.highest_remote_offset + 1) is None, "on the disk only: the local log answers"
    lg.log_start_offset = 40                     # remote retention moved the log start
    assert find(NOW + 3) == TimestampAndOffset(NOW + 40, 40, 0)
