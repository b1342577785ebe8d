"""Writing transaction markers on the partitions this broker leads (the receiving side of
Kafka's WriteTxnMarkers).

A transaction coordinator ends a transaction by writing one control batch (a COMMIT or ABORT
marker, see ``odradek.records.build_control_batch``) to every partition of the transaction.
``TxnMarkerWriter.write`` is that write on this broker: the WriteTxnMarkers handler calls it
for a request from a coordinator on another broker, and the coordinator calls it directly
when it leads the partition itself.

Contract of ``write(marker, timeout_s)``:
- for each (topic, partition) of ``marker.partitions`` the marker is appended as leader with
  the producer id/epoch and coordinator epoch of ``marker``, then awaited like an acks=all
  produce: the answer comes once the high watermark passes the marker (Kafka's
  ``appendRecords(requiredAcks = -1, origin = COORDINATOR)``), or at ``timeout_s``;
- it returns ``{(topic, partition): ErrorCode}`` with the codes Kafka gives per partition:
  NONE; UNKNOWN_TOPIC_OR_PARTITION (no replica here); NOT_LEADER_OR_FOLLOWER (a follower here,
  or leadership moved while waiting); NOT_ENOUGH_REPLICAS (ISR below min.insync.replicas: nothing written),
  NOT_ENOUGH_REPLICAS_AFTER_APPEND; INVALID_PRODUCER_EPOCH (the partition saw a newer epoch
  of the producer); TRANSACTION_COORDINATOR_FENCED (a newer coordinator epoch wrote a marker
  for this producer); KAFKA_STORAGE_ERROR; REQUEST_TIMED_OUT. Retriable ones are for the
  coordinator to retry (Kafka's TransactionMarkerRequestCompletionHandler does);
- it never raises a KafkaError; the markers of partitions that succeeded stay written.

``written`` (a constructor argument) is called with (producer id, commit, partitions written)
after every write that succeeded somewhere: the group coordinator's hook for the pending transactional offset commits
of ``__consumer_offsets`` partitions (Kafka's ``onTransactionCompleted``).
Event-loop thread only.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Callable

from odradek.errors import ErrorCode, KafkaError
from odradek.records import ControlType

__all__ = ["MARKER_TIMEOUT_S", "TxnMarker", "TxnMarkerWriter"]

MARKER_TIMEOUT_S = 30.0   # Kafka waits request.timeout.ms (30 s by default) for the markers' replication

Partitions = tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class TxnMarker:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: Partitions

    @property
    def control_type(self) -> ControlType:
        return ControlType.COMMIT if self.commit else ControlType.ABORT


class TxnMarkerWriter:
    def __init__(self, replicas, written: Callable[[int, bool, Partitions], None] = lambda *_: None) -> None:
        self.replicas = replicas   # the broker's ReplicaManager
        self._written = written    # told (producer id, commit, partitions) after each write that landed

    async def write(self, marker: TxnMarker, timeout_s: float = MARKER_TIMEOUT_S) -> dict[tuple[str, int], ErrorCode]:
        """Append ``marker`` to each of its partitions led here; answer once replicated (see above)."""
        results: dict[tuple[str, int], ErrorCode] = {}
        waits: dict[tuple[str, int], asyncio.Future] = {}
        for key in marker.partitions:
            if self.replicas.logs.get(*key) is None and not self.replicas.logs.failures.offline:
                results[key] = ErrorCode.unknown_topic_or_partition   # not hosted here at all, as Kafka
                continue
            try:
                info = self.replicas.append_marker(key[0], key[1], marker.control_type, marker.producer_id,
                                                   marker.producer_epoch, marker.coordinator_epoch)
                waits[key] = self.replicas.replicated(key[0], key[1], info.last_offset)
            except KafkaError as e:
                results[key] = e.code
        if waits:
            await asyncio.wait(waits.values(), timeout=max(timeout_s, 0))
        for key, future in waits.items():
            if future.done():
                results[key] = future.result()
            else:
                future.cancel()
                results[key] = ErrorCode.request_timed_out
        written = tuple(k for k in marker.partitions if results[k] == ErrorCode.none)
        if written:
            self._written(marker.producer_id, marker.commit, written)
        return results
