"""Dynamic broker configs as Kafka has them: a broker's config in four layers, which keys may
change at run time, and the validation of a change.

Layers, highest first (Kafka's DynamicBrokerConfig): the broker's own dynamic config
(``/config/brokers/<id>``, DYNAMIC_BROKER_CONFIG), the cluster-wide default
(``/config/brokers/<default>``, DYNAMIC_DEFAULT_BROKER_CONFIG), the settings the broker started
with (STATIC_BROKER_CONFIG), the registry's defaults (DEFAULT_CONFIG). Dynamic layers hold
Kafka broker names (``log.retention.ms``), never topic keys.

Dynamic keys are Kafka's: the first broker synonym of every topic key (``log.retention.ms``,
``log.segment.bytes``, ``min.insync.replicas``..., not ``log.retention.hours``: Kafka's
DynamicLogConfig) and the broker keys the registry marks ``dynamic`` (the connection limits:
DynamicConnectionQuota). Pure and immutable; the broker's ``DynamicBrokerConfig`` owns the
current layers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping

from odradek.config.broker import BROKER_CONFIGS, GROUP_CONFIGS
from odradek.config.keys import ConfigKey
from odradek.config.topic import TOPIC_CONFIGS, TOPIC_SYNONYMS
from odradek.errors import ErrorCode, KafkaError

# Kafka broker name -> topic key, for the topic keys' dynamic broker-wide defaults (a topic key
# with no broker synonym, such as the throttled replica lists, has none)
DYNAMIC_TOPIC_DEFAULTS: dict[str, ConfigKey] = {key.broker_name: key for key in TOPIC_CONFIGS.values() if key.synonyms}
DYNAMIC_BROKER_KEYS: frozenset[str] = frozenset(
    [*DYNAMIC_TOPIC_DEFAULTS, *(n for n, k in BROKER_CONFIGS.items() if k.dynamic)])


@dataclass(frozen=True)
class BrokerLayers:
    broker_id: int
    static: Mapping[str, str] = field(default_factory=dict)          # broker and group keys given at start
    static_topic: Mapping[str, str] = field(default_factory=dict)    # topic defaults given at start, by topic key
    dynamic_default: Mapping[str, str] = field(default_factory=dict)  # /config/brokers/<default>
    dynamic_broker: Mapping[str, str] = field(default_factory=dict)   # /config/brokers/<id>

    def with_dynamic(self, default: Mapping[str, str] | None = None,
                     broker: Mapping[str, str] | None = None) -> BrokerLayers:
        return replace(self, dynamic_default=dict(self.dynamic_default if default is None else default),
                       dynamic_broker=dict(self.dynamic_broker if broker is None else broker))

    def dynamic_value(self, name: str) -> str | None:
        """A dynamic key's value from the dynamic layers (the broker's own first), or None."""
        for layer in (self.dynamic_broker, self.dynamic_default):
            if name in layer:
                return layer[name]
        return None

    def topic_defaults(self) -> dict[str, str]:
        """The broker-wide topic defaults now in force, by topic key (what logs are built with)."""
        out = dict(self.static_topic)
        for broker_name, key in DYNAMIC_TOPIC_DEFAULTS.items():
            value = self.dynamic_value(broker_name)
            if value is not None:
                out[key.name] = value
        return out

    def broker_value(self, name: str) -> str:
        """A broker key's value now in force."""
        dynamic = self.dynamic_value(name) if name in DYNAMIC_BROKER_KEYS else None
        if dynamic is not None:
            return dynamic
        return self.static.get(name, (BROKER_CONFIGS.get(name) or GROUP_CONFIGS[name]).default)

    def static_by_broker_name(self) -> dict[str, str]:
        """The start-up settings under Kafka's broker names (topic defaults as ``log.*``)."""
        out = dict(self.static)
        out.update({TOPIC_CONFIGS[n].broker_name: v for n, v in self.static_topic.items()})
        return out


def _invalid(resource: str, reason: str) -> KafkaError:
    return KafkaError(ErrorCode.invalid_request, f"Invalid config value for resource {resource}: {reason}")


def resource_text(entity: str) -> str:
    """Kafka's ConfigResource toString, the way its error messages name a broker resource."""
    return f"ConfigResource(type=BROKER, name='{entity}')"


def validate_dynamic(changes: Mapping[str, str | None], entity: str) -> None:
    """INVALID_REQUEST, with Kafka's messages, for keys that cannot change at run time or values
    that do not parse (``None``: the key is being deleted)."""
    resource = resource_text(entity)
    static = sorted(n for n in changes if n not in DYNAMIC_BROKER_KEYS and _known(n))
    if static:
        raise _invalid(resource, f"Cannot update these configs dynamically: Set({', '.join(static)})")
    for name, value in changes.items():
        key = _key(name)
        if key is None or value is None:
            continue
        try:
            key.parse(value)
        except ValueError as e:
            raise _invalid(resource, f"Invalid value {value} for configuration {name}: {e}") from None


def _known(name: str) -> bool:
    return name in BROKER_CONFIGS or name in GROUP_CONFIGS or name in TOPIC_SYNONYMS or name == "broker.id"


def _key(name: str) -> ConfigKey | None:
    """The key that validates a broker name's values (a topic key for its ``log.*`` synonyms)."""
    if name in DYNAMIC_TOPIC_DEFAULTS:
        return DYNAMIC_TOPIC_DEFAULTS[name]
    return BROKER_CONFIGS.get(name) or GROUP_CONFIGS.get(name)
