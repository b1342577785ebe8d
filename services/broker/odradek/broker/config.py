"""Broker settings: identity, listeners, storage, and broker-wide topic defaults.

Topic defaults use the topic config names (``retention.ms``...); Kafka's broker-level
``log.*`` spellings are accepted too (``log.retention.ms`` -> ``retention.ms``, and
``log.retention.hours`` / ``log.roll.hours`` / ``log.segment.bytes`` the way Kafka maps them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from odradek.config import validate_topic_configs

_BROKER_ALIASES = {
    "log.segment.bytes": ("segment.bytes", 1),
    "log.roll.ms": ("segment.ms", 1),
    "log.roll.hours": ("segment.ms", 3_600_000),
    "log.retention.ms": ("retention.ms", 1),
    "log.retention.minutes": ("retention.ms", 60_000),
    "log.retention.hours": ("retention.ms", 3_600_000),
    "log.retention.bytes": ("retention.bytes", 1),
    "log.index.interval.bytes": ("index.interval.bytes", 1),
    "log.index.size.max.bytes": ("segment.index.bytes", 1),
    "log.flush.interval.messages": ("flush.messages", 1),
    "log.flush.interval.ms": ("flush.ms", 1),
    "log.message.timestamp.type": ("message.timestamp.type", None),
    "log.cleanup.policy": ("cleanup.policy", None),
    "message.max.bytes": ("max.message.bytes", 1),
}


def topic_defaults(settings: dict[str, str]) -> dict[str, str]:
    """Broker settings -> validated topic-config defaults."""
    out: dict[str, str] = {}
    for key, value in settings.items():
        if key in _BROKER_ALIASES:
            name, scale = _BROKER_ALIASES[key]
            out[name] = str(int(value) * scale) if scale else value
        else:
            out[key] = value
    return validate_topic_configs(out)


@dataclass
class BrokerConfig:
    broker_id: int
    data_dir: Path
    zookeeper: str                      # host:port[,host:port] without chroot
    cluster: str = "odradek"
    host: str = "127.0.0.1"             # Kafka listener bind address
    port: int = 9092
    advertised_host: str | None = None  # what Metadata tells clients; defaults to host
    advertised_port: int | None = None
    internal_host: str = "127.0.0.1"    # /internal/v1 control-plane listener
    internal_port: int = 0
    internal_advertised_host: str | None = None  # what ZooKeeper tells the controller; defaults to internal_host
    internal_advertised_port: int | None = None
    rack: str | None = None
    auto_create_topics: bool = True     # auto.create.topics.enable
    socket_request_max_bytes: int = 100 * 1024 * 1024
    replica_lag_time_max_ms: int = 30_000  # replica.lag.time.max.ms
    controlled_shutdown_max_retries: int = 3  # controlled.shutdown.max.retries
    cleaner_priority: str = "idle"      # log.cleaner.priority: idle (SCHED_IDLE + idle I/O) or nice10
    topic_defaults: dict[str, str] = field(default_factory=dict)
    group_settings: dict[str, str] = field(default_factory=dict)  # group.* / offsets.* (group coordinator)
