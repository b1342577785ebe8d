"""Tiered storage's metrics without processes (``metrics.remote``, ``metrics.idle``): the remote log
manager counts each copy and deletion (bytes, requests, errors) in BrokerTopicMetrics as Kafka's
RemoteStorageMetrics do; the gauges (copy and delete lag, remote size, metadata count, the
per-partition remote size and local start) follow the log and the store; a consumer's remote
read counts its request, bytes or failure when it ends; the pools' idle fraction and queue; and
the gateway reads the per-partition remote series for the console."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from odradek import metrics_http
from odradek.broker.metrics import stats as st
from odradek.broker.metrics.idle import BusyTime, MeteredExecutor
from odradek.broker.metrics.remote import RemoteCollector, count_remote_read
from odradek.broker.storage.remote_log_manager import RemoteLogManager, hosted_partitions
from odradek.broker.storage.remote_metadata import RemoteStorageUnavailable
from odradek.errors import ErrorCode, KafkaError
from odradek.gateway.broker_metrics import parse
from tests.storage.storage_helpers import batch, open_log

TOPIC_ID = "metrics-topic-id"
TIERED = dict(remote_storage_enable="true", segment_bytes=300, local_retention_bytes=600)
NOW = time.time_ns() // 1_000_000
P = "kafka_server_brokertopicmetrics_"


class MemoryStore:
    """The remote storage manager's interface over a dict; ``down`` makes every call fail."""

    def __init__(self) -> None:
        self.config = SimpleNamespace(chunk_bytes=4096)
        self.segments: dict = {}
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise RemoteStorageUnavailable("the store is down")

    def list_log_segments(self, topic_id, topic, partition):
        self._check()
        return sorted(self.segments.values(), key=lambda m: m.start_offset)

    def copy_log_segment_data(self, metadata, data) -> None:
        self._check()
        self.segments[metadata.segment_id] = metadata

    def delete_log_segment_data(self, metadata) -> None:
        self._check()
        self.segments.pop(metadata.segment_id, None)


def _append(lg, start: int, count: int) -> None:
    for i in range(start, start + count):
        lg.append(batch(b"value-%04d" % i, ts=NOW + i), leader_epoch=0)
    lg.high_watermark = lg.log_end_offset


def _failing(*_args):
    raise RemoteStorageUnavailable("503 from the store")


def _setup(tmp_path, **config):
    lg = open_log(tmp_path / "t-0", **(TIERED | config))
    store = MemoryStore()
    part = SimpleNamespace(topic="t", state=object(), log=lg, leading=True)
    replicas = SimpleNamespace(partitions=lambda: [part], topic=lambda name: SimpleNamespace(topic_id=TOPIC_ID))
    stats = st.TopicStats()
    rlm = RemoteLogManager(1, store, lambda: hosted_partitions(replicas), interval_ms=1000, stats=stats)
    return lg, store, rlm, RemoteCollector(replicas, rlm, stats)


def _samples(collector) -> dict[tuple[str, tuple], float]:
    text = generate_latest(metrics_http.registry(collector)).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _topic(samples, name: str, topic: str | None = "t") -> float:
    return samples[(P + name, (("topic", topic),) if topic else ())]


def test_copies_are_counted_and_the_gauges_follow_the_store(tmp_path):
    lg, store, rlm, collector = _setup(tmp_path)
    _append(lg, 0, 40)
    rolled = lg.segments[:-1]
    asyncio.run(rlm.run_once())
    s = _samples(collector)
    copied = sum(m.segment_size_in_bytes for m in store.segments.values())
    assert copied == sum(seg.size for seg in rolled) > 0
    assert _topic(s, "remotecopybytes_total") == _topic(s, "remotecopybytes_total", None) == copied
    assert _topic(s, "remotecopyrequests_total") == len(rolled) == len(store.segments)
    assert _topic(s, "remotecopyerrors_total") == 0
    assert _topic(s, "remotelogsizebytes") == copied and _topic(s, "remotelogmetadatacount") == len(rolled)
    assert _topic(s, "remotecopylagbytes") == _topic(s, "remotecopylagsegments") == 0
    key = (("partition", "0"), ("topic", "t"))
    assert s[("odradek_log_remote_size_bytes", key)] == copied
    assert s[("odradek_log_remote_segments", key)] == len(rolled)
    lg.apply_retention(now_ms=NOW + 1_000)
    assert s[("odradek_log_local_log_start_offset", key)] == 0
    assert _samples(collector)[("odradek_log_local_log_start_offset", key)] == lg.local_log_start_offset > 0

    store.down = True   # new rolled segments wait: the lag is theirs, each failed copy an error
    _append(lg, 40, 40)
    waiting = [seg for seg in lg.segments[:-1] if seg.base_offset > lg.highest_remote_offset]
    asyncio.run(rlm.run_once())
    s = _samples(collector)
    assert _topic(s, "remotecopyerrors_total") == 0, "the listing failed: no copy was tried"
    assert _topic(s, "remotecopylagsegments") == len(waiting) > 0
    assert _topic(s, "remotecopylagbytes") == sum(seg.size for seg in waiting)
    store.down = False
    asyncio.run(rlm.run_once())
    s = _samples(collector)
    assert _topic(s, "remotecopylagsegments") == 0
    assert _topic(s, "remotecopybytes_total") == sum(m.segment_size_in_bytes for m in store.segments.values())
    lg.close()


def test_a_failed_copy_and_remote_retention_are_counted(tmp_path):
    lg, store, rlm, collector = _setup(tmp_path, retention_bytes=1200)
    _append(lg, 0, 40)

    store.copy_log_segment_data, working = _failing, store.copy_log_segment_data
    asyncio.run(rlm.run_once())
    s = _samples(collector)
    assert (_topic(s, "remotecopyrequests_total"), _topic(s, "remotecopyerrors_total")) == (1, 1)
    assert _topic(s, "remotecopybytes_total") == 0

    store.copy_log_segment_data = working
    store.delete_log_segment_data, deleting = _failing, store.delete_log_segment_data
    asyncio.run(rlm.run_once())
    lg.apply_retention(now_ms=NOW + 1_000)
    before = len(store.segments)
    asyncio.run(rlm.run_once())   # remote retention (the local log plus the remote-only bytes over 1200) fails
    s = _samples(collector)
    assert (_topic(s, "remotedeleterequests_total"), _topic(s, "remotedeleteerrors_total")) == (1, 1)
    lagging = _topic(s, "remotedeletelagsegments")
    assert lagging > 0 and _topic(s, "remotedeletelagbytes") > 0 and len(store.segments) == before

    store.delete_log_segment_data = deleting
    asyncio.run(rlm.run_once())
    deleted = before - len(store.segments)
    s = _samples(collector)
    assert deleted == lagging == rlm.deleted and _topic(s, "remotedeleterequests_total") == 1 + deleted
    assert _topic(s, "remotedeleteerrors_total") == 1
    assert _topic(s, "remotelogmetadatacount") == len(store.segments)
    assert _topic(s, "remotedeletelagsegments") == _topic(s, "remotedeletelagbytes") == 0
    lg.close()


def test_a_follower_reports_no_remote_gauges(tmp_path):
    lg, store, rlm, collector = _setup(tmp_path)
    _append(lg, 0, 40)
    asyncio.run(rlm.run_once())
    collector.replicas.partitions()[0].leading = False
    s = _samples(collector)
    assert (P + "remotelogsizebytes", (("topic", "t"),)) not in s and _topic(s, "remotelogsizebytes", None) == 0
    assert not [k for k in s if k[0] == "odradek_log_remote_size_bytes"]
    lg.close()


def test_a_remote_read_counts_its_request_then_its_bytes_or_failure():
    async def run():
        loop = asyncio.get_running_loop()
        stats = st.TopicStats()
        for outcome in (SimpleNamespace(size=700), RuntimeError("corrupt chunk"),
                        KafkaError(ErrorCode.offset_out_of_range, "past the store")):
            job = loop.create_future()
            count_remote_read(stats, "t", job)
            job.set_exception(outcome) if isinstance(outcome, Exception) else job.set_result(outcome)
            await asyncio.sleep(0)   # the done callbacks run on the loop
        return stats.topics["t"]
    row = asyncio.run(run())
    assert (row[st.REMOTE_FETCH_REQUESTS], row[st.REMOTE_FETCH_BYTES], row[st.REMOTE_FETCH_ERRORS]) == (3, 700, 1)


def test_busy_time_gives_the_idle_fraction_over_the_last_windows():
    now = [0.0]
    busy = BusyTime(2, window_s=10, clock=lambda: now[0])
    a = busy.begin()
    now[0] = 5.0
    assert busy.idle() == pytest.approx(1 - 5 / (2 * 5))    # one of two workers busy all along
    busy.end(a)
    now[0] = 15.0
    assert busy.idle() == pytest.approx(1 - 5 / (2 * 15))
    now[0] = 25.0    # the window of the work is now the previous one
    assert busy.idle() == pytest.approx(1 - 0 / (2 * 15))
    b = busy.begin()
    now[0] = 45.0    # work in progress counts up to now, over the last one to two windows
    assert busy.idle() == pytest.approx(1 - 15 / (2 * 15))
    busy.end(b)


def test_the_metered_executor_counts_waiting_tasks():
    executor = MeteredExecutor(1)
    release = threading.Event()
    started = threading.Event()

    def first():
        started.set()
        release.wait(10)
    running = executor.submit(first)
    assert started.wait(10)
    waiting = [executor.submit(lambda: None) for _ in range(3)]
    assert executor.queued == 3
    assert waiting[2].cancel() and executor.queued == 2, "a cancelled task leaves the queue"
    release.set()
    for f in (running, waiting[0], waiting[1]):
        f.result(10)
    assert executor.queued == 0 and executor.busy.idle() < 1.0
    executor.shutdown()


def test_the_gateway_reads_each_partitions_remote_series():
    text = "\n".join([
        'kafka_log_log_size{topic="t",partition="0"} 4096.0',
        'odradek_log_remote_size_bytes{topic="t",partition="0"} 90000.0',
        'odradek_log_remote_segments{topic="t",partition="0"} 6.0',
        'odradek_log_local_log_start_offset{topic="t",partition="0"} 1200.0', ""])
    scrape = parse(1, text, 0)
    assert scrape.log_sizes == {("t", 0): 4096}
    assert scrape.remote == {("t", 0): {"remote_size_bytes": 90000, "remote_segments": 6,
                                        "local_log_start_offset": 1200}}
