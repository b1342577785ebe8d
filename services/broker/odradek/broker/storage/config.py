"""LogConfig: the typed settings one partition log runs with (Kafka's LogConfig).

Built from broker-wide defaults plus a topic's overrides through ``odradek.config.effective``
(values travel as strings, like Kafka's). Immutable: a config change builds a new one and
hands it to ``Log.update_config``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from odradek.config import effective

__all__ = ["LogConfig"]


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_bytes: int = -1
    retention_ms: int = 604800000
    flush_messages: int = 2**63 - 1
    flush_ms: int = 2**63 - 1
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    compression_type: str = "producer"
    cleanup_policy: str = "delete"
    max_compaction_lag_ms: int = 2**63 - 1
    file_delete_delay_ms: int = 60000
    preallocate: bool = False
    overrides: Mapping[str, str] = field(default_factory=dict, compare=False)

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, str],
                       defaults: Mapping[str, str] | None = None) -> "LogConfig":
        values = effective(overrides, defaults)
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
        if "compact" in self.cleanup_policy.split(","):
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms

    @property
    def delete_enabled(self) -> bool:
        """Whether retention deletes segments (cleanup.policy has ``delete``)."""
        return "delete" in self.cleanup_policy.split(",")
