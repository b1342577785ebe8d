"""Group coordinator settings (keys from the config registry) and group placement.

A group lives on partition ``abs(hashCode(group.id)) % partitions`` of ``__consumer_offsets``,
exactly as Kafka computes it (Java's ``String.hashCode`` over UTF-16 code units, and Kafka's
``Utils.abs`` which maps Integer.MIN_VALUE to 0), so that a group lands on the same partition
number as it would on Apache Kafka with the same partition count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from odradek.broker.group.consumer import ConsumerSettings
from odradek.broker.group.membership import MembershipConfig
from odradek.config import bound_values, setting
from odradek.config.transactions import TXN_CONFIGS
from odradek.topics import OFFSETS_TOPIC  # noqa: F401 - re-exported for the group modules


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The coordinator's settings: Kafka's broker keys, defaults and validation from the
    config registry (``odradek.config.GROUP_CONFIGS``)."""
    initial_rebalance_delay_ms: int = setting("group.initial.rebalance.delay.ms")
    min_session_timeout_ms: int = setting("group.min.session.timeout.ms")
    max_session_timeout_ms: int = setting("group.max.session.timeout.ms")
    offsets_partitions: int = setting("offsets.topic.num.partitions")
    offsets_replication_factor: int = setting("offsets.topic.replication.factor")
    offsets_retention_ms: int = setting("offsets.retention.minutes", scale=60_000)
    retention_check_interval_ms: int = setting("offsets.retention.check.interval.ms")
    offset_metadata_max_bytes: int = setting("offset.metadata.max.bytes")
    consumer_session_timeout_ms: int = setting("group.consumer.session.timeout.ms")
    consumer_heartbeat_interval_ms: int = setting("group.consumer.heartbeat.interval.ms")
    consumer_max_size: int = setting("group.consumer.max.size")
    consumer_migration_policy: str = setting("group.consumer.migration.policy")

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> "GroupConfig":
        """Kafka's broker keys (``group.initial.rebalance.delay.ms=0``...); INVALID_CONFIG
        (``KafkaError``) for an unknown key or a bad value."""
        return cls(**bound_values(cls, {k: v for k, v in settings.items() if k not in TXN_CONFIGS}))

    @property
    def membership(self) -> MembershipConfig:
        return MembershipConfig(self.initial_rebalance_delay_ms, self.min_session_timeout_ms,
                                self.max_session_timeout_ms)

    @property
    def consumer(self) -> ConsumerSettings:
        return ConsumerSettings(self.consumer_session_timeout_ms, self.consumer_heartbeat_interval_ms,
                                self.consumer_max_size, self.consumer_migration_policy)


def java_string_hashcode(s: str) -> int:
    """Java's ``String.hashCode()``: s[0]*31^(n-1) + ... over UTF-16 code units, as a signed int32."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount``."""
    h = java_string_hashcode(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions
