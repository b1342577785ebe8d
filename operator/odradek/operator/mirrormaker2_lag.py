"""MirrorMaker 2's replication lag, pure: the offsets ``mirrormaker2_offsets`` reads made into an
OdradekMirrorMaker2's ``status.mirrors`` entry (docs/migration.md, "Status and lag").

**Lag** of a mirrored source partition: the source's log end offset minus the next offset
MirrorMaker copies, as ``kafka-consumer-groups.sh`` counts a group's LAG, with MirrorMaker's
committed source offsets as the group's. Kafka 3.9's ``MirrorSourceTask`` gives each record it
copies the source offset ``{"offset": <the record's offset>}`` under the source partition
``{"cluster": <source alias>, "topic": T, "partition": N}`` (``MirrorUtils.wrapOffset``,
``wrapPartition``); its Connect herder commits them (every ``offset.flush.interval.ms``) into its
offsets topic on the target, ``mm2-offsets.<source>.internal`` unless configured
(``MirrorMakerConfig.workerConfig``), keyed by Connect's JSON converter without schemas:
``["MirrorSourceConnector",{"cluster":"src","partition":0,"topic":"t"}]``. A task seeks to that
offset + 1 (``initializeConsumer``); a partition with none (or a negative one) starts at the log
start (its consumer's ``auto.offset.reset=earliest``), as does one whose next offset lies beyond
the log end (out of range). A null value (an offset reset) forgets the partition.

**The mirrored topics** are the ones ``MirrorSourceConnector.shouldReplicateTopic`` picks: matching
``topics`` and not ``topics.exclude`` (comma-separated Java regular expressions, whole-name
matches; Kafka's exclude default ``EXCLUDE_DEFAULT``) or a heartbeats topic, and neither internal
(``__*``, ``.*``, ``*.internal``, ``*-internal``) nor, under the default policy, a copy from the
target (``<target>.`` at any depth: ``isCycle``).

**Clients** (``librdkafka_settings``): a cluster's settings are MirrorMaker's own, the
``<alias>.`` keys of its ``mm2.properties``, with the files and ``${dir:<dir>:<key>}`` references
of its pod read from the Secrets mounted there, translated into librdkafka's: PEM material and
SASL PLAIN/SCRAM; anything else (a JKS truststore, GSSAPI, OAUTHBEARER, a file in the image) is
``LagUnavailable`` with reason ``Unsupported``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from odradek.operator.spec import MirrorMaker2Spec

SOURCE_CONNECTOR = "MirrorSourceConnector"
EXCLUDE_DEFAULT = r".*[\-\.]internal, .*\.replica, __.*"   # Kafka's DefaultTopicFilter.TOPICS_EXCLUDE_DEFAULT
LAGGING_TOPICS_SHOWN = 10
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z ]+)-----.*?-----END \1-----", re.S)

TopicPartition = tuple[str, int]


class LagUnavailable(Exception):
    """The lag could not be checked: ``reason`` for the LagChecked condition (``SourceUnreachable``,
    ``TargetUnreachable``, ``CredentialsMissing``, ``Unsupported``), the message says why."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


# -- what MirrorMaker copied ------------------------------------------------------------------

def offsets_topic(spec: MirrorMaker2Spec) -> str:
    """The herder's offsets topic: ``offset.storage.topic``, which wins over the target's
    ``<target>.offset.storage.topic`` as in ``MirrorMakerConfig.workerConfig``."""
    return (spec.config.get("offset.storage.topic") or spec.config.get(f"{spec.target_alias}.offset.storage.topic")
            or f"mm2-offsets.{spec.source.alias}.internal")


def _source_partition(key: bytes | None, alias: str) -> TopicPartition | None:
    try:
        connector, partition = json.loads(key or b"")
        if connector != SOURCE_CONNECTOR or partition.get("cluster") != alias:
            return None
        topic, number = partition["topic"], partition["partition"]
    except (ValueError, TypeError, AttributeError, KeyError):
        return None   # another connector's record, or not Connect's
    return (topic, number) if isinstance(topic, str) and type(number) is int else None


def copied_offsets(records: Iterable[tuple[bytes | None, bytes | None]], alias: str) -> dict[TopicPartition, int]:
    """The last offset MirrorMaker copied, per source partition of ``alias``, from the offsets
    topic's records (key, value) in their order."""
    out: dict[TopicPartition, int] = {}
    for key, value in records:
        tp = _source_partition(key, alias)
        if tp is None:
            continue
        try:
            offset = None if value is None else json.loads(value)["offset"]
        except (ValueError, TypeError, KeyError):
            continue
        if type(offset) is int:
            out[tp] = offset
        else:
            out.pop(tp, None)
    return out


# -- which topics are mirrored ----------------------------------------------------------------

def _pattern_list(patterns: str) -> re.Pattern | None:
    """Kafka's list of regular expressions (``MirrorUtils.compilePatternList``): empty matches nothing."""
    parts = [p.strip() for p in re.split(r"\s*,\s*", patterns.strip()) if p.strip()]
    return re.compile("|".join(parts)) if parts else None


@dataclass(frozen=True)
class TopicFilter:
    include: re.Pattern | None
    exclude: re.Pattern | None
    default_policy: bool
    target: str

    @classmethod
    def of(cls, spec: MirrorMaker2Spec) -> "TopicFilter":
        try:
            return cls(_pattern_list(spec.topics_pattern), _pattern_list(spec.topics_exclude_pattern or EXCLUDE_DEFAULT),
                       spec.replication_policy == "default", spec.target_alias)
        except re.error as e:
            raise LagUnavailable("Unsupported", f"the topics patterns are not regular expressions Python reads "
                                                f"like Java: {e}") from None

    def __call__(self, topic: str) -> bool:
        chosen = bool(self.include and self.include.fullmatch(topic)) and not (
            self.exclude and self.exclude.fullmatch(topic))
        heartbeats = topic == "heartbeats" or topic.endswith(".heartbeats")
        internal = topic.startswith(("__", ".")) or topic.endswith((".internal", "-internal"))
        # a remote topic's sources are its dot-separated prefixes (the identity policy names only
        # heartbeats so); one that is the target makes a cycle
        cycle = (self.default_policy or heartbeats) and self.target in topic.rstrip(".").split(".")[:-1]
        return (chosen or heartbeats) and not internal and not cycle


# -- the lag ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class SourcePartition:
    """A source partition's log start and end offsets."""
    start: int
    end: int


def partition_lag(source: SourcePartition, copied: int | None) -> int:
    """Records from the next offset MirrorMaker copies (after ``copied``) to the log end."""
    following = source.start if copied is None or copied < 0 else max(copied + 1, source.start)
    if following > source.end:   # out of range: MirrorMaker's consumer resets to the log start
        following = source.start
    return source.end - following


@dataclass(frozen=True)
class TopicLag:
    topic: str
    lag: int
    partitions_behind: int


@dataclass(frozen=True)
class MirrorLag:
    topics: int
    partitions: int
    lag: int
    partitions_behind: int
    max_partition_lag: int
    lagging: tuple[TopicLag, ...]   # every topic behind, the most behind first

    def summary(self) -> str:
        return (f"lag {self.lag} records, {self.partitions_behind} of {self.partitions} partitions behind "
                f"({self.topics} topics)")


def mirror_lag(source: Mapping[TopicPartition, SourcePartition], copied: Mapping[TopicPartition, int]) -> MirrorLag:
    """The lag over the mirrored partitions ``source`` (those MirrorMaker copies), given what it copied."""
    per_partition = {tp: partition_lag(offsets, copied.get(tp)) for tp, offsets in source.items()}
    topics: dict[str, list[int]] = {}
    for (topic, _), lag in per_partition.items():
        topics.setdefault(topic, []).append(lag)
    lagging = sorted((TopicLag(t, sum(lags), sum(1 for x in lags if x)) for t, lags in topics.items() if any(lags)),
                     key=lambda t: (-t.lag, t.topic))
    lags = per_partition.values()
    return MirrorLag(len(topics), len(per_partition), sum(lags), sum(1 for x in lags if x), max(lags, default=0),
                     tuple(lagging))


def status_entry(spec: MirrorMaker2Spec, checked: str, lag: MirrorLag | None) -> dict:
    """``status.mirrors[]``: the flow, when it was checked and, if it could be, its lag."""
    entry = {"source": spec.source.alias, "target": spec.target_alias, "lastChecked": checked}
    if lag is not None:
        entry |= {"topics": lag.topics, "partitions": lag.partitions, "lag": lag.lag,
                  "partitionsBehind": lag.partitions_behind, "maxPartitionLag": lag.max_partition_lag,
                  "laggingTopics": [{"topic": t.topic, "lag": t.lag, "partitionsBehind": t.partitions_behind}
                                    for t in lag.lagging[:LAGGING_TOPICS_SHOWN]]}
    return entry


# -- the clients' settings --------------------------------------------------------------------

def cluster_settings(properties: Mapping[str, str], alias: str) -> dict[str, str]:
    """A cluster's client settings in ``mm2.properties`` (its ``<alias>.`` keys, unprefixed)."""
    return {k[len(alias) + 1:]: v for k, v in properties.items() if k.startswith(f"{alias}.")}


def _resolved(value: str, read: Callable[[str], str | None]) -> str:
    def file(match: re.Match) -> str:
        content = read(f"{match.group(1)}/{match.group(2)}")
        if content is None:
            raise LagUnavailable("Unsupported", f"{match.group(0)} is not in a Secret MirrorMaker mounts")
        return content
    return re.sub(r"\$\{dir:([^:}]+):([^}]+)\}", file, value)


def _jaas(jaas: str) -> dict[str, str]:
    options = dict(re.findall(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"', jaas))
    if "username" not in options or "password" not in options:
        raise LagUnavailable("Unsupported", "sasl.jaas.config has no username and password options")
    return {f"sasl.{k}": re.sub(r"\\(.)", r"\1", options[k]) for k in ("username", "password")}


def _file(settings: Mapping[str, str], key: str, read: Callable[[str], str | None]) -> str | None:
    path = settings.get(key)
    if not path:
        return None
    content = read(path)
    if content is None:
        raise LagUnavailable("Unsupported", f"{key} {path} is a file of MirrorMaker's image, not of a Secret it "
                                            "mounts: the operator cannot read it")
    return content


def _pem(settings: Mapping[str, str], kind: str) -> None:
    if settings.get(f"ssl.{kind}.type", "JKS").upper() != "PEM":
        raise LagUnavailable("Unsupported", f"ssl.{kind}.type {settings.get(f'ssl.{kind}.type', 'JKS')}: the "
                                            "operator reads PEM only")


def _ssl(settings: Mapping[str, str], read: Callable[[str], str | None]) -> dict[str, str]:
    out = {"ssl.endpoint.identification.algorithm":
           "none" if settings.get("ssl.endpoint.identification.algorithm") == "" else "https"}
    ca = settings.get("ssl.truststore.certificates") or _file(settings, "ssl.truststore.location", read)
    if ca:
        _pem(settings, "truststore")
        out["ssl.ca.pem"] = ca
    else:
        out["ssl.ca.location"] = "probe"   # the system's CAs, as Java's default truststore
    keystore = _file(settings, "ssl.keystore.location", read)
    chain = settings.get("ssl.keystore.certificate.chain")
    if chain or keystore:
        _pem(settings, "keystore")
        blocks = [(m.group(1), m.group(0)) for m in PEM_BLOCK.finditer(keystore or "")]
        out["ssl.certificate.pem"] = chain or "\n".join(b for kind, b in blocks if kind == "CERTIFICATE")
        out["ssl.key.pem"] = settings.get("ssl.keystore.key") or "\n".join(b for kind, b in blocks if "KEY" in kind)
    if settings.get("ssl.key.password"):
        out["ssl.key.password"] = settings["ssl.key.password"]
    return out


def librdkafka_settings(java: Mapping[str, str], read: Callable[[str], str | None]) -> dict[str, str]:
    """librdkafka's settings for Kafka's Java client settings ``java``; ``read(path)``: the content of
    a file of MirrorMaker's pod that a mounted Secret holds (None: not there)."""
    settings = {k: _resolved(v, read) for k, v in java.items()}
    protocol = settings.get("security.protocol", "PLAINTEXT").upper()
    out = {"bootstrap.servers": settings["bootstrap.servers"], "security.protocol": protocol}
    if protocol.startswith("SASL_"):
        mechanism = settings.get("sasl.mechanism", "GSSAPI").upper()
        if mechanism not in SASL_MECHANISMS:
            raise LagUnavailable("Unsupported", f"sasl.mechanism {mechanism}: the operator logs in with "
                                                f"{', '.join(SASL_MECHANISMS)} only")
        out |= {"sasl.mechanism": mechanism, **_jaas(settings.get("sasl.jaas.config", ""))}
    if protocol.endswith("SSL"):
        out |= _ssl(settings, read)
    return out
