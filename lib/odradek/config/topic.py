"""Topic configuration keys as Apache Kafka has them, with their broker-level synonyms.

One registry serves the controller (validating CreateTopics / IncrementalAlterConfigs), the
broker (building each log's settings from defaults + overrides, reading broker-wide defaults
under Kafka's ``log.*`` spellings) and DescribeConfigs (values, sources, synonyms). The
synonyms are Kafka's LogConfig ``ALL_TOPIC_CONFIG_SYNONYMS``, in Kafka's order.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from odradek.config.keys import (BOOLEAN, CLEANUP_POLICY, INT_MAX, LONG_MAX, ConfigKey, ConfigType, Synonym, ValueType,
                                 fraction, integer, one_of, registry)
from odradek.errors import ErrorCode, KafkaError

_HOUR_MS, _MINUTE_MS = 3_600_000, 60_000


def _throttled_replicas(s: str) -> str:
    """Kafka's ThrottledReplicaListValidator: ``*``, or ``partition:broker`` entries (none: "")."""
    entries = [e.strip() for e in s.split(",")]
    if s.strip() != "*" and not all(re.fullmatch(r"([0-9]+:[0-9]+)?", e) for e in entries):
        raise ValueError("must be the literal '*' or a list of replicas in the following format: "
                         "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
    return s.strip()


THROTTLED_REPLICAS = ValueType(ConfigType.LIST, _throttled_replicas, "*, or partition:broker pairs, comma-separated")
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"


def _topic(name: str, type_, default: str, doc: str, *synonyms: str | Synonym) -> ConfigKey:
    syn = tuple(s if isinstance(s, Synonym) else Synonym(s) for s in synonyms)
    return ConfigKey(name, type_, default, doc, dynamic=True, synonyms=syn)


TOPIC_CONFIGS: dict[str, ConfigKey] = registry(
    _topic("cleanup.policy", CLEANUP_POLICY, "delete",
           "compact (or compact,delete) keeps the last record per key and refuses records without one "
           "(docs/compaction.md)", "log.cleanup.policy"),
    _topic("compression.type", one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"), "producer",
           "only 'producer' (keep the producer's codec) changes nothing on the broker", "compression.type"),
    _topic("delete.retention.ms", integer(0, LONG_MAX), "86400000", "how long tombstones stay",
           "log.cleaner.delete.retention.ms"),
    _topic("file.delete.delay.ms", integer(0, LONG_MAX), "60000", "delay before deleting a file",
           "log.segment.delete.delay.ms"),
    _topic("flush.messages", integer(1, LONG_MAX), str(LONG_MAX),
           "fsync after this many records (default: the OS decides, like Kafka)", "log.flush.interval.messages"),
    _topic("flush.ms", integer(0, LONG_MAX), str(LONG_MAX),
           "fsync after this many ms (default: the OS decides, like Kafka)",
           Synonym("log.flush.interval.ms", reports_default=False), "log.flush.scheduler.interval.ms"),
    _topic("index.interval.bytes", integer(0, INT_MAX), "4096", "bytes between sparse offset-index entries",
           "log.index.interval.bytes"),
    # No broker-wide default (Kafka's LogConfig configsWithNoServerDefaults): per topic only.
    _topic(FOLLOWER_THROTTLED_REPLICAS, THROTTLED_REPLICAS, "",
           "replicas (partition:follower broker, or *) whose fetching from the leader is throttled to that "
           "broker's follower.replication.throttled.rate while out of the ISR (docs/replication.md)"),
    _topic(LEADER_THROTTLED_REPLICAS, THROTTLED_REPLICAS, "",
           "replicas (partition:leader broker, or *) whose leader sends out-of-ISR followers no more than its "
           "leader.replication.throttled.rate (docs/replication.md)"),
    _topic("max.compaction.lag.ms", integer(1, LONG_MAX), str(LONG_MAX), "compaction deadline",
           "log.cleaner.max.compaction.lag.ms"),
    _topic("max.message.bytes", integer(0, INT_MAX), "1048588",
           "largest record batch accepted (MESSAGE_TOO_LARGE above)", "message.max.bytes"),
    _topic("message.timestamp.after.max.ms", integer(0, LONG_MAX), str(LONG_MAX),
           "with CreateTime: a record stamped more than this after the broker's clock is refused "
           "(INVALID_TIMESTAMP; docs/broker.md)", "log.message.timestamp.after.max.ms"),
    _topic("message.timestamp.before.max.ms", integer(0, LONG_MAX), str(LONG_MAX),
           "with CreateTime: a record stamped more than this before the broker's clock is refused "
           "(INVALID_TIMESTAMP; docs/broker.md)", "log.message.timestamp.before.max.ms"),
    _topic("message.timestamp.difference.max.ms", integer(0, LONG_MAX), str(LONG_MAX),
           "deprecated (Kafka 3.6): the before and after limits that are left at their default",
           "log.message.timestamp.difference.max.ms"),
    _topic("message.timestamp.type", one_of("CreateTime", "LogAppendTime"), "CreateTime",
           "CreateTime keeps the producer's timestamp; LogAppendTime stamps the broker's clock",
           "log.message.timestamp.type"),
    _topic("min.cleanable.dirty.ratio", fraction(0.0, 1.0), "0.5", "compaction trigger",
           "log.cleaner.min.cleanable.ratio"),
    _topic("min.compaction.lag.ms", integer(0, LONG_MAX), "0", "records younger stay uncompacted",
           "log.cleaner.min.compaction.lag.ms"),
    _topic("local.retention.bytes", integer(-2, LONG_MAX), "-2",
           "with remote.storage.enable: local size before uploaded segments are deleted locally; "
           "-2 = retention.bytes (docs/tiered-storage.md)", "log.local.retention.bytes"),
    _topic("local.retention.ms", integer(-2, LONG_MAX), "-2",
           "with remote.storage.enable: age before uploaded segments are deleted locally; -2 = retention.ms",
           "log.local.retention.ms"),
    _topic("min.insync.replicas", integer(1, INT_MAX), "1", "ISR size needed for acks=all", "min.insync.replicas"),
    _topic("preallocate", BOOLEAN, "false", "preallocate segment files", "log.preallocate"),
    # Kafka 3.9 has no broker-wide default for it (remote.log.storage.system.enable is the broker's switch)
    _topic("remote.storage.enable", BOOLEAN, "false",
           "tiered storage (KIP-405): copy rolled segments to the object store; refused on compacted topics"),
    _topic("retention.bytes", integer(-1, LONG_MAX), "-1",
           "partition size before deleting old segments; -1 = no limit", "log.retention.bytes"),
    _topic("retention.ms", integer(-1, LONG_MAX), "604800000",
           "age before deleting old segments (default 7 days); -1 = no limit",
           Synonym("log.retention.ms", reports_default=False),
           Synonym("log.retention.minutes", _MINUTE_MS, reports_default=False),
           Synonym("log.retention.hours", _HOUR_MS, reports_default=False)),
    _topic("segment.bytes", integer(14, INT_MAX), "1073741824", "segment file size before rolling",
           "log.segment.bytes"),
    _topic("segment.index.bytes", integer(8, INT_MAX), "10485760", "maximum size of an index file",
           "log.index.size.max.bytes"),
    _topic("segment.jitter.ms", integer(0, LONG_MAX), "0", "random jitter subtracted from segment.ms",
           Synonym("log.roll.jitter.ms", reports_default=False),
           Synonym("log.roll.jitter.hours", _HOUR_MS, reports_default=False)),
    _topic("segment.ms", integer(1, LONG_MAX), "604800000", "segment age before rolling",
           Synonym("log.roll.ms", reports_default=False), Synonym("log.roll.hours", _HOUR_MS, reports_default=False)),
    _topic("unclean.leader.election.enable", BOOLEAN, "false", "elect out-of-sync replicas as a last resort",
           "unclean.leader.election.enable"),
)

# Kafka 3.9's topic configs (LogConfig) that Odradek does not serve: setting one is refused as
# unknown, but deleting one (back to its default, where it always is here) succeeds as on Kafka,
# because MirrorMaker 2's topic-config sync sends a DELETE for every source config at its default.
KAFKA_ONLY_TOPIC_CONFIGS = frozenset({
    "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
    "message.downconversion.enable", "message.format.version",
    "remote.log.copy.disable", "remote.log.delete.on.disable"})

# Kafka broker key -> (topic key, its synonym entry): the spellings a broker-wide default takes.
TOPIC_SYNONYMS: dict[str, tuple[ConfigKey, Synonym]] = {
    s.name: (key, s) for key in TOPIC_CONFIGS.values() for s in key.synonyms}


def invalid(name: str, value: object, reason: object) -> KafkaError:
    """Kafka's INVALID_CONFIG message for a bad value."""
    return KafkaError(ErrorCode.invalid_config, f"Invalid value {value} for configuration {name}: {reason}")


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
            raise invalid(name, value, e) from None
        out[name] = str(value)
    check_remote_storage(out)
    return out


def check_remote_storage(overrides: Mapping[str, str], defaults: Mapping[str, str] | None = None) -> None:
    """Kafka 3.9's checks of a topic with remote.storage.enable (LogConfig's validation of the
    topic's overrides over the defaults), as INVALID_CONFIG with Kafka's messages: no compaction,
    and local retention within the topic's retention (-2: the same; -1 only if that is -1 too)."""
    values = effective(overrides, defaults)
    if not values["remote.storage.enable"]:
        return
    if "compact" in str(values["cleanup.policy"]).split(","):
        raise KafkaError(ErrorCode.invalid_config, "Remote log storage is unsupported for the compacted topics")
    for local, total in (("local.retention.bytes", "retention.bytes"), ("local.retention.ms", "retention.ms")):
        limit, value = values[total], values[local]
        if limit == -1 or value == -2:
            continue
        if value == -1:
            raise invalid(local, value, f"Value must not be -1 as {total} value is set as {limit}.")
        if value > limit:
            raise invalid(local, value, f"Value must not be more than {total} property value: {limit}")


def topic_defaults(settings: Mapping[str, str]) -> dict[str, str]:
    """Broker-wide topic defaults, given by topic key or Kafka broker synonym, -> validated
    ``{topic key: value}`` in the topic key's unit (``log.retention.hours=1`` -> ``retention.ms``)."""
    out: dict[str, str] = {}
    for name, value in settings.items():
        if name in TOPIC_CONFIGS and not TOPIC_CONFIGS[name].synonyms:
            raise KafkaError(ErrorCode.invalid_config, f"{name} is a topic config with no broker-wide default")
        if name in TOPIC_SYNONYMS and name not in TOPIC_CONFIGS:
            key, synonym = TOPIC_SYNONYMS[name]
            try:
                out[key.name] = synonym.to_topic_value(value)
            except ValueError as e:
                raise invalid(name, value, e) from None
        else:
            out[name] = value
    return validate_topic_configs(out)


def effective(overrides: Mapping[str, str], defaults: Mapping[str, str] | None = None) -> dict[str, object]:
    """Typed settings of a topic: registry defaults, then broker defaults, then overrides."""
    merged = {k: v.default for k, v in TOPIC_CONFIGS.items()}
    merged.update(defaults or {})
    merged.update(overrides)
    return {k: TOPIC_CONFIGS[k].parse(v) if k in TOPIC_CONFIGS else v for k, v in merged.items()}


TIMESTAMP_DIFFERENCE = "message.timestamp.difference.max.ms"
TIMESTAMP_LIMITS = ("message.timestamp.before.max.ms", "message.timestamp.after.max.ms")


def timestamp_limit(limit: int, difference: int) -> int:
    """Kafka 3.9's before or after limit in force: the deprecated difference.max.ms stands in
    for one left at its default, Long.MAX (LogConfig.getMessageTimestampBeforeMaxMs)."""
    return limit if limit != LONG_MAX else difference


def broker_timestamp_limits(defaults: Mapping[str, str]) -> dict[str, str]:
    """Broker-wide topic defaults with Kafka's derived before/after limits: a broker's
    ``log.message.timestamp.difference.max.ms`` fills a ``log.message.timestamp.before.max.ms`` /
    ``after.max.ms`` left at Long.MAX, and topics inherit the result (KafkaConfig's
    logMessageTimestampBeforeMaxMs, extractLogConfigMap)."""
    out = dict(defaults)
    if (difference := defaults.get(TIMESTAMP_DIFFERENCE)) is not None:
        for name in TIMESTAMP_LIMITS:
            out[name] = str(timestamp_limit(int(defaults.get(name, LONG_MAX)), int(difference)))
    return out


def typed_default(name: str) -> Any:
    """The typed registry default of topic key ``name`` (for typed settings objects)."""
    return TOPIC_CONFIGS[name].typed_default
