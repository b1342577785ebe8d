"""Sending a transaction's markers (WriteTxnMarkers, API 27) to the leaders of its partitions.

Kafka's TransactionMarkerChannelManager: the coordinator writes PrepareCommit/PrepareAbort,
answers the client, then asks every partition leader to write the commit/abort control
batch, carrying the producer id, the (bumped) epoch and the coordinator epoch (the leader
epoch of the ``__transaction_state`` partition). ``MarkerSender.send`` groups the partitions
by leader (WriteTxnMarkers v1, batched per broker across transactions), removes each partition from the set it is given as
its leader confirms, and retries the rest (refreshed leaders) every ``RETRY_BACKOFF_S`` on
retriable errors, until none is left or ``still_valid()`` turns false (the coordinator lost
the partition). A partition of a topic that no longer exists is dropped, as in Kafka;
INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED end the sending (a newer
coordinator or epoch owns the transaction). Partitions this broker leads are written
directly (``TxnMarkerWriter.write``, what the WriteTxnMarkers handler calls); the others over
the inter-broker listener, one connection per broker, through its ``MarkerChannel``: one
request in flight at a time, carrying the markers of every transaction queued for that broker.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Awaitable, Callable

from odradek.broker.replication.client import BrokerClients
from odradek.broker.txn.marker_channel import MarkerChannel
from odradek.broker.txn_markers import MARKER_TIMEOUT_S, TxnMarker
from odradek.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.partitions import ReplicaManager

log = logging.getLogger(__name__)
E = ErrorCode

RETRY_BACKOFF_S = 0.1
_TIMEOUT_S = MARKER_TIMEOUT_S + 5   # the leader answers within MARKER_TIMEOUT_S
_LOG_EVERY = 600
_RETRIABLE = frozenset({E.unknown_topic_or_partition, E.not_leader_or_follower, E.not_enough_replicas,
                        E.not_enough_replicas_after_append, E.request_timed_out, E.kafka_storage_error,
                        E.leader_not_available, E.network_exception, E.coordinator_load_in_progress})
_FENCED = frozenset({E.invalid_producer_epoch, E.transaction_coordinator_fenced})


LocalWrite = Callable[[TxnMarker], Awaitable[dict[tuple[str, int], ErrorCode]]]


class MarkerSender:
    def __init__(self, broker_id: int, replicas: ReplicaManager, local: LocalWrite | None = None) -> None:
        self.broker_id = broker_id
        self.replicas = replicas
        self.local = local
        self._clients = BrokerClients(replicas, f"broker-{broker_id}-txn-markers")
        self._channels: dict[int, MarkerChannel] = {}   # per destination broker, batching across transactions
        self.unknown_destination: set[object] = set()   # sends waiting for a leaderless partition (txn.metrics)

    async def send(self, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int,
                   partitions: set[tuple[str, int]], still_valid: Callable[[], bool]) -> bool:
        """True once every partition has its marker (emptying ``partitions``); False if stopped."""
        token = object()
        try:
            return await self._send(token, producer_id, epoch, commit, coordinator_epoch, partitions, still_valid)
        finally:
            self.unknown_destination.discard(token)

    async def _send(self, token: object, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int,
                    partitions: set[tuple[str, int]], still_valid: Callable[[], bool]) -> bool:
        rounds = 0
        while partitions:
            if not still_valid():
                return False
            by_leader = self._leaders(partitions)
            if sum(map(len, by_leader.values())) < len(partitions):   # some wait for a leader
                self.unknown_destination.add(token)
            else:
                self.unknown_destination.discard(token)
            results = await asyncio.gather(*(self._request(b, producer_id, epoch, commit, coordinator_epoch, tps)
                                             for b, tps in by_leader.items()))
            for errors in results:
                for tp, error in errors.items():
                    if error == E.none:
                        partitions.discard(tp)
                    elif error in _FENCED:
                        log.info("markers of producer %d stopped: %s from %s-%d", producer_id, error.name, *tp)
                        return False
                    elif rounds % _LOG_EVERY == 0:  # once, then every minute or so of retrying
                        log.log(logging.INFO if error in _RETRIABLE else logging.WARNING,
                                "marker of producer %d on %s-%d: %s; retrying", producer_id, *tp, error.name)
            rounds += 1
            if partitions:
                await asyncio.sleep(RETRY_BACKOFF_S)
        return True

    def _leaders(self, partitions: set[tuple[str, int]]) -> dict[int, list[tuple[str, int]]]:
        """Partitions by leader; those of deleted topics are dropped, leaderless ones wait."""
        out: dict[int, list[tuple[str, int]]] = {}
        for topic, p in list(partitions):
            meta = self.replicas.topic(topic)
            if meta is None or not 0 <= p < len(meta.partitions):
                log.info("dropping the marker of %s-%d: the partition no longer exists", topic, p)
                partitions.discard((topic, p))
                continue
            leader = meta.partitions[p].leader
            if leader >= 0 and self.replicas.is_live(leader):
                out.setdefault(leader, []).append((topic, p))
        return out

    async def _request(self, broker: int, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int,
                       tps: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        marker = TxnMarker(producer_id, epoch, coordinator_epoch, commit, tuple(tps))
        if broker == self.broker_id and self.local is not None:
            return await self.local(marker)
        channel = self._channels.get(broker)
        if channel is None:
            channel = self._channels[broker] = MarkerChannel(broker, lambda: self._clients.get(broker), _TIMEOUT_S)
        return await channel.write(marker)

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()
        self._clients.close()
