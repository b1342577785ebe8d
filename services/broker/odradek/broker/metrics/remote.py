"""The broker's tiered storage series (KIP-405), registered only with
``remote.log.storage.system.enable`` as Kafka registers its RemoteStorageMetrics; names follow
docs/observability.md's mapping of Kafka's MBeans (the list is there).

- Meters (``..._total`` counters), counted where the work happens in ``stats.TopicStats``:
  RemoteCopyBytes/Requests/Errors and RemoteDeleteRequests/Errors by the remote log manager,
  RemoteFetchBytes/Requests/Errors when a consumer's read from the store ends
  (``count_remote_read``), BuildRemoteLogAuxStateRequests/Errors by a follower rebuilding from
  the store (``replication.tier_state``). Per topic and all topics, as Kafka's BrokerTopicMetrics.
- Gauges computed at scrape time from what the remote log manager's last pass saw in the store
  and the local log as it is now, for the partitions this broker leads (the copier's and the
  remote retention's side, as Kafka reports them): RemoteCopyLagBytes/Segments (rolled segments
  below the last stable offset not in the store yet), RemoteDeleteLagBytes/Segments (remote
  segments past retention not deleted yet), RemoteLogSizeBytes, RemoteLogMetadataCount; per
  partition, Odradek's own ``odradek_log_remote_*`` and ``odradek_log_local_log_start_offset``
  (the console's local and remote sizes; left out with ``metrics.partition.level.enabled=false``).
- Worker pools: RemoteLogManagerTasksAvgIdlePercent (the copier task), RemoteLogReaderTaskQueueSize
  and RemoteLogReaderAvgIdlePercent (the reader's threads), from ``idle``.

Event-loop thread (a scrape, a read's completion).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Iterator

from prometheus_client.core import Metric

from odradek.broker.metrics import stats as st
from odradek.broker.metrics.collector import per_topic
from odradek.broker.metrics.idle import MeteredExecutor
from odradek.broker.storage.remote_log_manager import RemoteLogManager, hosted_partitions
from odradek.broker.storage.remote_log_plan import copy_candidates, expired
from odradek.errors import ErrorCode, KafkaError
from odradek.metrics_http import gauge

__all__ = ["RemoteCollector", "count_remote_read"]

TOPIC_PREFIX = "kafka_server_brokertopicmetrics_"
METERS = (("remotecopybytes", st.REMOTE_COPY_BYTES, "bytes of segments copied to remote storage"),
          ("remotecopyrequests", st.REMOTE_COPY_REQUESTS, "segment copies to remote storage started"),
          ("remotecopyerrors", st.REMOTE_COPY_ERRORS, "segment copies to remote storage that failed"),
          ("remotefetchbytes", st.REMOTE_FETCH_BYTES, "record bytes read from remote storage for consumers"),
          ("remotefetchrequests", st.REMOTE_FETCH_REQUESTS, "consumer reads from remote storage"),
          ("remotefetcherrors", st.REMOTE_FETCH_ERRORS, "consumer reads from remote storage that failed"),
          ("remotedeleterequests", st.REMOTE_DELETE_REQUESTS, "remote segment deletions started (remote retention)"),
          ("remotedeleteerrors", st.REMOTE_DELETE_ERRORS, "remote segment deletions that failed"),
          ("buildremotelogauxstaterequests", st.BUILD_AUX_REQUESTS,
           "follower rebuilds from remote storage (behind the leader's local log start) started"),
          ("buildremotelogauxstateerrors", st.BUILD_AUX_ERRORS, "follower rebuilds from remote storage that failed"))
LAGS = (("remotecopylagbytes", "bytes of rolled segments eligible for tiering not yet in remote storage"),
        ("remotecopylagsegments", "rolled segments eligible for tiering not yet in remote storage"),
        ("remotedeletelagbytes", "bytes of remote segments past retention not yet deleted"),
        ("remotedeletelagsegments", "remote segments past retention not yet deleted"),
        ("remotelogsizebytes", "bytes of the topic's segments in remote storage"),
        ("remotelogmetadatacount", "remote segments (metadata entries) of the topic"))


def count_remote_read(stats: st.TopicStats, topic: str, job: asyncio.Future) -> None:
    """Count a consumer's read from the store as Kafka's RemoteLogReader does: the request now, its
    bytes or its failure when it ends (also a read the fetch stopped waiting for). A read past the
    store's segments (OFFSET_OUT_OF_RANGE) is an answer, not a failure."""
    stats.count(topic, st.REMOTE_FETCH_REQUESTS)

    def ended(f: asyncio.Future) -> None:
        if f.cancelled():
            return
        e = f.exception()
        if e is None:
            stats.count(topic, st.REMOTE_FETCH_BYTES, f.result().size)
        elif not (isinstance(e, KafkaError) and e.code == ErrorCode.offset_out_of_range):
            stats.count(topic, st.REMOTE_FETCH_ERRORS)
    job.add_done_callback(ended)


@dataclass(eq=False)
class RemoteCollector:
    replicas: object            # ReplicaManager
    manager: RemoteLogManager
    topic_stats: st.TopicStats
    partition_level: bool = True

    def collect(self) -> Iterator[Metric]:
        yield from self._meters()
        yield from self._state()
        yield from self._pools()

    # -- kafka.server:type=BrokerTopicMetrics, the remote meters ----------------------------------
    def _meters(self) -> Iterator[Metric]:
        for name, slot, doc in METERS:
            yield per_topic(TOPIC_PREFIX + name, doc, "counter", self.topic_stats.topics, slot)

    # -- the remote gauges: per topic (and all topics), per partition -----------------------------
    def _state(self) -> Iterator[Metric]:
        now_ms = time.time_ns() // 1_000_000
        topics: dict[str, list[int]] = {}
        partitions = []
        for hosted in hosted_partitions(self.replicas):
            lg = hosted.log
            remote = self.manager.remote_segments(lg)
            if not hosted.leading or not lg.config.remote_storage_enable or remote is None:
                continue
            copy = [s.size for s, _end in copy_candidates(lg, remote)]
            delete = [m.segment_size_in_bytes for m in expired(lg, remote, now_ms)]
            size = sum(m.segment_size_in_bytes for m in remote)
            values = (sum(copy), len(copy), sum(delete), len(delete), size, len(remote))
            row = topics.setdefault(lg.topic, [0] * len(LAGS))
            for i, v in enumerate(values):
                row[i] += v
            partitions.append(([lg.topic, str(lg.partition)], size, len(remote), lg.local_log_start_offset))
        for i, (name, doc) in enumerate(LAGS):
            yield per_topic(TOPIC_PREFIX + name, doc, "gauge", topics, i)
        if not self.partition_level:
            return
        labels = ["topic", "partition"]
        yield gauge("odradek_log_remote_size_bytes", "bytes of the partition's segments in remote storage (leader)",
                    labels=labels, samples=[(key, size) for key, size, _n, _start in partitions])
        yield gauge("odradek_log_remote_segments", "the partition's segments in remote storage (leader)",
                    labels=labels, samples=[(key, n) for key, _size, n, _start in partitions])
        yield gauge("odradek_log_local_log_start_offset", "first offset on the leader's disk (below: remote only)",
                    labels=labels, samples=[(key, start) for key, _size, _n, start in partitions])

    # -- kafka.log.remote:type=RemoteLogManager, ...:type=RemoteStorageThreadPool -------------------
    def _pools(self) -> Iterator[Metric]:
        yield gauge("kafka_log_remote_remotelogmanager_remotelogmanagertasksavgidle_percent",
                    "idle fraction (0-1) of the remote log manager's task over the last 1-2 minutes",
                    self.manager.busy.idle())
        executor = self.manager.reader.executor
        if not isinstance(executor, MeteredExecutor):   # nothing measured: no series rather than a guess
            return
        pool = "org_apache_kafka_storage_internals_log_remotestoragethreadpool_"
        yield gauge(pool + "remotelogreadertaskqueuesize", "remote reads waiting for a reader thread", executor.queued)
        yield gauge(pool + "remotelogreaderavgidle_percent",
                    "idle fraction (0-1) of the remote reader threads over the last 1-2 minutes", executor.busy.idle())
