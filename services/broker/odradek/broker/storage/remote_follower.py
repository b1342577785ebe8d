"""A follower behind the leader's local log start rebuilds its state from the object store
(Kafka's ReplicaFetcherTierStateMachine.buildRemoteLogAuxState, KIP-405).

The leader answered OFFSET_MOVED_TO_TIERED_STORAGE: what the follower needs next is only in the
store. The fetcher asks the leader its local log start offset (ListOffsets EARLIEST_LOCAL) and
calls ``rebuild``, which:

1. finds the remote segment ending just below it (the store's manifests; of several copies, the
   one of the latest leader epoch, then the latest copied);
2. reads that segment's leader-epoch checkpoint and producer snapshot (verified, as every read);
3. empties the follower's log and starts it at the leader's local log start, its log start
   offset the leader's (the offsets between are in the store), the leader-epoch cache from the
   checkpoint and the producer state from the snapshot (written where the log now starts, so a
   restart loads it).

The fetcher then fetches from the leader's local log start as usual. The store failing leaves the
log untouched: the fetcher backs off and asks again.

Event-loop thread; the store is read in the reader's worker threads.
"""

from __future__ import annotations

import asyncio
import logging

from .log import Log
from .producer_state import snapshot_path
from .remote_metadata import IndexType, RemoteLogSegmentMetadata, RemoteResourceNotFoundException
from .remote_read import RemoteLogReader

__all__ = ["parse_epoch_checkpoint", "rebuild", "segment_before"]

log = logging.getLogger(__name__)


def parse_epoch_checkpoint(data: bytes) -> list[tuple[int, int]]:
    """(epoch, start offset) entries of a leader-epoch checkpoint (version, count, then lines)."""
    lines = data.decode().splitlines()
    return [(int(e), int(o)) for e, o in (line.split() for line in lines[2:2 + int(lines[1])])] if lines else []


def segment_before(listed: list[RemoteLogSegmentMetadata], offset: int) -> RemoteLogSegmentMetadata:
    """The remote segment holding ``offset - 1``: of several copies, the latest leader's."""
    holding = [m for m in listed if m.start_offset < offset <= m.end_offset + 1]
    if not holding:
        raise RemoteResourceNotFoundException(f"no remote segment holds offset {offset - 1}")
    return max(holding, key=lambda m: (max(m.segment_leader_epochs, default=-1), m.event_timestamp_ms))


async def rebuild(reader: RemoteLogReader, topic_id: str, lg: Log, local_start: int, leader_log_start: int) -> None:
    """Start ``lg`` at the leader's local log start ``local_start`` with the state the store keeps."""
    loop = asyncio.get_running_loop()
    rsm = reader.rsm
    listed = await loop.run_in_executor(reader.executor, rsm.list_log_segments, topic_id, lg.topic, lg.partition)
    segment = segment_before(listed, local_start)
    epochs = await loop.run_in_executor(reader.executor, rsm.fetch_index, segment, IndexType.LEADER_EPOCH)
    snapshot = await loop.run_in_executor(reader.executor, rsm.fetch_index, segment, IndexType.PRODUCER_SNAPSHOT)
    if lg.closed:
        return
    lg.truncate_fully_and_start_at(local_start)
    lg.log_start_offset = min(max(leader_log_start, 0), local_start)
    for epoch, start in parse_epoch_checkpoint(epochs):
        lg.leader_epochs.assign(epoch, start)
    if snapshot:
        path = snapshot_path(lg.dir, local_start)
        path.write_bytes(snapshot)
        if not lg.producer_state.load_snapshot(path):
            path.unlink(missing_ok=True)
    lg.highest_remote_offset = max(lg.highest_remote_offset, segment.end_offset)
    log.info("%s: rebuilt from remote segment %d-%d: log start %d, local log start %d, leader epochs %s",
             lg.name, segment.start_offset, segment.end_offset, lg.log_start_offset, local_start,
             [e.epoch for e in lg.leader_epochs.entries])
