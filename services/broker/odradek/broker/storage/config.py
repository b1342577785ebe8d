"""LogConfig: the typed settings one partition log runs with (Kafka's LogConfig).

Built from broker-wide defaults plus a topic's overrides through ``odradek.config.effective``
(values travel as strings, like Kafka's); each field is the topic key of its name (dots as
underscores), its default the registry's. Immutable: a config change builds a new one and
hands it to ``Log.update_config``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from odradek.config import LONG_MAX, effective, typed_default
from odradek.config.topic import broker_timestamp_limits, timestamp_limit

__all__ = ["LogConfig"]


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = typed_default("segment.bytes")
    segment_ms: int = typed_default("segment.ms")
    segment_jitter_ms: int = typed_default("segment.jitter.ms")
    segment_index_bytes: int = typed_default("segment.index.bytes")
    index_interval_bytes: int = typed_default("index.interval.bytes")
    retention_bytes: int = typed_default("retention.bytes")
    retention_ms: int = typed_default("retention.ms")
    flush_messages: int = typed_default("flush.messages")
    flush_ms: int = typed_default("flush.ms")
    max_message_bytes: int = typed_default("max.message.bytes")
    message_timestamp_type: str = typed_default("message.timestamp.type")
    message_timestamp_difference_max_ms: int = typed_default("message.timestamp.difference.max.ms")
    message_timestamp_before_max_ms: int = typed_default("message.timestamp.before.max.ms")
    message_timestamp_after_max_ms: int = typed_default("message.timestamp.after.max.ms")
    compression_type: str = typed_default("compression.type")
    cleanup_policy: str = typed_default("cleanup.policy")
    delete_retention_ms: int = typed_default("delete.retention.ms")
    min_cleanable_dirty_ratio: float = typed_default("min.cleanable.dirty.ratio")
    min_compaction_lag_ms: int = typed_default("min.compaction.lag.ms")
    max_compaction_lag_ms: int = typed_default("max.compaction.lag.ms")
    file_delete_delay_ms: int = typed_default("file.delete.delay.ms")
    preallocate: bool = typed_default("preallocate")
    remote_storage_enable: bool = typed_default("remote.storage.enable")
    local_retention_ms: int = typed_default("local.retention.ms")
    local_retention_bytes: int = typed_default("local.retention.bytes")
    overrides: Mapping[str, str] = field(default_factory=dict, compare=False)
    # cleanup.policy has ``compact``: read on every leader append (the keyless-record check), so made once
    compacted: bool = field(init=False, repr=False, compare=False)
    # the CreateTime limits in force ((before, after) ms, Kafka's derivation from difference.max.ms),
    # or None: no limit, so that an append pays one test for them
    timestamp_limits: tuple[int, int] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "compacted", "compact" in self.cleanup_policy.split(","))
        difference = self.message_timestamp_difference_max_ms
        limits = (timestamp_limit(self.message_timestamp_before_max_ms, difference),
                  timestamp_limit(self.message_timestamp_after_max_ms, difference))
        checked = not self.log_append_time and min(limits) < LONG_MAX
        object.__setattr__(self, "timestamp_limits", limits if checked else None)

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, str],
                       defaults: Mapping[str, str] | None = None) -> "LogConfig":
        values = effective(overrides, broker_timestamp_limits(defaults or {}))
        known = {f for f in cls.__dataclass_fields__ if f != "overrides"}
        typed = {name.replace(".", "_"): value for name, value in values.items()}
        return cls(**{k: v for k, v in typed.items() if k in known}, overrides=dict(overrides))

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def max_segment_ms(self) -> int:
        """Kafka's LogConfig.maxSegmentMs: a compacted log also rolls by max.compaction.lag.ms,
        so that its records reach a closed (cleanable) segment in time."""
        if self.compacted:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms

    @property
    def local_retention(self) -> tuple[int, int]:
        """(ms, bytes) kept locally when remote.storage.enable: local.retention.*, -2 meaning
        retention.* (Kafka's localRetentionMs/Bytes)."""
        ms = self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms
        size = self.retention_bytes if self.local_retention_bytes == -2 else self.local_retention_bytes
        return ms, size

    @property
    def delete_enabled(self) -> bool:
        """Whether retention deletes segments (cleanup.policy has ``delete``)."""
        return "delete" in self.cleanup_policy.split(",")
