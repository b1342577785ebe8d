"""Topic configuration keys: names, types, defaults and validation, as Apache Kafka has them.

One registry serves the controller (validating CreateTopics / IncrementalAlterConfigs),
the broker (building each log's settings from defaults + overrides) and DescribeConfigs.
Values travel as strings, like Kafka's; ``parse`` turns one into its typed value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from odradek.errors import ErrorCode, KafkaError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


def _bool(s: str) -> bool:
    if s.lower() not in ("true", "false"):
        raise ValueError("expected true or false")
    return s.lower() == "true"


def _cleanup_policy(s: str) -> str:
    parts = sorted(p.strip() for p in s.split(",") if p.strip())
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise ValueError("expected delete, compact or compact,delete")
    return ",".join(sorted(parts, reverse=True) if len(parts) > 1 else parts)


def _choice(*allowed: str) -> Callable[[str], str]:
    def check(s: str) -> str:
        if s not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}")
        return s
    return check


def _ranged(kind: Callable[[str], int | float], lo: float, hi: float) -> Callable[[str], int | float]:
    def check(s: str) -> int | float:
        v = kind(s)
        if not lo <= v <= hi:
            raise ValueError(f"must be between {lo} and {hi}")
        return v
    return check


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    default: str
    parse: Callable[[str], object]
    doc: str


def _keys(*keys: ConfigKey) -> dict[str, ConfigKey]:
    return {k.name: k for k in keys}


TOPIC_CONFIGS: dict[str, ConfigKey] = _keys(
    ConfigKey("cleanup.policy", "delete", _cleanup_policy, "delete, compact, or compact,delete"),
    ConfigKey("compression.type", "producer",
              _choice("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
              "only 'producer' (keep the producer's codec) changes nothing on the broker"),
    ConfigKey("delete.retention.ms", "86400000", _ranged(int, 0, LONG_MAX), "how long tombstones stay"),
    ConfigKey("file.delete.delay.ms", "60000", _ranged(int, 0, LONG_MAX), "delay before deleting a file"),
    ConfigKey("flush.messages", str(LONG_MAX), _ranged(int, 1, LONG_MAX), "fsync after this many records"),
    ConfigKey("flush.ms", str(LONG_MAX), _ranged(int, 0, LONG_MAX), "fsync after this many ms"),
    ConfigKey("index.interval.bytes", "4096", _ranged(int, 0, INT_MAX), "bytes between index entries"),
    ConfigKey("max.compaction.lag.ms", str(LONG_MAX), _ranged(int, 1, LONG_MAX), "compaction deadline"),
    ConfigKey("max.message.bytes", "1048588", _ranged(int, 0, INT_MAX), "largest record batch accepted"),
    ConfigKey("message.timestamp.type", "CreateTime", _choice("CreateTime", "LogAppendTime"),
              "CreateTime keeps the producer's timestamp; LogAppendTime stamps the broker's clock"),
    ConfigKey("min.cleanable.dirty.ratio", "0.5", _ranged(float, 0.0, 1.0), "compaction trigger"),
    ConfigKey("min.compaction.lag.ms", "0", _ranged(int, 0, LONG_MAX), "records younger stay uncompacted"),
    ConfigKey("min.insync.replicas", "1", _ranged(int, 1, INT_MAX), "ISR size needed for acks=all"),
    ConfigKey("preallocate", "false", _bool, "preallocate segment files"),
    ConfigKey("retention.bytes", "-1", _ranged(int, -1, LONG_MAX), "partition size before deleting old segments; -1 = no limit"),
    ConfigKey("retention.ms", "604800000", _ranged(int, -1, LONG_MAX), "age before deleting old segments; -1 = no limit"),
    ConfigKey("segment.bytes", "1073741824", _ranged(int, 14, INT_MAX), "segment file size before rolling"),
    ConfigKey("segment.index.bytes", "10485760", _ranged(int, 8, INT_MAX), "maximum size of an index file"),
    ConfigKey("segment.jitter.ms", "0", _ranged(int, 0, LONG_MAX), "random jitter subtracted from segment.ms"),
    ConfigKey("segment.ms", "604800000", _ranged(int, 1, LONG_MAX), "segment age before rolling"),
    ConfigKey("unclean.leader.election.enable", "false", _bool, "elect out-of-sync replicas as a last resort"),
)


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check names and values; raise INVALID_CONFIG with Kafka's kind of message."""
    out: dict[str, str] = {}
    for name, value in configs.items():
        key = TOPIC_CONFIGS.get(name)
        if key is None:
            raise KafkaError(ErrorCode.invalid_config, f"Unknown topic config name: {name}")
        if value is None:
            raise KafkaError(ErrorCode.invalid_config, f"Null value not supported for topic config: {name}")
        try:
            key.parse(str(value))
        except ValueError as e:
            raise KafkaError(ErrorCode.invalid_config,
                             f"Invalid value {value} for configuration {name}: {e}") from None
        out[name] = str(value)
    return out


def effective(overrides: Mapping[str, str], defaults: Mapping[str, str] | None = None) -> dict[str, object]:
    """Typed settings of a topic: registry defaults, then broker defaults, then overrides."""
    merged = {k: v.default for k, v in TOPIC_CONFIGS.items()}
    merged.update(defaults or {})
    merged.update(overrides)
    return {k: TOPIC_CONFIGS[k].parse(v) if k in TOPIC_CONFIGS else v for k, v in merged.items()}
