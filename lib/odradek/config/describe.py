"""What DescribeConfigs reports for a key, from the registry: its value, the value's source,
and the synonym chain Kafka lists (the topic's own value, the broker's static value under its
Kafka broker name, then the default under the broker key Kafka names for it).

Pure functions over the registry and a broker's settings; the handler only encodes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Mapping

from odradek.config.broker import BROKER_CONFIGS, GROUP_CONFIGS
from odradek.config.keys import INT_MAX, ConfigKey, integer
from odradek.config.topic import TOPIC_CONFIGS

# broker.id is set with ``odradek broker --id``, not as a setting; DescribeConfigs shows it.
BROKER_ID = ConfigKey("broker.id", integer(0, INT_MAX), "-1", "this broker's id (odradek broker --id)")


class ConfigSource(IntEnum):
    """Kafka's DescribeConfigs ConfigSource codes (the ones Odradek reports)."""
    DYNAMIC_TOPIC_CONFIG = 1
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


@dataclass(frozen=True, slots=True)
class Described:
    name: str
    value: str
    source: ConfigSource
    key: ConfigKey
    synonyms: tuple[tuple[str, str, ConfigSource], ...] = ()

    @property
    def read_only(self) -> bool:
        return self.source == ConfigSource.STATIC_BROKER_CONFIG


def describe_topic(overrides: Mapping[str, str], defaults: Mapping[str, str]) -> list[Described]:
    """Every topic key: the topic's override, else the broker-wide default, else the registry's."""
    out = []
    for name, key in sorted(TOPIC_CONFIGS.items()):
        if name in overrides:
            value, source = overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG
        elif name in defaults:
            value, source = defaults[name], ConfigSource.STATIC_BROKER_CONFIG
        else:
            value, source = key.default, ConfigSource.DEFAULT_CONFIG
        out.append(Described(name, value, source, key, _synonyms(key, value, source, defaults)))
    return out


def _synonyms(key: ConfigKey, value: str, source: ConfigSource,
              defaults: Mapping[str, str]) -> tuple[tuple[str, str, ConfigSource], ...]:
    chain = [(key.name, value, source)] if source == ConfigSource.DYNAMIC_TOPIC_CONFIG else []
    if key.name in defaults:
        chain.append((key.broker_name, defaults[key.name], ConfigSource.STATIC_BROKER_CONFIG))
    if key.default_synonym is not None:
        chain.append((key.default_synonym, key.default, ConfigSource.DEFAULT_CONFIG))
    return tuple(chain)


def describe_broker(broker_id: int, broker: Mapping[str, str], group: Mapping[str, str],
                    topic_defaults: Mapping[str, str]) -> list[Described]:
    """A broker's static settings: its id, its own keys, the group keys it was given, and its
    topic defaults under their Kafka broker names (``log.retention.ms``...)."""
    static = {BROKER_ID.name: (str(broker_id), BROKER_ID)}
    static.update({n: (v, BROKER_CONFIGS[n]) for n, v in broker.items()})
    static.update({n: (v, GROUP_CONFIGS[n]) for n, v in group.items()})
    static.update({TOPIC_CONFIGS[n].broker_name: (v, TOPIC_CONFIGS[n]) for n, v in topic_defaults.items()})
    return [Described(n, v, ConfigSource.STATIC_BROKER_CONFIG, key) for n, (v, key) in sorted(static.items())]
