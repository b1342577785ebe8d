"""Group coordinator settings (Kafka's broker keys and defaults) and group placement.

A group lives on partition ``abs(hashCode(group.id)) % partitions`` of ``__consumer_offsets``,
exactly as Kafka computes it (Java's ``String.hashCode`` over UTF-16 code units, and Kafka's
``Utils.abs`` which maps Integer.MIN_VALUE to 0), so that a group lands on the same partition
number as it would on Apache Kafka with the same partition count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from odradek.broker.group.membership import MembershipConfig

OFFSETS_TOPIC = "__consumer_offsets"

# broker key -> (GroupConfig field, default, unit multiplier to ms or 1)
_KEYS = {
    "group.initial.rebalance.delay.ms": ("initial_rebalance_delay_ms", 1),
    "group.min.session.timeout.ms": ("min_session_timeout_ms", 1),
    "group.max.session.timeout.ms": ("max_session_timeout_ms", 1),
    "offsets.topic.num.partitions": ("offsets_partitions", 1),
    "offsets.topic.replication.factor": ("offsets_replication_factor", 1),
    "offsets.retention.minutes": ("offsets_retention_ms", 60_000),
    "offsets.retention.check.interval.ms": ("retention_check_interval_ms", 1),
    "offset.metadata.max.bytes": ("offset_metadata_max_bytes", 1),
}


def is_group_setting(key: str) -> bool:
    return key in _KEYS


@dataclass(frozen=True, slots=True)
class GroupConfig:
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    offsets_partitions: int = 50
    offsets_replication_factor: int = 3
    offsets_retention_ms: int = 10080 * 60_000
    retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> "GroupConfig":
        """Kafka's broker keys (``group.initial.rebalance.delay.ms=0``...); ValueError if bad."""
        values = {}
        for key, raw in settings.items():
            if key not in _KEYS:
                raise ValueError(f"unknown group coordinator setting {key!r}")
            name, scale = _KEYS[key]
            value = int(raw) * scale
            if value < 0 or (name in ("offsets_partitions", "offsets_replication_factor") and value < 1):
                raise ValueError(f"{key}={raw} is out of range")
            values[name] = value
        return cls(**values)

    @property
    def membership(self) -> MembershipConfig:
        return MembershipConfig(self.initial_rebalance_delay_ms, self.min_session_timeout_ms,
                                self.max_session_timeout_ms)


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
