"""A partition leader asking the transaction coordinator whether partitions were added to a
producer's transaction before it appends their first transactional batch (KIP-890 part 1,
Kafka 3.9's AddPartitionsToTxnManager).

``TxnVerifier.verify`` finds the coordinator of the transactional id (the leader of its
``__transaction_state`` partition): this broker's coordinator is asked in process, another
broker with AddPartitionsToTxn v4 ``verify_only`` on the inter-broker listener (one request at
a time per broker; verification happens once per transaction and partition, so the rate is
low). Its answers come back as the produce errors Kafka 3.9 gives a Produce v3-v10 client
(``produce_error``): TRANSACTION_ABORTABLE (not added) -> INVALID_TXN_STATE "Partition was not
added to the transaction"; PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH; the retriable ones
(coordinator moving or loading, CONCURRENT_TRANSACTIONS, the network) -> NOT_ENOUGH_REPLICAS,
which old clients retry without a metadata refresh. Event-loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from kio.static.constants import EntityType

from odradek.broker.group.config import partition_for
from odradek.broker.replication.client import BrokerClients
from odradek.broker.txn.config import TXN_TOPIC
from odradek.errors import CustomMessageError, ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make

if TYPE_CHECKING:
    from odradek.broker.partitions import ReplicaManager
    from odradek.broker.txn.coordinator import TransactionCoordinator

log = logging.getLogger(__name__)

E = ErrorCode
TP = tuple[str, int]
VERSION = 4            # Kafka 3.9's brokers send AddPartitionsToTxn v4 for verification
TIMEOUT_S = 30.0       # request.timeout.ms
_UNVERIFIABLE = frozenset({E.network_exception, E.coordinator_load_in_progress, E.coordinator_not_available,
                           E.not_coordinator, E.concurrent_transactions})


def produce_error(code: ErrorCode, abortable: bool = False) -> KafkaError | None:
    """The produce answer for a partition whose verification answered ``code`` (None: verified);
    ``abortable``: the client knows TRANSACTION_ABORTABLE (Produce v11+, KIP-890 part 2), which
    older ones are answered INVALID_TXN_STATE for, as Kafka's AddPartitionsToTxnManager. Kafka words
    only its two translations (CustomMessageError); any other code is answered with a null message."""
    if code == E.none:
        return None
    if code == E.producer_fenced:
        code = E.invalid_producer_epoch
    if code == E.transaction_abortable and abortable:
        return KafkaError(code)
    if code in (E.transaction_abortable, E.invalid_txn_state):
        return CustomMessageError(E.invalid_txn_state, "Partition was not added to the transaction")
    if code in _UNVERIFIABLE:
        return CustomMessageError(E.not_enough_replicas, "Unable to verify the partition has been added to the "
                                                         f"transaction. Underlying error: {code.name.upper()}")
    return KafkaError(code)


class TxnVerifier:
    def __init__(self, broker_id: int, replicas: ReplicaManager, coordinator: TransactionCoordinator,
                 enabled: bool) -> None:
        self.broker_id, self.replicas, self.coordinator = broker_id, replicas, coordinator
        self.enabled = enabled
        self._clients = BrokerClients(replicas, f"broker-{broker_id}-txn-verify")
        self._locks: dict[int, asyncio.Lock] = {}
        self.requests = 0     # verifications asked of another broker (tests: the hot path asks none)

    async def verify(self, tid: str, producer_id: int, epoch: int, partitions: set[TP]) -> dict[TP, ErrorCode]:
        """The coordinator's answer per partition (NONE: in the transaction)."""
        broker = self._coordinator_of(tid)
        if broker is None:
            return dict.fromkeys(partitions, E.coordinator_not_available)
        if broker == self.broker_id:
            try:
                return self.coordinator.verify_partitions(tid, producer_id, epoch, partitions)
            except KafkaError as e:
                return dict.fromkeys(partitions, e.code)
        return await self._ask(broker, tid, producer_id, epoch, partitions)

    def _coordinator_of(self, tid: str) -> int | None:
        topic = self.replicas.topic(TXN_TOPIC)
        if topic is None or not topic.partitions:
            return None
        leader = topic.partitions[partition_for(tid, len(topic.partitions))].leader
        return leader if leader >= 0 and self.replicas.is_live(leader) else None

    async def _ask(self, broker: int, tid: str, producer_id: int, epoch: int, partitions: set[TP]
                   ) -> dict[TP, ErrorCode]:
        s = Schemas(ApiKey.ADD_PARTITIONS_TO_TXN, VERSION, EntityType.request)
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(partitions):
            by_topic.setdefault(t, []).append(p)
        request = make(s.AddPartitionsToTxnRequest, transactions=(make(
            s.AddPartitionsToTxnTransaction, transactional_id=tid, producer_id=producer_id, producer_epoch=epoch,
            verify_only=True, topics=tuple(make(s.AddPartitionsToTxnTopic, name=t, partitions=tuple(ps))
                                           for t, ps in by_topic.items())),))
        lock = self._locks.setdefault(broker, asyncio.Lock())
        async with lock:   # one request in flight per connection
            self.requests += 1
            try:
                answer = await self._clients.get(broker).request(ApiKey.ADD_PARTITIONS_TO_TXN, VERSION, request,
                                                            timeout=TIMEOUT_S)
            except (ConnectionError, StopIteration) as e:
                log.info("verifying %s's partitions with broker %d failed: %s", tid, broker, e)
                return dict.fromkeys(partitions, E.network_exception)
        if answer.error_code != E.none:
            return dict.fromkeys(partitions, ErrorCode(answer.error_code))
        got = {(t.name, r.partition_index): ErrorCode(r.partition_error_code)
               for txn in answer.results_by_transaction for t in txn.topic_results for r in t.results_by_partition}
        return {tp: got.get(tp, E.network_exception) for tp in partitions}

    def close(self) -> None:
        self._clients.close()
