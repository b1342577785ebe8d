"""Tiered storage's broker side without a store: Kafka's topic config checks, local retention
of a log with remote.storage.enable (only what the store holds leaves the disk, the log start
offset stays), and the remote log manager's decisions (leader-epoch lineage, what to copy next,
what remote retention deletes); the read side's decisions (a fetch below the local log start:
OFFSET_MOVED_TO_TIERED_STORAGE for a follower, one store read per consumer fetch; ListOffsets
EARLIEST_LOCAL / LATEST_TIERED; the reader's Kafka-named settings and its bound on pending
reads; the remote time index lookup) and the remote objects' formats."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

import pytest

from odradek.broker.handlers.offsets import EARLIEST_LOCAL, LATEST_TIERED, MAX_TIMESTAMP, _by_timestamp, _tiered
from odradek.broker.replication.read import FetchParams
from odradek.broker.replication.remote_fetch import tiered_read
from odradek.broker.storage.epoch import EpochEntry
from odradek.broker.storage.remote_follower import parse_epoch_checkpoint
from odradek.broker.storage.remote_read import (ReaderQueueFull, RemoteLogReader, RemoteReaderConfig, index_position,
                                                 parse_txn_index)
from odradek.broker.storage.remote_timestamp import first_candidate, time_index_offset
from odradek.broker.storage.remote_log_plan import expired, in_lineage, next_copy, segment_data, segment_metadata
from odradek.broker.storage.remote_metadata import RemoteLogSegmentId, RemoteLogSegmentMetadata
from odradek.config import validate_topic_configs
from odradek.config.topic import check_remote_storage
from odradek.errors import ErrorCode, KafkaError
from tests.storage.storage_helpers import batch, open_log

TIERED = dict(remote_storage_enable="true", segment_bytes=300, local_retention_bytes=600, retention_bytes=-1)


def _meta(start: int, end: int, epochs: dict[int, int], size: int = 100, ts: int = 0) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(RemoteLogSegmentId.generate("id", "t", 0), start, end, ts, 1, 0, size, epochs)


def _filled(tmp_path, batches: int = 20, **settings):
    lg = open_log(tmp_path / "t-0", **(TIERED | settings))
    for i in range(batches):
        lg.append(batch(b"value-%03d" % i, ts=1_000 + i), leader_epoch=i // 10, now_ms=1_000 + i)
    lg.high_watermark = lg.log_end_offset
    return lg


@pytest.mark.parametrize("configs, message", [
    ({"remote.storage.enable": "true", "cleanup.policy": "compact"},
     "Remote log storage is unsupported for the compacted topics"),
    ({"remote.storage.enable": "true", "retention.bytes": "100", "local.retention.bytes": "200"},
     "Invalid value 200 for configuration local.retention.bytes: Value must not be more than retention.bytes "
     "property value: 100"),
    ({"remote.storage.enable": "true", "retention.ms": "1000", "local.retention.ms": "-1"},
     "Invalid value -1 for configuration local.retention.ms: Value must not be -1 as retention.ms value is set "
     "as 1000."),
])
def test_kafka_refuses_these_remote_storage_configs(configs, message):
    with pytest.raises(KafkaError) as e:
        validate_topic_configs(configs)
    assert e.value.code == ErrorCode.invalid_config and message in str(e.value)


def test_remote_storage_configs_kafka_accepts():
    validate_topic_configs({"remote.storage.enable": "true", "retention.bytes": "100", "local.retention.bytes": "-2"})
    validate_topic_configs({"remote.storage.enable": "true", "retention.ms": "-1", "local.retention.ms": "-1"})
    validate_topic_configs({"cleanup.policy": "compact", "local.retention.bytes": "5"})      # without remote storage
    with pytest.raises(KafkaError):   # an alter's merged overrides: compaction set later on a tiered topic
        check_remote_storage({"remote.storage.enable": "true", "cleanup.policy": "compact,delete"})


def test_local_retention_deletes_only_what_the_store_holds(tmp_path):
    lg = _filled(tmp_path)
    assert len(lg.segments) > 4
    assert lg.apply_retention(now_ms=10_000) == 0, "nothing uploaded: nothing leaves the disk"
    third = lg.segments[3]
    lg.highest_remote_offset = third.base_offset - 1          # the first three segments are in the store
    assert lg.apply_retention(now_ms=10_000) == 3
    assert lg.local_log_start_offset == third.base_offset and lg.log_start_offset == 0
    with pytest.raises(KafkaError) as e:
        lg.read(0, 1 << 20)
    assert e.value.code == ErrorCode.offset_out_of_range
    assert lg.read(third.base_offset, 1 << 20).first_offset == third.base_offset
    lg.flush()
    lg.close()
    reopened = open_log(tmp_path / "t-0", log_start_offset=0, **TIERED)
    assert (reopened.log_start_offset, reopened.local_log_start_offset) == (0, third.base_offset)
    reopened.close()


def test_local_retention_ms_waits_for_the_upload_too(tmp_path):
    lg = _filled(tmp_path, local_retention_bytes=-2, local_retention_ms=10)
    assert lg.apply_retention(now_ms=100_000) == 0
    lg.highest_remote_offset = lg.segments[1].base_offset - 1
    assert lg.apply_retention(now_ms=100_000) == 1


def test_next_copy_is_the_oldest_rolled_segment_below_the_lso(tmp_path):
    lg = _filled(tmp_path)
    first, second = lg.segments[0], lg.segments[1]
    assert next_copy(lg, []) == (first, second.base_offset - 1)
    copied = segment_metadata(lg, first, second.base_offset - 1, "id", 1, 0)
    assert next_copy(lg, [copied])[0] is second
    lg.high_watermark = second.base_offset        # the second segment is not all replicated
    assert next_copy(lg, [copied]) is None
    lg.high_watermark = lg.log_end_offset
    last_rolled = lg.segments[-2]
    end = lg.active_segment.base_offset - 1
    assert next_copy(lg, [_meta(0, end, {0: 0})]) is None, "the active segment is never copied"
    data = segment_data(lg, last_rolled, end)
    assert data.log_segment.exists() and data.leader_epoch_index.startswith(b"0\n")
    assert segment_metadata(lg, last_rolled, end, "id", 1, 0).segment_leader_epochs == {1: max(10, last_rolled.base_offset)}
    lg.close()


def test_lineage_keeps_the_leaders_history_only():
    epochs = [EpochEntry(0, 0), EpochEntry(2, 100), EpochEntry(5, 250)]
    assert in_lineage(_meta(0, 99, {0: 0}), epochs, 400)
    assert in_lineage(_meta(50, 200, {0: 50, 2: 100}), epochs, 400)
    assert in_lineage(_meta(260, 300, {5: 260}), epochs, 400)
    assert not in_lineage(_meta(90, 140, {0: 90, 1: 120}), epochs, 400), "epoch 1 never happened here"
    assert not in_lineage(_meta(100, 260, {2: 100}), epochs, 400), "epoch 2 ended at 249 here"
    assert not in_lineage(_meta(260, 450, {5: 260}), epochs, 400), "beyond this replica's log end"
    assert in_lineage(_meta(0, 20, {0: 0}), [EpochEntry(3, 500)], 600), "history below the cache's first epoch"


def test_remote_retention_oldest_first(tmp_path):
    lg = _filled(tmp_path, retention_bytes=900, local_retention_bytes=300)
    lg.highest_remote_offset = lg.segments[-2].base_offset - 1
    lg.apply_retention(now_ms=10_000)
    local_start = lg.local_log_start_offset
    remote = [_meta(0, 4, {0: 0}, size=500), _meta(5, local_start - 1, {0: 5}, size=500)]
    gone = expired(lg, remote, now_ms=10_000)
    assert gone == [remote[0]], "over retention.bytes (435 local + 1000 remote > 900): the oldest goes"
    assert expired(lg, remote, now_ms=10_000 + 604_800_000) == remote, "past retention.ms: all"
    lg.increment_log_start_offset(5)
    assert remote[0] in expired(lg, remote, now_ms=10_000), "below the log start offset"
    lg.close()


def test_the_broker_settings_dev_up_tiered_passes(tmp_path):
    from odradek.broker.config import BrokerConfig
    from odradek.broker.storage.remote_log_manager import for_broker
    from odradek.config import bound_values, parse_broker_settings
    from odradek.dev import tiered
    (tmp_path / "s3proxy").mkdir()
    state = {"data_dir": str(tmp_path), "object_store": {"endpoint": "http://127.0.0.1:1", "bucket": "b",
                                                         "access_key": "odradek", "secret_key": "s3cr3t"}}
    settings = dict(kv.split("=", 1) for kv in tiered.broker_config(state))
    values = bound_values(BrokerConfig, parse_broker_settings(settings).broker)
    config = BrokerConfig(1, tmp_path / "data", "127.0.0.1:2181", **values)
    assert "s3cr3t" not in str(config.broker_settings), "no secret in what DescribeConfigs shows"
    assert (tmp_path / "s3proxy" / "credentials").stat().st_mode & 0o077 == 0
    rlm = for_broker(config, replicas=None)
    assert rlm is not None and rlm.interval_s == 1.0
    assert (rlm.rsm.config.endpoint_url, rlm.rsm.config.bucket, rlm.rsm.config.secret_key) == \
        ("http://127.0.0.1:1", "b", "s3cr3t")
    assert for_broker(BrokerConfig(1, tmp_path, "z:1"), replicas=None) is None
    assert rlm.reader.config == RemoteReaderConfig() and rlm.rsm.config.chunk_bytes == 1 << 20, "Kafka's defaults"
    settings |= {"remote.log.reader.threads": "3", "remote.log.reader.max.pending.tasks": "7",
                 "remote.fetch.max.wait.ms": "900", "remote.log.index.file.cache.total.size.bytes": "4096",
                 "rsm.config.chunk.size": "65536", "rsm.config.fetch.chunk.cache.size": "131072"}
    tuned = BrokerConfig(1, tmp_path / "data", "127.0.0.1:2181",
                         **bound_values(BrokerConfig, parse_broker_settings(settings).broker))
    rlm = for_broker(tuned, replicas=None)
    assert rlm.reader.config == RemoteReaderConfig(3, 7, 900, 4096, 131072) and rlm.rsm.config.chunk_bytes == 65536
    assert rlm.reader.executor._max_workers == 3


def test_reads_beyond_the_pending_bound_are_refused():
    from odradek.broker.storage.remote_storage import RemoteStorageConfig, RemoteStorageManager
    reader = RemoteLogReader(RemoteStorageManager(RemoteStorageConfig(None, "b", None, None), client=object()),
                             RemoteReaderConfig(threads=1, max_pending_tasks=2))
    gate = threading.Event()

    async def go():
        jobs = [reader.submit(gate.wait, 10), reader.submit(gate.wait, 10)]
        with pytest.raises(ReaderQueueFull):
            reader.submit(gate.wait, 10)
        gate.set()
        await asyncio.gather(*jobs)
        assert reader.pending == 0
        await reader.submit(int)            # room again
    asyncio.run(go())
    reader.close()


def test_a_fetch_below_the_local_log_start(tmp_path):
    lg = _filled(tmp_path)
    lg.highest_remote_offset = 9
    lg.apply_retention(now_ms=2_000)
    local = lg.local_log_start_offset
    assert 0 < local <= 10 and lg.log_start_offset == 0
    rm = SimpleNamespace(remote_reader=object())
    position = SimpleNamespace(partition=0, fetch_offset=local - 1)
    follower = tiered_read(rm, FetchParams(2, 500, 1, 1 << 20), lg, "t", position, 100, True, 20, True)
    assert follower.error == ErrorCode.offset_moved_to_tiered_storage and follower.log_start_offset == 0
    consumer = FetchParams(-1, 500, 1, 1 << 20)
    first = tiered_read(rm, consumer, lg, "t", position, 100, True, 20, True)
    assert first.error == ErrorCode.none and first.remote.offset == local - 1 and first.remote.max_bytes == 100
    later = tiered_read(rm, consumer, lg, "t", position, 100, True, 20, False)
    assert later.remote is None and later.records is None and later.unsent, "one store read per fetch"
    assert tiered_read(SimpleNamespace(remote_reader=None), consumer, lg, "t", position, 100, True, 20, True) is None
    assert _tiered(lg, EARLIEST_LOCAL) == (-1, local, 0)
    assert _tiered(lg, LATEST_TIERED) == (-1, 9, 0)
    lg.highest_remote_offset = -1
    assert _tiered(lg, LATEST_TIERED) == (-1, -1, -1)
    lg.close()


def test_index_and_txn_index_parsing():
    index = b"".join((rel).to_bytes(4, "big") + (pos).to_bytes(4, "big") for rel, pos in [(0, 0), (5, 100), (9, 250)])
    index += b"\0" * 16   # the unused tail
    assert [index_position(index, 100, o) for o in (100, 104, 105, 108, 109, 500)] == [0, 0, 100, 100, 250, 250]
    entry = (0).to_bytes(2, "big") + b"".join(v.to_bytes(8, "big") for v in (7, 10, 20, 21))
    assert parse_txn_index(entry * 2) == [(7, 10, 20), (7, 10, 20)]
    assert parse_epoch_checkpoint(b"0\n2\n0 0\n3 60\n") == [(0, 0), (3, 60)]


def test_time_index_lookup_and_the_first_remote_segment_by_timestamp():
    import struct
    index = b"".join(struct.pack(">qi", ts, rel) for ts, rel in ((100, 3), (200, 9), (300, 15))) + bytes(24)
    assert time_index_offset(index, 1000, 99) == 1000
    assert time_index_offset(index, 1000, 100) == 1003
    assert time_index_offset(index, 1000, 250) == 1009
    assert time_index_offset(index, 1000, 10**12) == 1015, "the zeroed tail is not an entry"
    segments = [_meta(20, 29, {0: 20}, ts=500), _meta(0, 9, {0: 0}, ts=100), _meta(10, 19, {0: 0}, ts=300)]
    assert first_candidate(segments, 250, 0).start_offset == 10
    assert first_candidate(segments, 50, 0).start_offset == 0
    assert first_candidate(segments, 50, 12).start_offset == 10, "none ending below the starting offset"
    assert first_candidate(segments, 501, 0) is None


def test_a_timestamp_on_the_disk_answers_its_batchs_epoch_below_the_last_fetchable_offset(tmp_path):
    lg = _filled(tmp_path, remote_storage_enable="false")
    lg.high_watermark = 15
    ctx = SimpleNamespace(replicas=SimpleNamespace(remote_reader=None, topic=lambda _t: None))

    def find(ts: int, replica: bool = False):
        return asyncio.run(_by_timestamp(ctx, "t", lg, ts, replica, committed=False))
    assert find(1_003) == (1_003, 3, 0)
    assert find(1_012) == (1_012, 12, 1), "the epoch of the record's batch"
    assert find(0) == (1_000, 0, 0)
    assert find(1_016) == (-1, -1, -1), "at or past the high watermark: no answer, as Kafka's"
    assert find(1_016, replica=True) == (1_016, 16, 1), "a replica's bound is the log end"
    assert find(MAX_TIMESTAMP) == (-1, -1, -1) and find(MAX_TIMESTAMP, replica=True) == (1_019, 19, 1)
    lg.close()


def test_a_chunk_being_read_ahead_is_asked_of_the_store_once():
    calls = []

    class SlowStore:
        config = SimpleNamespace(chunk_bytes=100)

        def fetch_log_segment(self, segment, first, last):
            calls.append(first)
            time.sleep(0.2)
            return bytes(range(first % 256, first % 256 + 1)) * (last - first + 1)

    for threads in (1, 2):
        calls.clear()
        reader = RemoteLogReader(SlowStore(), RemoteReaderConfig(threads=threads))
        segment = _meta(0, 9, {0: 0}, size=300)
        reader._ahead_of(segment, 100)
        time.sleep(0.05 * threads)        # the read-ahead running (waited for) or still queued (cancelled)
        assert reader.log_bytes(segment, 100, 110) == bytes([100]) * 10
        assert calls == [100] and reader.reading_ahead == 0
        reader.close()
