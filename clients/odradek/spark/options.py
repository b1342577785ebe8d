"""Spark Kafka-source options resolved against the gateway, in the driver: which partitions,
and which offset range of each (pure planning logic, unit-tested without Spark)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

EARLIEST, LATEST = -2, -1


class OptionError(ValueError):
    pass


@dataclass(frozen=True)
class Range:
    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def select_topics(options: dict, topics: list[str]) -> dict[str, list[int] | None]:
    """{topic: partitions (None = all)} from exactly one of subscribe, subscribePattern, assign."""
    given = [k for k in ("subscribe", "subscribePattern", "assign") if options.get(k)]
    if len(given) != 1:
        raise OptionError("give exactly one of the options 'subscribe', 'subscribePattern' or 'assign'")
    if given[0] == "subscribe":
        return {t.strip(): None for t in options["subscribe"].split(",") if t.strip()}
    if given[0] == "subscribePattern":
        pattern = re.compile(options["subscribePattern"])
        return {t: None for t in topics if pattern.fullmatch(t)}
    try:
        assign = json.loads(options["assign"])
        return {t: [int(p) for p in ps] for t, ps in assign.items()}
    except (ValueError, AttributeError, TypeError) as e:
        raise OptionError(f"'assign' must be JSON like {{\"topicA\":[0,1]}}: {e}") from None


def _per_partition_json(options: dict, key: str) -> dict[str, dict[int, int]] | None:
    text = options.get(key)
    if text is None:
        return None
    try:
        return {t: {int(p): int(v) for p, v in ps.items()} for t, ps in json.loads(text).items()}
    except (ValueError, AttributeError, TypeError) as e:
        raise OptionError(f"'{key}' must be JSON like {{\"topicA\":{{\"0\":23}}}}: {e}") from None


def offset_spec(options: dict, which: str, default: str):
    """What the user asked for one end: ('offsets', "earliest"|"latest"|{t: {p: o}}) or
    ('timestamps', ts | {t: {p: ts}})."""
    if options.get(f"{which}OffsetsByTimestamp"):
        return "timestamps", _per_partition_json(options, f"{which}OffsetsByTimestamp")
    if options.get(f"{which}Timestamp"):
        return "timestamps", int(options[f"{which}Timestamp"])
    value = options.get(f"{which}Offsets", default)
    if value.strip() in ("earliest", "latest"):
        return "offsets", value.strip()
    return "offsets", _per_partition_json(options, f"{which}Offsets")


def resolve(spec, topic: str, partition: int, low: int, high: int, by_time, no_match: str = "latest") -> int:
    """One end of one partition as an offset; by_time(topic, partition, ts) -> offset | None.
    ``no_match`` is Spark's startingOffsetsByTimestampStrategy for a timestamp past the last
    record: "latest" (the end) or "error"."""
    kind, value = spec
    if kind == "timestamps":
        ts = value if isinstance(value, int) else value.get(topic, {}).get(partition)
        if ts is None:
            raise OptionError(f"no timestamp given for {topic}-{partition}")
        found = by_time(topic, partition, ts)
        if found is None and no_match == "error":
            raise OptionError(f"No offset matched from request of topic-partition {topic}-{partition} and "
                              f"timestamp {ts} (startingOffsetsByTimestampStrategy=latest starts at the end instead)")
        return high if found is None else found
    if value == "earliest":
        return low
    if value == "latest":
        return high
    offset = value.get(topic, {}).get(partition)
    if offset is None:
        raise OptionError(f"no offset given for {topic}-{partition}")
    return low if offset == EARLIEST else high if offset == LATEST else offset


def check_batch_ends(start_spec, end_spec) -> None:
    """As Spark's Kafka source: a batch query cannot start at latest nor end at earliest."""
    if start_spec == ("offsets", "latest") or _names(start_spec, LATEST):
        raise OptionError("starting offset can't be latest for batch queries on Kafka")
    if end_spec == ("offsets", "earliest") or _names(end_spec, EARLIEST):
        raise OptionError("ending offset can't be earliest for batch queries on Kafka")


def _names(spec, special: int) -> bool:
    kind, value = spec
    return kind == "offsets" and isinstance(value, dict) and any(
        o == special for ps in value.values() for o in ps.values())


def split(ranges: list[Range], min_partitions: int | None) -> list[Range]:
    """Kafka source's minPartitions: cut large ranges so there are at least that many pieces,
    each partition split in proportion to its size."""
    ranges = [r for r in ranges if r.size > 0]
    total = sum(r.size for r in ranges)
    if not min_partitions or min_partitions <= len(ranges) or total == 0:
        return ranges
    out = []
    for r in ranges:
        pieces = max(1, min(r.size, math.ceil(r.size * min_partitions / total)))
        step = math.ceil(r.size / pieces)
        out += [Range(r.topic, r.partition, s, min(s + step, r.end)) for s in range(r.start, r.end, step)]
    return out


# -- kafka.* client options -------------------------------------------------------------------------
# Reads are range reads and writes acks=all produces through the gateway: of the Kafka client
# settings Spark's source passes on, these have a meaning here.
KAFKA_OPTIONS = {
    "kafka.bootstrap.servers": "accepted for jobs ported from Spark's Kafka source; the gateway knows the brokers",
    "kafka.client.id": "sent as the User-Agent of the source's gateway requests",
    "kafka.isolation.level": "read_uncommitted (the default) or read_committed: offsets end at the last "
                             "stable offset and no record of an aborted or open transaction is read",
}


def check_kafka_options(options) -> None:
    """Refuse a ``kafka.*`` option that would silently change nothing (keys arrive lower-cased)."""
    for key in options:
        if not key.lower().startswith("kafka."):
            continue
        if key.lower() not in KAFKA_OPTIONS:
            raise OptionError(f"the option '{key}' is not supported: the source reaches the cluster through the "
                              f"gateway, so only {', '.join(sorted(KAFKA_OPTIONS))} apply (docs/spark.md)")
    isolation_level(options)


def isolation_level(options) -> str:
    """Spark's kafka.isolation.level: read_uncommitted (the default) or read_committed."""
    level = str(options.get("kafka.isolation.level", "read_uncommitted")).lower()
    if level not in ("read_uncommitted", "read_committed"):
        raise OptionError(f"kafka.isolation.level={level} is not an isolation level: read_uncommitted (the "
                          "default) or read_committed")
    return level


def client_id(options) -> str | None:
    return options.get("kafka.client.id")


# -- minOffsetsPerTrigger / maxTriggerDelay -------------------------------------------------------------
TIME_UNITS_MS = {"ms": 1, "s": 1000, "sec": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
DEFAULT_MAX_TRIGGER_DELAY = "15m"


def time_ms(text: str) -> int:
    """Spark's time strings ("500ms", "30s", "15m", "1h"; a bare number is ms)."""
    match = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", str(text).lower())
    if not match or (match.group(2) and match.group(2) not in TIME_UNITS_MS):
        raise OptionError(f"'{text}' is not a duration like 500ms, 30s, 15m or 1h")
    return int(match.group(1)) * TIME_UNITS_MS[match.group(2) or "ms"]


@dataclass
class TriggerDelay:
    """Spark Kafka source's minOffsetsPerTrigger: a micro-batch waits until this many new offsets
    (over every partition) or until maxTriggerDelay has passed since the last batch."""
    min_offsets: int
    max_delay_ms: int
    last_batch_ms: float = 0.0

    def delays(self, new_offsets: int, now_ms: float) -> bool:
        if now_ms - self.last_batch_ms >= self.max_delay_ms or new_offsets >= self.min_offsets:
            self.last_batch_ms = now_ms
            return False
        return True


def trigger_delay(options) -> TriggerDelay | None:
    minimum = options.get("minOffsetsPerTrigger")
    if not minimum:
        return None
    return TriggerDelay(int(minimum), time_ms(options.get("maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY)))
