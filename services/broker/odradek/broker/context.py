"""What request handlers work with: the broker's long-lived parts, built once at start-up.

``BrokerContext.create`` wires them (the group and transaction coordinators following the
ReplicaManager's snapshots, the ``__consumer_offsets`` and ``__transaction_state`` creators,
the producer-id manager, the transaction-marker writer); ``Broker`` builds one
and every handler in ``odradek.broker.handlers`` takes it as its first argument. The context
is frozen: handlers translate requests into calls on these parts and keep no state of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from kazoo.client import KazooClient

from odradek.broker.config import BrokerConfig
from odradek.broker.controller_client import ControllerClient
from odradek.broker.dynamic_config import DynamicBrokerConfig
from odradek.broker.group.config import OFFSETS_TOPIC, GroupConfig
from odradek.broker.group.coordinator import GroupCoordinator
from odradek.broker.group.offsets_topic import OffsetsTopic, group_coordinator
from odradek.broker.metrics.stats import TopicStats
from odradek.broker.partitions import ReplicaManager
from odradek.broker.producer_id_manager import ProducerIdManager
from odradek.broker.quotas.manager import ClientQuotaManager
from odradek.broker.replication.fetch_session import FetchSessionCache
from odradek.broker.security.authorizer import Authorizer
from odradek.broker.txn.config import TxnConfig
from odradek.broker.txn.state_topic import TxnCoordination, TxnStateTopic
from odradek.broker.txn_markers import TxnMarkerWriter


@dataclass(frozen=True)
class BrokerContext:
    config: BrokerConfig
    replicas: ReplicaManager
    controller: ControllerClient
    groups: GroupCoordinator
    offsets_topic: OffsetsTopic
    producer_ids: ProducerIdManager
    txn: TxnCoordination
    authorizer: Authorizer | None = None   # None: no authorizer.class.name, every request allowed
    topic_stats: TopicStats = field(default_factory=TopicStats)  # BrokerTopicMetrics (odradek.broker.metrics)
    quotas: ClientQuotaManager = field(default_factory=ClientQuotaManager)  # client quotas (docs/quotas.md)
    txn_markers: TxnMarkerWriter | None = None   # writes WriteTxnMarkers' markers on partitions led here
    zk: Callable[[], KazooClient | None] = lambda: None  # the broker's ZooKeeper session, once registered
    dynamic: DynamicBrokerConfig | None = None           # dynamic broker configs (None: a test without ZooKeeper)
    fetch_sessions: FetchSessionCache = field(default_factory=FetchSessionCache)  # KIP-227

    @classmethod
    def create(cls, config: BrokerConfig, replicas: ReplicaManager, controller: ControllerClient,
               authorizer: Authorizer | None = None,
               zk: Callable[[], KazooClient | None] = lambda: None) -> BrokerContext:
        offsets_topic = OffsetsTopic(GroupConfig.from_settings(config.group_settings), replicas, controller)
        producer_ids = ProducerIdManager(config.broker_id, controller)
        txn_topic = TxnStateTopic(TxnConfig.from_settings(config.group_settings), replicas, controller)
        markers = TxnMarkerWriter(replicas)
        ctx = cls(config, replicas, controller, group_coordinator(config.broker_id, offsets_topic),
                  offsets_topic, producer_ids, TxnCoordination(config.broker_id, txn_topic, producer_ids, markers),
                  authorizer, quotas=ClientQuotaManager(config.quota_window_num, config.quota_window_size_seconds),
                  txn_markers=markers, zk=zk, dynamic=DynamicBrokerConfig(config, zk),
                  fetch_sessions=FetchSessionCache(config.max_incremental_fetch_session_cache_slots))
        replicas.topic_deleted = ctx.topic_stats.forget
        replicas.wakeup.listeners.append(ctx.fetch_sessions.notify)
        ctx.txn_markers.listeners.append(ctx._offsets_marked)
        return ctx

    def _offsets_marked(self, producer_id: int, commit: bool, written) -> None:
        """Markers written on ``__consumer_offsets`` partitions settle the producer's pending
        transactional offset commits (Kafka's ``onTransactionCompleted``)."""
        partitions = {p for t, p in written if t == OFFSETS_TOPIC}
        if partitions:
            self.groups.complete_txn(producer_id, partitions, commit)

    @property
    def cluster_id(self) -> str | None:
        return self.replicas.metadata.cluster_id if self.replicas.metadata else None

    def close(self) -> None:
        """Stop the coordinators' loads, timers and markers and pending internal-topic creations."""
        self.groups.close()
        self.offsets_topic.close()
        self.txn.close()
