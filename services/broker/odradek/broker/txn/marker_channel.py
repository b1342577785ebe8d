"""WriteTxnMarkers to one other broker, batched across transactions (Kafka's
TransactionMarkerChannelManager: a queue per destination broker drained into one request).

``MarkerChannel.write(marker)`` queues the marker and waits for its partitions' errors. One
request is in flight per broker at a time; every marker queued while it is carries over into
the next request, so concurrent transactions whose partitions share a leader cost one round
trip, not one each. A request holds at most one marker per producer id (the leader answers
per producer id, as Kafka's handler keys its results); a second one waits for the next
request. A lost connection or a timeout answers NETWORK_EXCEPTION for the request's
partitions (``MarkerSender`` retries them with fresh leaders).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Callable

from kio.static.constants import EntityType

from odradek.broker.replication.client import KafkaClient
from odradek.broker.txn_markers import TxnMarker
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make

log = logging.getLogger(__name__)

VERSION = 1
Errors = dict[tuple[str, int], ErrorCode]


@dataclass
class _Queued:
    marker: TxnMarker
    done: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class MarkerChannel:
    def __init__(self, broker: int, client: Callable[[], KafkaClient], timeout_s: float) -> None:
        self.broker, self._client, self.timeout_s = broker, client, timeout_s
        self.queue: list[_Queued] = []
        self._drainer: asyncio.Task | None = None
        self.requests = 0   # WriteTxnMarkers requests sent (tests: the batching)

    async def write(self, marker: TxnMarker) -> Errors:
        queued = _Queued(marker)
        self.queue.append(queued)
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.get_running_loop().create_task(self._drain())
        return await queued.done

    async def _drain(self) -> None:
        while self.queue:
            batch, later, producers = [], [], set()
            for q in self.queue:
                (later if q.marker.producer_id in producers else batch).append(q)
                producers.add(q.marker.producer_id)
            self.queue = later
            try:
                answers = await self._send([q.marker for q in batch])
            except Exception as e:   # not a verdict on the partitions: the callers see it as before
                for q in batch:
                    if not q.done.done():
                        q.done.set_exception(e)
                continue
            for q in batch:
                if not q.done.done():
                    got = answers.get(q.marker.producer_id, {})
                    q.done.set_result({tp: got.get(tp, ErrorCode.network_exception) for tp in q.marker.partitions})

    async def _send(self, markers: list[TxnMarker]) -> dict[int, Errors]:
        """{producer id: errors of its partitions}, one WriteTxnMarkers request for all."""
        s = Schemas(ApiKey.WRITE_TXN_MARKERS, VERSION, EntityType.request)
        wire = []
        for m in markers:
            by_topic: dict[str, list[int]] = {}
            for t, p in m.partitions:
                by_topic.setdefault(t, []).append(p)
            wire.append(make(s.WritableTxnMarker, producer_id=m.producer_id, producer_epoch=m.producer_epoch,
                             transaction_result=m.commit, coordinator_epoch=m.coordinator_epoch,
                             topics=tuple(make(s.WritableTxnMarkerTopic, name=t, partition_indexes=tuple(ps))
                                          for t, ps in by_topic.items())))
        self.requests += 1
        try:
            answer = await self._client().request(ApiKey.WRITE_TXN_MARKERS, VERSION, make(
                s.WriteTxnMarkersRequest, markers=tuple(wire)), timeout=self.timeout_s)
        except (ConnectionError, StopIteration) as e:
            log.debug("WriteTxnMarkers to broker %d failed: %s", self.broker, e)
            return {}
        return {m.producer_id: {(t.name, p.partition_index): ErrorCode(p.error_code)
                                for t in m.topics for p in t.partitions} for m in answer.markers}

    def close(self) -> None:
        if self._drainer is not None:
            self._drainer.cancel()
        for q in self.queue:
            q.done.cancel()
        self.queue.clear()
