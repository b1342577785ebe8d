"""The value types of tiered storage (KIP-405), as Kafka's ``org.apache.kafka.server.log.remote.storage``
names them, and the remote storage manager's errors.

- ``RemoteLogSegmentId``: a topic id + partition (Kafka's TopicIdPartition) and a segment uuid,
  unique for each copy of a segment (a copy retried after a failure gets a new one, so that a
  half-written attempt never mixes with the next);
- ``RemoteLogSegmentMetadata``: which offsets, leader epochs and bytes a remote segment covers;
- ``LogSegmentData``: the local files of one rolled segment that a copy uploads;
- ``IndexType``: the auxiliary objects ``fetch_index`` returns.

Errors follow Kafka's: ``RemoteStorageException`` (base), ``RemoteResourceNotFoundException``
(no such segment or index: never uploaded, incomplete, or deleted); ours add
``RemoteStorageUnavailable`` (the store did not answer: retriable, the caller retries later and
keeps the local copy) and ``CorruptRemoteObject`` (a checksum mismatch: never served).

Immutable value types: safe to share between threads.
"""

from __future__ import annotations

import base64
import enum
import uuid
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "CorruptRemoteObject", "IndexType", "LogSegmentData", "RemoteLogSegmentId", "RemoteLogSegmentMetadata",
    "RemoteResourceNotFoundException", "RemoteStorageException", "RemoteStorageUnavailable", "new_uuid",
]


def new_uuid() -> str:
    """A random Kafka Uuid in its string form (URL-safe base64 of 16 bytes, no padding, not '-'-led)."""
    while (u := base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()).startswith("-"):
        pass
    return u


class IndexType(enum.Enum):
    """Kafka's RemoteStorageManager.IndexType, with the object suffix each is stored under."""

    OFFSET = "index"
    TIMESTAMP = "timeindex"
    PRODUCER_SNAPSHOT = "snapshot"
    TRANSACTION = "txnindex"
    LEADER_EPOCH = "leader-epoch-checkpoint"

    @property
    def suffix(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentId:
    topic_id: str      # the topic's Kafka Uuid (string form)
    topic: str
    partition: int
    id: str            # this copy's Kafka Uuid

    @classmethod
    def generate(cls, topic_id: str, topic: str, partition: int) -> "RemoteLogSegmentId":
        return cls(topic_id, topic, partition, new_uuid())


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadata:
    segment_id: RemoteLogSegmentId
    start_offset: int
    end_offset: int                 # inclusive, as Kafka's
    max_timestamp_ms: int
    broker_id: int                  # the leader that copied it
    event_timestamp_ms: int
    segment_size_in_bytes: int
    segment_leader_epochs: dict[int, int] = field(default_factory=dict)   # epoch -> its start offset here

    def __post_init__(self) -> None:
        if self.end_offset < self.start_offset:
            raise ValueError(f"end offset {self.end_offset} below start offset {self.start_offset}")


@dataclass(frozen=True, slots=True)
class LogSegmentData:
    """Kafka's LogSegmentData: a rolled segment's files; the leader epochs as checkpoint bytes."""

    log_segment: Path
    offset_index: Path
    time_index: Path
    transaction_index: Path | None    # absent when no transaction was aborted in the segment
    producer_snapshot_index: Path
    leader_epoch_index: bytes


class RemoteStorageException(Exception):
    """A remote storage operation failed (Kafka's RemoteStorageException)."""

    retriable = False


class RemoteResourceNotFoundException(RemoteStorageException):
    """No such remote segment or index (never copied, copy incomplete, or deleted)."""


class RemoteStorageUnavailable(RemoteStorageException):
    """The object store did not answer (down, unreachable, timed out): retry later."""

    retriable = True


class CorruptRemoteObject(RemoteStorageException):
    """An object's bytes do not match the checksum stored when it was copied."""
