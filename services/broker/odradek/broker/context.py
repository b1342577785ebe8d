"""What request handlers work with: the broker's long-lived parts, built once at start-up.

``BrokerContext.create`` wires them (the group and transaction coordinators following the
ReplicaManager's snapshots, the ``__consumer_offsets`` and ``__transaction_state`` creators,
the producer-id manager, the transaction-marker writer settling transactional offset commits);
``Broker`` builds one and every handler in ``odradek.broker.handlers`` takes it as its first
argument. The context is frozen: handlers translate requests into calls on these parts and keep
no state of their own. ZooKeeper is reached only through the narrow ports here (``configs``,
``scram``, ``quota_store``, the authorizer's ACL store), never as a client: each is None in a
test without ZooKeeper.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.broker.config import BrokerConfig
from odradek.broker.controller_client import ControllerClient
from odradek.broker.dynamic_config import DynamicBrokerConfig
from odradek.broker.group.config import OFFSETS_TOPIC, GroupConfig
from odradek.broker.group.coordinator import GroupCoordinator
from odradek.broker.group.offsets_topic import OffsetsTopic, group_coordinator
from odradek.broker.metadata_cache import MetadataCache
from odradek.broker.metrics.stats import TopicStats
from odradek.broker.partitions import ReplicaManager
from odradek.broker.producer_id_manager import ProducerIdManager
from odradek.broker.quotas.manager import ClientQuotaManager
from odradek.broker.quotas.store import QuotaStore
from odradek.broker.replication.fetch_session import FetchSessionCache
from odradek.broker.security.authorizer import Authorizer
from odradek.broker.security.scram_store import ScramStore
from odradek.broker.txn.config import TxnConfig
from odradek.broker.txn.state_topic import TxnCoordination, TxnStateTopic
from odradek.broker.txn_markers import TxnMarkerWriter
from odradek.broker.zk.configs import EntityConfigs


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
    quota_store: QuotaStore = field(default_factory=lambda: QuotaStore(None))  # their znodes, read in one walk
    txn_markers: TxnMarkerWriter | None = None   # writes WriteTxnMarkers' markers on partitions led here
    configs: EntityConfigs | None = None         # /config/<type>/<entity> (topic overrides as stored)
    scram: ScramStore | None = None              # SCRAM credentials (/config/users)
    dynamic: DynamicBrokerConfig | None = None   # dynamic broker configs
    fetch_sessions: FetchSessionCache = field(default_factory=FetchSessionCache)  # KIP-227
    metadata_cache: MetadataCache = field(default_factory=MetadataCache)  # encoded Metadata topic entries

    @classmethod
    def create(cls, config: BrokerConfig, replicas: ReplicaManager, controller: ControllerClient, *,
               authorizer: Authorizer | None = None, configs: EntityConfigs | None = None,
               scram: ScramStore | None = None, quotas: ClientQuotaManager | None = None,
               quota_store: QuotaStore | None = None, topic_stats: TopicStats | None = None) -> BrokerContext:
        """The parts, wired. ``topic_stats`` is the one ``replicas`` was built to tell of deleted
        topics; ``quota_store`` installs what it reads into ``quotas`` (and the connection rates)."""
        offsets_topic = OffsetsTopic(GroupConfig.from_settings(config.group_settings), replicas, controller)
        groups = group_coordinator(config.broker_id, offsets_topic)
        producer_ids = ProducerIdManager(config.broker_id, controller)
        txn_topic = TxnStateTopic(TxnConfig.from_settings(config.group_settings), replicas, controller)
        markers = TxnMarkerWriter(replicas, written=lambda pid, commit, w: _offsets_marked(groups, pid, commit, w))
        quotas = quotas or ClientQuotaManager(config.quota_window_num, config.quota_window_size_seconds)
        fetch_sessions = FetchSessionCache(config.max_incremental_fetch_session_cache_slots)
        replicas.wakeup.listeners.append(fetch_sessions.notify)   # what may have news for a session
        return cls(config, replicas, controller, groups, offsets_topic, producer_ids,
                   TxnCoordination(config.broker_id, txn_topic, producer_ids, markers), authorizer,
                   topic_stats=topic_stats or TopicStats(), quotas=quotas,
                   quota_store=quota_store or QuotaStore(configs, (quotas.install,)), txn_markers=markers,
                   configs=configs, scram=scram, dynamic=DynamicBrokerConfig(config, configs),
                   fetch_sessions=fetch_sessions)

    @property
    def cluster_id(self) -> str | None:
        return self.replicas.metadata.cluster_id if self.replicas.metadata else None

    def close(self) -> None:
        """Stop the coordinators' loads, timers and markers and pending internal-topic creations."""
        self.groups.close()
        self.offsets_topic.close()
        self.txn.close()


def _offsets_marked(groups: GroupCoordinator, producer_id: int, commit: bool, written) -> None:
    """Markers written on ``__consumer_offsets`` partitions settle the producer's pending
    transactional offset commits (Kafka's ``onTransactionCompleted``)."""
    partitions = {p for t, p in written if t == OFFSETS_TOPIC}
    if partitions:
        groups.complete_txn(producer_id, partitions, commit)
