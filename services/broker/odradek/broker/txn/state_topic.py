"""The broker's side of ``__transaction_state``: the internal topic (compacted,
``transaction.state.log.num.partitions``, created once as many brokers are live as
``transaction.state.log.replication.factor``, ``min.insync.replicas`` = ``transaction.state.log.min.isr``) and the wiring of
the broker's one ``TransactionCoordinator``: its writes go through the topic, its producer
ids come from the broker's ``ProducerIdManager``, it follows the ReplicaManager's snapshots
(loading the partitions this broker comes to lead) and its timers run from start-up; the
``TxnVerifier`` partition leaders ask before a transactional batch (KIP-890,
``transaction.partition.verification.enable``) goes with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.internal_topic import InternalTopic
from odradek.broker.txn.config import TXN_TOPIC, TxnConfig
from odradek.broker.txn.coordinator import TransactionCoordinator
from odradek.broker.txn.markers import MarkerSender
from odradek.broker.txn.timers import TxnTimers
from odradek.broker.txn.verification import TxnVerifier

if TYPE_CHECKING:
    from odradek.broker.controller_client import ControllerClient
    from odradek.broker.partitions import ReplicaManager
    from odradek.broker.producer_id_manager import ProducerIdManager
    from odradek.broker.txn_markers import TxnMarkerWriter


class TxnStateTopic(InternalTopic):
    def __init__(self, config: TxnConfig, replicas: ReplicaManager, controller: ControllerClient) -> None:
        super().__init__(TXN_TOPIC, config.partitions, config.replication_factor, {
            "cleanup.policy": "compact", "segment.bytes": str(config.segment_bytes),
            "min.insync.replicas": str(config.min_isr), "unclean.leader.election.enable": "false",
            "compression.type": "uncompressed"}, replicas, controller, "transaction.state.log.replication.factor")
        self.config = config


class TxnCoordination:
    """The coordinator, its topic and its timers, started and stopped together."""

    def __init__(self, broker_id: int, topic: TxnStateTopic, producer_ids: ProducerIdManager,
                 markers: TxnMarkerWriter) -> None:
        replicas = topic.replicas
        self.topic = topic
        self.coordinator = TransactionCoordinator(broker_id, topic.config, topic.append, producer_ids.allocate,
                                                  MarkerSender(broker_id, replicas, markers.write))
        self.timers = TxnTimers(self.coordinator)
        self.verifier = TxnVerifier(broker_id, replicas, self.coordinator, topic.config.verify_partitions)
        replicas.verify_transactions = topic.config.verify_partitions
        replicas.subscribe(self._on_metadata)

    def _on_metadata(self) -> None:
        if not self.timers.started:
            self.timers.start()
        self.coordinator.on_metadata(self.topic.replicas)

    def close(self) -> None:
        self.timers.close()
        self.verifier.close()
        self.coordinator.close()
        self.topic.close()
