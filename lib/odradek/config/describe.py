"""What DescribeConfigs reports for a key, from the registry: its value, the value's source,
and the synonym chain Kafka lists (the topic's own value, then the broker's layers under their
Kafka broker names: dynamic per broker, dynamic default, static, then the default).

Pure functions over the registry and a broker's settings; the handler only encodes them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import Mapping

from odradek.config.broker import BROKER_CONFIGS, DYNAMIC_ONLY_KEYS, GROUP_CONFIGS
from odradek.config.keys import INT_MAX, ConfigKey, integer
from odradek.config.dynamic import DYNAMIC_BROKER_KEYS, BrokerLayers
from odradek.config.topic import TIMESTAMP_LIMITS, TOPIC_CONFIGS, TOPIC_SYNONYMS, broker_timestamp_limits

# broker.id is set with ``odradek broker --id``, not as a setting; DescribeConfigs shows it.
BROKER_ID = ConfigKey("broker.id", integer(0, INT_MAX), "-1", "this broker's id (odradek broker --id)")


class ConfigSource(IntEnum):
    """Kafka's DescribeConfigs ConfigSource codes (the ones Odradek reports)."""
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


Synonyms = tuple[tuple[str, str | None, ConfigSource], ...]


@dataclass(frozen=True, slots=True)
class Described:
    name: str
    value: str | None
    source: ConfigSource
    key: ConfigKey
    synonyms: Synonyms = ()
    read_only: bool = False


def describe_topic(overrides: Mapping[str, str], defaults: Mapping[str, str] | BrokerLayers) -> list[Described]:
    """Every topic key: the topic's override, else the broker-wide default (dynamic for this
    broker, dynamic for the cluster, static), else the registry's; ``defaults`` are a broker's
    layers or its static topic defaults by topic key."""
    layers = defaults if isinstance(defaults, BrokerLayers) else BrokerLayers(-1, static_topic=dict(defaults))
    derived = broker_timestamp_limits(layers.topic_defaults())
    out = []
    for name, key in sorted(TOPIC_CONFIGS.items()):
        chain = _broker_chain(layers, key, [s.name for s in key.synonyms], topic_unit=True)
        if name in overrides:
            chain = ((name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG),) + chain
        value, source = (chain[0][1], chain[0][2]) if chain else (key.default, ConfigSource.DEFAULT_CONFIG)
        if name in TIMESTAMP_LIMITS and name not in overrides:
            value = derived.get(name, value)    # Kafka shows the limit its broker derived, under the same source
        out.append(Described(name, value, source, key, chain))
    return out


def _broker_chain(layers: BrokerLayers, key: ConfigKey, names: list[str], topic_unit: bool = False) -> Synonyms:
    """Kafka's configSynonyms: each of ``names`` in the dynamic per-broker layer, then the
    dynamic default, then the static settings, then the defaults; ``topic_unit``: static topic
    defaults and the default, as a topic reports them (in the topic key's unit, the default only
    under the synonym that reports it)."""
    static = layers.static_by_broker_name()
    chain: list[tuple[str, str | None, ConfigSource]] = []
    for layer, source in ((layers.dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                          (layers.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                          (static, ConfigSource.STATIC_BROKER_CONFIG)):
        chain += [(n, layer[n], source) for n in names if n in layer]
    if topic_unit:
        if key.default_synonym is not None:
            chain.append((key.default_synonym, key.default, ConfigSource.DEFAULT_CONFIG))
    else:
        chain += [(n, d, ConfigSource.DEFAULT_CONFIG) for n in names if (d := _default_of(key, n)) is not None]
    return tuple(chain)


def _default_of(key: ConfigKey, name: str) -> str | None:
    """The default Kafka gives broker key ``name``: a topic key's default sits on its last
    synonym, in that synonym's unit (``log.retention.hours=168``), or on a synonym that reports
    it; the others (``log.retention.ms``) have none."""
    if name in DYNAMIC_ONLY_KEYS:
        return None
    if name not in TOPIC_SYNONYMS:
        return key.default
    synonyms = key.synonyms
    synonym = next(s for s in synonyms if s.name == name)
    if synonym is synonyms[-1] or synonym.reports_default:
        return str(int(key.default) // synonym.scale) if synonym.scale != 1 else key.default
    return None


def _broker_keys(broker_id: int) -> dict[str, tuple[ConfigKey, list[str]]]:
    """Every key a broker describes, with the synonym names Kafka lists for it."""
    keys: dict[str, tuple[ConfigKey, list[str]]] = {BROKER_ID.name: (BROKER_ID, [BROKER_ID.name])}
    keys.update({n: (k, [n]) for n, k in {**BROKER_CONFIGS, **GROUP_CONFIGS}.items()})
    for key in TOPIC_CONFIGS.values():
        names = [s.name for s in key.synonyms]
        keys.update({n: (key, names) for n in names})
    return keys


def describe_broker(layers: BrokerLayers, per_broker: bool = True) -> list[Described]:
    """A broker's configs as Kafka describes them: for its id (``per_broker``), every key with
    its value now in force; for the cluster default (resource name ""), the keys set there."""
    static = {**layers.static_by_broker_name(), BROKER_ID.name: str(layers.broker_id)}
    layers = replace(layers, static=static)
    out = []
    for name, (key, names) in sorted(_broker_keys(layers.broker_id).items()):
        if not per_broker and name not in layers.dynamic_default:
            continue
        chain = _broker_chain(layers, key, names)
        if not per_broker:  # Kafka 3.9 lists only the default's own layer then (tests/compat)
            chain = tuple(c for c in chain if c[2] == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
        chain = tuple(itertools.dropwhile(lambda c: c[0] != name, chain))
        if not chain and name in DYNAMIC_ONLY_KEYS:
            continue
        value = next((v for n, v, _ in chain if n == name), None)
        source = chain[0][2] if chain else ConfigSource.DEFAULT_CONFIG
        out.append(Described(name, value, source, key, chain, read_only=name not in DYNAMIC_BROKER_KEYS))
    return out
