"""The broker's own keys and the group coordinator's keys (Kafka's names and defaults), the
split of a broker's ``KEY=VALUE`` settings into those and topic defaults, and the binding of
keys to the fields of typed settings objects.

A settings dataclass (the broker's ``BrokerConfig``, the coordinator's ``GroupConfig``) declares
a field with ``setting("key")``: its default and parser come from here, and ``bound_values``
/ ``settings_of`` convert between the dataclass and ``{key: string}``. The operator validates
``brokers.config`` with ``parse_broker_settings`` without importing the broker package.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Iterable, Mapping

from odradek.cluster import versions
from odradek.config.cluster_security import CLUSTER_SECURITY_CONFIGS
from odradek.config.keys import BOOLEAN, INT_MAX, LONG_MAX, PER_ADDRESS_COUNTS, ConfigKey, integer, one_of, optional, registry
from odradek.config.security import SECURITY_CONFIGS, is_listener_key
from odradek.config.tiered import TIERED_CONFIGS
from odradek.config.topic import invalid, topic_defaults
from odradek.config.transactions import TXN_CONFIGS
from odradek.errors import ErrorCode, KafkaError

RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
# Kafka's key and discipline (odradek.cluster.versions): the brokers' and the controllers' alike.
INTER_BROKER_PROTOCOL_VERSION = ConfigKey(
    "inter.broker.protocol.version", integer(versions.PREVIOUS, versions.CURRENT), str(versions.CURRENT),
    "control-plane protocol version this process announces and uses: the previous release's while a cluster "
    "rolls to this one, raised once every broker and controller runs it (docs/control-plane.md, Versions)")

BROKER_CONFIGS: dict[str, ConfigKey] = registry(
    INTER_BROKER_PROTOCOL_VERSION,
    ConfigKey("auto.create.topics.enable", BOOLEAN, "true",
              "create a topic the first time a client's Metadata request names it"),
    ConfigKey("socket.request.max.bytes", integer(1, INT_MAX), "104857600",
              "largest request frame a connection accepts; a larger one closes that connection"),
    # Kafka's default is 102400 (a consumer's 8 MiB fetch response then waits for the socket to
    # drain ~80 times); 4 MiB let the kernel queue a whole response at once, which halved what a
    # fast reader got and cost both sides more CPU per GB (docs/performance.md, issue 33)
    ConfigKey("socket.send.buffer.bytes", integer(-1, INT_MAX), "262144",
              "SO_SNDBUF of the connections the broker accepts (the kernel caps it at net.core.wmem_max); "
              "-1: the OS default (autotuned)"),
    # Kafka's default is -1 (unbounded); a finite one bounds the broker's memory under hostile
    # or bursty clients (docs/broker.md, "Request memory and connection limits").
    ConfigKey("queued.max.request.bytes", integer(-1, LONG_MAX), "104857600",
              "request bytes read and not yet handled, over all connections; a request that does not fit "
              "waits with its connection muted; -1: unbounded (Kafka's default)"),
    ConfigKey("max.connections", integer(0, INT_MAX), "2147483647",
              "connections the Kafka listener holds at once; beyond, new ones wait to be accepted", dynamic=True),
    ConfigKey("max.connections.per.ip", integer(0, INT_MAX), "2147483647",
              "connections one client address may hold; beyond, a new one is closed at once", dynamic=True),
    ConfigKey("max.connections.per.ip.overrides", PER_ADDRESS_COUNTS, "",
              "per-address exceptions to max.connections.per.ip, e.g. 10.0.0.7:500,gateway.local:200 "
              "(host names resolved when set)", dynamic=True),
    ConfigKey("max.connection.creation.rate", integer(0, INT_MAX), "2147483647",
              "new connections per second the broker accepts (over all listeners but the inter-broker one "
              "when there are others); beyond, accepting waits (KIP-612). listener.name.<l>.max.connection."
              "creation.rate limits one listener", dynamic=True),
    ConfigKey("connections.max.idle.ms", integer(-1, LONG_MAX), "600000",
              "a connection with no bytes moved and no request pending for this long is closed; -1: never"),
    ConfigKey("replica.lag.time.max.ms", integer(1, LONG_MAX), "30000",
              "a follower not caught up for this long leaves the ISR"),
    ConfigKey("max.incremental.fetch.session.cache.slots", integer(0, INT_MAX), "1000",
              "fetch sessions (KIP-227) the broker keeps for followers and consumers; beyond, a new one "
              "evicts a stale, smaller or consumer's session, or the fetcher keeps sending full requests"),
    ConfigKey("controlled.shutdown.max.retries", integer(0, INT_MAX), "3",
              "attempts to move leaderships away before a stopping broker (SIGTERM) exits"),
    ConfigKey("controlled.shutdown.retry.backoff.ms", integer(0, LONG_MAX), "5000",
              "time between the attempts of a controlled shutdown (from each attempt's start)"),
    ConfigKey("log.cleaner.priority", one_of("idle", "nice10"), "idle",
              "the cleaner process's priority: idle (SCHED_IDLE and the idle I/O class) or nice10 (docs/compaction.md)"),
    ConfigKey("zookeeper.session.timeout.ms", integer(1, INT_MAX), "18000",
              "ZooKeeper session timeout: how long a broker cut off from ZooKeeper (or dead) stays registered; "
              "also the controller's (docs/control-plane.md)"),
    ConfigKey("zookeeper.connection.timeout.ms", optional(integer(1, INT_MAX), "zookeeper.session.timeout.ms"), "",
              "how long start-up waits to connect to ZooKeeper"),
    # Not Kafka keys (Kafka exports JMX; Strimzi's JMX exporter serves it on 9404): Odradek's own
    # Prometheus endpoint, a plain-HTTP port of its own (docs/observability.md).
    ConfigKey("metrics.port", integer(-1, 65535), "-1",
              "port of the plain-HTTP Prometheus endpoint /metrics (on the internal API's address; "
              "0: any free port; -1: none; the chart uses 9404, as Strimzi)"),
    ConfigKey("metrics.partition.level.enabled", BOOLEAN, "true",
              "export per-partition series (log sizes and offsets, consumer lag per partition); "
              "false keeps only per-topic and per-broker ones, for very large clusters"),
    ConfigKey("quota.window.num", integer(1, INT_MAX), "11",
              "samples kept for client quota rates (docs/quotas.md)"),
    ConfigKey("quota.window.size.seconds", integer(1, INT_MAX), "1",
              "time span of each client quota sample (docs/quotas.md)"),
    # Replication throttles (KIP-73; docs/replication.md): per broker, dynamic, in bytes/s.
    ConfigKey("leader.replication.throttled.rate", integer(0, LONG_MAX), str(LONG_MAX),
              "bytes/s this broker as leader sends to out-of-ISR followers of the replicas listed in the "
              "topics' leader.replication.throttled.replicas (Kafka's default: unlimited)", dynamic=True),
    ConfigKey("follower.replication.throttled.rate", integer(0, LONG_MAX), str(LONG_MAX),
              "bytes/s this broker as an out-of-ISR follower fetches of the replicas listed in the topics' "
              "follower.replication.throttled.replicas (Kafka's default: unlimited)", dynamic=True),
    ConfigKey("replica.alter.log.dirs.io.max.bytes.per.second", integer(0, LONG_MAX), str(LONG_MAX),
              "Kafka's throttle of moves between a broker's log directories: accepted and cleared as Kafka's "
              "tools do, no effect (an Odradek broker has one log directory)", dynamic=True),
    ConfigKey("replication.quota.window.num", integer(1, INT_MAX), "11",
              "samples kept for the replication throttles' rates"),
    ConfigKey("replication.quota.window.size.seconds", integer(1, INT_MAX), "1",
              "time span of each replication throttle sample"),
    ConfigKey("replica.selector.class", optional(one_of(RACK_AWARE_SELECTOR), "the leader serves every fetch"), "",
              "how a partition's leader picks the replica a consumer should fetch from (KIP-392): unset, "
              "always the leader; RackAwareReplicaSelector, a replica in the consumer's client.rack (docs/racks.md)"),
    *SECURITY_CONFIGS.values(),
    *CLUSTER_SECURITY_CONFIGS.values(),
    *TIERED_CONFIGS.values(),  # tiered storage's (odradek.config.tiered)
)

# Kafka's broker quota configs (QuotaConfig.brokerQuotaConfigs): dynamic only, not KafkaConfig
# keys, so DescribeConfigs lists them only when set, with no DEFAULT_CONFIG synonym.
DYNAMIC_ONLY_KEYS = frozenset({"leader.replication.throttled.rate", "follower.replication.throttled.rate",
                               "replica.alter.log.dirs.io.max.bytes.per.second"})

GROUP_CONFIGS: dict[str, ConfigKey] = registry(
    ConfigKey("group.initial.rebalance.delay.ms", integer(0, INT_MAX), "3000",
              "how long a new group waits for more members before its first rebalance"),
    ConfigKey("group.min.session.timeout.ms", integer(0, INT_MAX), "6000", "smallest session timeout a member may ask"),
    ConfigKey("group.max.session.timeout.ms", integer(0, INT_MAX), "1800000", "largest session timeout a member may ask"),
    ConfigKey("offsets.topic.num.partitions", integer(1, INT_MAX), "50", "partitions of __consumer_offsets"),
    ConfigKey("offsets.topic.replication.factor", integer(1, 32767), "3",
              "replication factor of __consumer_offsets (created once this many brokers are live)"),
    ConfigKey("offsets.retention.minutes", integer(0, INT_MAX), "10080",
              "an empty group's committed offsets are dropped after this long"),
    ConfigKey("offsets.retention.check.interval.ms", integer(0, LONG_MAX), "600000",
              "how often expired offsets are looked for"),
    ConfigKey("group.consumer.session.timeout.ms", integer(1, INT_MAX), "45000",
              "a KIP-848 consumer group member is fenced after this long without a heartbeat"),
    ConfigKey("group.consumer.heartbeat.interval.ms", integer(1, INT_MAX), "5000",
              "how often KIP-848 consumer group members are told to heartbeat"),
    ConfigKey("group.consumer.max.size", integer(1, INT_MAX), str(INT_MAX), "most members of a KIP-848 consumer group"),
    ConfigKey("group.consumer.migration.policy", one_of("bidirectional", "upgrade", "downgrade", "disabled"),
              "bidirectional", "whether a classic group turns into a KIP-848 consumer group when a consumer-protocol "
              "member joins (upgrade) and back when the last one leaves (downgrade)"),
    ConfigKey("offset.metadata.max.bytes", integer(0, INT_MAX), "4096", "largest metadata string of a commit"),
    *TXN_CONFIGS.values(),  # the transaction coordinator's (odradek.config.transactions)
)

# The coordinators' topics' factors (Kafka's default 3): a broker creates a topic once that many
# brokers are live, so a cluster of fewer brokers must set them (Kafka's quickstart sets 1).
INTERNAL_TOPIC_FACTORS = ("offsets.topic.replication.factor", "transaction.state.log.replication.factor")


def small_cluster_settings(brokers: int, given: Iterable[str]) -> dict[str, str]:
    """The coordinators' topic factors a cluster of ``brokers`` (fewer than 3) gets when its
    settings (``given``: their keys) leave them out: every broker. Nothing for 3 or more."""
    given = set(given)
    return {key: str(brokers) for key in INTERNAL_TOPIC_FACTORS if 0 < brokers < 3 and key not in given}


_BOUND = "odradek.config"  # dataclass field metadata: (ConfigKey, scale)


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    """A broker's ``KEY=VALUE`` settings, validated and split by who consumes them."""
    broker: dict[str, str]          # BROKER_CONFIGS keys
    group: dict[str, str]           # GROUP_CONFIGS keys (group and transaction coordinators)
    topic_defaults: dict[str, str]  # topic keys (synonyms resolved, units converted)
    listener: dict[str, str] = field(default_factory=dict)  # listener.name.<l>.* keys, as given


def parse_broker_settings(settings: Mapping[str, str]) -> BrokerSettings:
    """Validate a broker's settings; raise INVALID_CONFIG (``KafkaError``) with Kafka's message.

    Accepted: the broker's own keys, the group coordinator's, topic keys and their Kafka broker
    synonyms (``log.retention.hours``...) as broker-wide topic defaults."""
    broker: dict[str, str] = {}
    group: dict[str, str] = {}
    rest: dict[str, str] = {}
    listener = {name: value for name, value in settings.items() if is_listener_key(name)}
    for name, value in settings.items():
        if name in listener:
            continue
        own = BROKER_CONFIGS.get(name) or GROUP_CONFIGS.get(name)
        if own is None:
            rest[name] = value
            continue
        _check(own, value)
        (broker if name in BROKER_CONFIGS else group)[name] = value
    return BrokerSettings(broker, group, topic_defaults(rest), listener)


def _check(key: ConfigKey, value: str) -> object:
    try:
        return key.parse(value)
    except ValueError as e:
        raise invalid(key.name, value, e) from None


def setting(name: str, scale: int = 1, keys: Mapping[str, ConfigKey] | None = None) -> Any:
    """A dataclass field holding broker or group key ``name``'s typed value (or, with ``keys``,
    that registry's key), times ``scale`` (``offsets.retention.minutes`` held in ms: 60,000),
    defaulting to the registry's default."""
    key = keys[name] if keys is not None else BROKER_CONFIGS.get(name) or GROUP_CONFIGS[name]
    default = key.typed_default
    return field(default=default * scale if scale != 1 else default, metadata={_BOUND: (key, scale)})


def _bindings(cls: type) -> dict[str, tuple[str, ConfigKey, int]]:
    return {f.metadata[_BOUND][0].name: (f.name, *f.metadata[_BOUND]) for f in fields(cls) if _BOUND in f.metadata}


def bound_values(cls: type, settings: Mapping[str, str]) -> dict[str, object]:
    """``{key: string}`` -> ``{field name: typed value}`` for the fields ``cls`` binds with
    ``setting``; a key ``cls`` does not bind, or a bad value, is INVALID_CONFIG."""
    bindings = _bindings(cls)
    out: dict[str, object] = {}
    for name, value in settings.items():
        if name not in bindings:
            raise KafkaError(ErrorCode.invalid_config, f"Unknown {cls.__name__} setting: {name}")
        attr, key, scale = bindings[name]
        typed = _check(key, value)
        out[attr] = typed * scale if scale != 1 else typed
    return out


def settings_of(obj: object) -> dict[str, str]:
    """A settings dataclass's bound fields as ``{key: string}`` (what DescribeConfigs shows)."""
    out = {}
    for name, (attr, key, scale) in _bindings(type(obj)).items():
        value = getattr(obj, attr)
        if value is None:  # an unset optional key: Kafka reports no value either
            continue
        out[name] = key.type.format(value // scale if scale != 1 else value)
    return out
