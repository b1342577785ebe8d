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

A store that fails or does not answer stops that partition's pass; the next one retries. Nothing
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


def for_broker(config, replicas) -> "RemoteLogManager | None":
    """The broker's remote log manager if ``remote.log.storage.system.enable`` (else None)."""
    if not config.remote_log_storage_system_enable:
        return None
    return RemoteLogManager(config.broker_id, RemoteStorageManager(storage_config(config)),
                            lambda: hosted_partitions(replicas), config.remote_log_manager_task_interval_ms,
                            RemoteReaderConfig.of(config))


class RemoteLogManager:
    def __init__(self, broker_id: int, rsm: RemoteStorageManager,
                 partitions: Callable[[], Iterable[HostedPartition]], interval_ms: int,
                 reader_config: RemoteReaderConfig = RemoteReaderConfig()) -> None:
        self.broker_id = broker_id
        self.rsm = rsm
        self.reader = RemoteLogReader(rsm, reader_config)   # Fetch below the local log start (replication.remote_fetch)
        self.partitions = partitions
        self.interval_s = interval_ms / 1000
        self.copied = 0            # segments copied by this broker (tests, status)
        self.deleted = 0           # remote segments deleted by retention
        self.failures = 0          # passes cut short by the store
        self._failing: set[str] = set()   # partitions whose last pass failed: logged once

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.run_once(stop)
            try:
                await asyncio.wait_for(stop.wait(), self.interval_s)
            except asyncio.TimeoutError:
                pass

    async def run_once(self, stop: asyncio.Event | None = None) -> None:
        """One pass over every hosted partition of a topic with remote.storage.enable."""
        for hosted in list(self.partitions()):
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
        remote = lineage(listed, lg)
        _note_highest(lg, remote)
        if not hosted.leading:
            return
        while (found := next_copy(lg, remote)) is not None:
            segment, end = found
            metadata = segment_metadata(lg, segment, end, hosted.topic_id, self.broker_id, _now_ms())
            await asyncio.to_thread(self.rsm.copy_log_segment_data, metadata, segment_data(lg, segment, end))
            self.copied += 1
            log.info("%s: copied segment %d-%d to remote storage", lg.name, metadata.start_offset, end,
                     extra=logs.tp(lg.topic, lg.partition))
            if lg.closed:
                return
            remote = [*remote, metadata]
            _note_highest(lg, remote)
        await self._expire(lg, remote)

    async def _expire(self, lg: Log, remote: list[RemoteLogSegmentMetadata]) -> None:
        for metadata in expired(lg, remote, _now_ms()):
            await asyncio.to_thread(self.rsm.delete_log_segment_data, metadata)
            self.deleted += 1
            if lg.closed:
                return
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
