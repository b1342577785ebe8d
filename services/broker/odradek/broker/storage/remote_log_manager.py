"""The remote log manager (Kafka's RemoteLogManager, KIP-405): on a partition's leader, copies
rolled segments to the object store and applies remote retention; on every replica, keeps the
log's ``highest_remote_offset`` (what local retention may delete up to) from what the store holds.

One task, every ``remote.log.manager.task.interval.ms``, visits each hosted partition of a topic
with ``remote.storage.enable``:

1. lists the partition's segments in the store (their manifests: the remote metadata) and keeps
   those in this replica's leader-epoch lineage (``remote_log_plan``);
2. as leader, copies the rolled segments whose offsets are all below the last stable offset,
   oldest first, from the offset after the highest one the store holds: after a restart or a
   leader change the next leader resumes where the store is, without a second copy or a gap;
3. as leader, deletes the remote segments past the topic's retention.ms / retention.bytes and
   moves the log start offset after them (followers learn it from the leader's Fetch answers).

Each copy and deletion is counted as it happens in the broker's BrokerTopicMetrics (Kafka's
RemoteCopy*/RemoteDelete* meters, ``metrics.stats``); the segments a pass last saw in the store
(``remote_segments``) and the time passes take (``busy``) are what ``metrics.remote`` computes the
gauges from. A store that fails or does not answer stops that partition's pass; the next one retries. Nothing
local depends on an upload that did not complete: ``highest_remote_offset`` only moves from what
a listing or a completed copy shows, and the log's local retention deletes nothing above it.

Event-loop thread; the remote storage manager's blocking calls run in worker threads, one at a
time, and the log is read again after each (it may have been truncated or closed meanwhile).
"""

from __future__ import annotations

import asyncio
import configparser
import logging
import time
from dataclasses import dataclass
from typing import Callable, Iterable

from odradek import logs
from odradek.broker.metrics import stats as st
from odradek.broker.metrics.idle import BusyTime

from .log import Log
from .remote_log_plan import expired, lineage, next_copy, segment_data, segment_metadata
from .remote_metadata import RemoteLogSegmentMetadata, RemoteStorageException
from .remote_read import RemoteLogReader, RemoteReaderConfig
from .remote_storage import RemoteStorageConfig, RemoteStorageManager

__all__ = ["HostedPartition", "RemoteLogManager", "for_broker", "hosted_partitions", "storage_config"]

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class HostedPartition:
    topic_id: str
    log: Log
    leading: bool


def hosted_partitions(replicas) -> list[HostedPartition]:
    """The ReplicaManager's partitions as the remote log manager needs them."""
    out = []
    for part in replicas.partitions():
        meta = replicas.topic(part.topic)
        if meta is not None and part.state is not None and not part.log.closed:
            out.append(HostedPartition(meta.topic_id, part.log, part.leading))
    return out


def storage_config(config) -> RemoteStorageConfig:
    """The object store's settings from a BrokerConfig's ``rsm.config.*`` keys; the credentials
    from the shared-credentials file they name, else boto3's default chain (None here)."""
    access = secret = None
    if config.rsm_credentials_file:
        parser = configparser.ConfigParser()
        if not parser.read(config.rsm_credentials_file):
            raise ValueError(f"cannot read the credentials file {config.rsm_credentials_file}")
        section = parser["default"]
        access, secret = section["aws_access_key_id"], section["aws_secret_access_key"]
    return RemoteStorageConfig(config.rsm_endpoint_url or None, config.rsm_bucket, access, secret,
                               region=config.rsm_region, prefix=config.rsm_key_prefix,
                               chunk_bytes=config.rsm_chunk_size)


def for_broker(config, replicas, stats: st.TopicStats | None = None) -> "RemoteLogManager | None":
    """The broker's remote log manager if ``remote.log.storage.system.enable`` (else None);
    ``stats``: the broker's BrokerTopicMetrics, where copies and deletions are counted."""
    if not config.remote_log_storage_system_enable:
        return None
    return RemoteLogManager(config.broker_id, RemoteStorageManager(storage_config(config)),
                            lambda: hosted_partitions(replicas), config.remote_log_manager_task_interval_ms,
                            RemoteReaderConfig.of(config), stats=stats)


class RemoteLogManager:
    def __init__(self, broker_id: int, rsm: RemoteStorageManager,
                 partitions: Callable[[], Iterable[HostedPartition]], interval_ms: int,
                 reader_config: RemoteReaderConfig = RemoteReaderConfig(),
                 stats: st.TopicStats | None = None) -> None:
        self.broker_id = broker_id
        self.rsm = rsm
        self.reader = RemoteLogReader(rsm, reader_config)   # Fetch below the local log start (replication.remote_fetch)
        self.partitions = partitions
        self.interval_s = interval_ms / 1000
        self.copied = 0            # segments copied by this broker (tests, status)
        self.deleted = 0           # remote segments deleted by retention
        self.failures = 0          # passes cut short by the store
        self._failing: set[str] = set()   # partitions whose last pass failed: logged once
        self.stats = stats if stats is not None else st.TopicStats()
        self.busy = BusyTime(1)            # one task: RemoteLogManagerTasksAvgIdlePercent
        # (topic, partition) -> its segments in the store, in this replica's lineage, as of the last pass
        self._remote: dict[tuple[str, int], list[RemoteLogSegmentMetadata]] = {}

    def remote_segments(self, lg: Log) -> list[RemoteLogSegmentMetadata] | None:
        """The partition's segments in the store as the last pass left them (None: no pass yet)."""
        return self._remote.get((lg.topic, lg.partition))

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.run_once(stop)
            try:
                await asyncio.wait_for(stop.wait(), self.interval_s)
            except asyncio.TimeoutError:
                pass

    async def run_once(self, stop: asyncio.Event | None = None) -> None:
        """One pass over every hosted partition of a topic with remote.storage.enable."""
        token = self.busy.begin()
        try:
            await self._run_once(stop)
        finally:
            self.busy.end(token)

    async def _run_once(self, stop: asyncio.Event | None) -> None:
        hosted_now = list(self.partitions())
        kept = {(h.log.topic, h.log.partition) for h in hosted_now}
        for key in [k for k in self._remote if k not in kept]:   # no longer hosted here
            del self._remote[key]
        for hosted in hosted_now:
            lg = hosted.log
            if stop is not None and stop.is_set():
                return
            if not lg.config.remote_storage_enable or lg.closed:
                continue
            try:
                await self._pass(hosted)
            except (RemoteStorageException, OSError) as e:
                self.failures += 1
                if lg.name not in self._failing:
                    self._failing.add(lg.name)
                    log.warning("%s: tiered storage pass failed, retried every %.1fs: %s", lg.name,
                                self.interval_s, e, extra=logs.tp(lg.topic, lg.partition))
                continue
            if lg.name in self._failing:
                self._failing.discard(lg.name)
                log.info("%s: tiered storage pass succeeded again", lg.name, extra=logs.tp(lg.topic, lg.partition))

    async def _pass(self, hosted: HostedPartition) -> None:
        lg = hosted.log
        listed = await asyncio.to_thread(self.rsm.list_log_segments, hosted.topic_id, lg.topic, lg.partition)
        if lg.closed:
            return
        self.reader.note_listing(lg, listed)
        remote = self._seen(lg, lineage(listed, lg))
        if not hosted.leading:
            return
        while (found := next_copy(lg, remote)) is not None:
            segment, end = found
            metadata = segment_metadata(lg, segment, end, hosted.topic_id, self.broker_id, _now_ms())
            await self._counted(lg.topic, st.REMOTE_COPY_REQUESTS, st.REMOTE_COPY_ERRORS, self.rsm.copy_log_segment_data,
                                metadata, segment_data(lg, segment, end))
            self.stats.count(lg.topic, st.REMOTE_COPY_BYTES, metadata.segment_size_in_bytes)
            self.copied += 1
            log.info("%s: copied segment %d-%d to remote storage", lg.name, metadata.start_offset, end,
                     extra=logs.tp(lg.topic, lg.partition))
            if lg.closed:
                return
            remote = self._seen(lg, [*remote, metadata])
        await self._expire(lg, remote)

    def _seen(self, lg: Log, remote: list[RemoteLogSegmentMetadata]) -> list[RemoteLogSegmentMetadata]:
        """``remote`` is what the store now holds of ``lg``'s history: noted for local retention
        and for the metrics."""
        _note_highest(lg, remote)
        self._remote[(lg.topic, lg.partition)] = remote
        return remote

    async def _counted(self, topic: str, requests: int, errors: int, call, *args) -> None:
        """``call(*args)`` in a worker thread, counted as Kafka's remote storage meters count: the
        request before it starts, an error if it raises."""
        self.stats.count(topic, requests)
        try:
            await asyncio.to_thread(call, *args)
        except Exception:
            self.stats.count(topic, errors)
            raise

    async def _expire(self, lg: Log, remote: list[RemoteLogSegmentMetadata]) -> None:
        for metadata in expired(lg, remote, _now_ms()):
            await self._counted(lg.topic, st.REMOTE_DELETE_REQUESTS, st.REMOTE_DELETE_ERRORS,
                                self.rsm.delete_log_segment_data, metadata)
            self.deleted += 1
            if lg.closed:
                return
            remote = [m for m in remote if m.segment_id != metadata.segment_id]
            self._remote[(lg.topic, lg.partition)] = remote   # the metrics' view; local retention's is unchanged
            start = min(metadata.end_offset + 1, lg.high_watermark)
            if start > lg.log_start_offset:
                lg.increment_log_start_offset(start)
            log.info("%s: remote segment %d-%d deleted by retention; log start offset %d", lg.name,
                     metadata.start_offset, metadata.end_offset, lg.log_start_offset,
                     extra=logs.tp(lg.topic, lg.partition))


def _note_highest(lg: Log, remote: list[RemoteLogSegmentMetadata]) -> None:
    """The end of the store's contiguous run of offsets from its oldest segment: local retention
    never counts a segment as uploaded past a hole, whatever made it."""
    reach = -1
    for m in sorted(remote, key=lambda m: m.start_offset):
        if reach >= 0 and m.start_offset > reach + 1:
            break
        reach = max(reach, m.end_offset)
    lg.highest_remote_offset = reach
