"""A rolled segment set written by the broker's own log code, as the remote log manager will
hand it to the remote storage manager (Kafka's LogSegmentData)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from odradek.broker.storage import Log, LogSegment
from odradek.broker.storage.checkpoint import LEADER_EPOCH_CHECKPOINT
from odradek.broker.storage.producer_state import snapshot_path
from odradek.broker.storage.remote_metadata import LogSegmentData, RemoteLogSegmentId, RemoteLogSegmentMetadata
from odradek.broker.storage.segment import segment_path
from odradek.records import ControlType, Record, build_batch
from tests.storage.storage_helpers import open_log

TOPIC_ID = "k3ZbmKiXSrmRg7QbZt3b8w"


@dataclass
class RolledSegment:
    log: Log
    segment: LogSegment
    data: LogSegmentData

    def metadata(self, topic: str = "t") -> RemoteLogSegmentMetadata:
        s = self.segment
        return RemoteLogSegmentMetadata(
            RemoteLogSegmentId.generate(TOPIC_ID, topic, self.log.partition), s.base_offset, s.next_offset - 1,
            s.largest_timestamp, broker_id=1, event_timestamp_ms=0, segment_size_in_bytes=s.size,
            segment_leader_epochs={e.epoch: e.start_offset for e in self.log.leader_epochs.entries})


def write_rolled_segment(directory: Path, batches: int = 60, values_per_batch: int = 20) -> RolledSegment:
    """A log with an aborted transaction (so a ``.txnindex``), several leader epochs, rolled once:
    its first segment is complete, with every file a copy uploads."""
    log = open_log(directory, segment_bytes=1 << 20, index_interval_bytes=512)
    for i in range(batches):
        values = [f"v{i}-{j}-".encode() * 8 for j in range(values_per_batch)]
        log.append(build_batch([Record(v, key=b"k%d" % j) for j, v in enumerate(values)], now_ms=1_000 + i),
                   leader_epoch=i // 20, now_ms=1_000 + i)
    pid = 4242
    log.append(build_batch([Record(b"in-txn")], producer_id=pid, producer_epoch=0, base_sequence=0,
                           transactional=True, now_ms=2_000), leader_epoch=3, now_ms=2_000)
    log.append_marker(ControlType.ABORT, pid, 0, 0, leader_epoch=3, now_ms=2_001)
    segment = log.segments[0]
    log.roll()
    d = log.dir
    data = LogSegmentData(
        log_segment=segment_path(d, segment.base_offset, ".log"),
        offset_index=segment_path(d, segment.base_offset, ".index"),
        time_index=segment_path(d, segment.base_offset, ".timeindex"),
        transaction_index=segment_path(d, segment.base_offset, ".txnindex"),
        producer_snapshot_index=snapshot_path(d, segment.next_offset),
        leader_epoch_index=(d / LEADER_EPOCH_CHECKPOINT).read_bytes())
    log.flush()
    return RolledSegment(log, segment, data)
