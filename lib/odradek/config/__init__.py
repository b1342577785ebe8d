"""The configuration registry: every key Odradek reads, stated once, as Apache Kafka has it.

Each key's name, type, default, validator, Kafka broker synonyms (with their unit scaling),
whether it is dynamic, and its one-line doc live in one ``ConfigKey``:

- ``keys``: ``ConfigKey``, ``Synonym`` and the value types;
- ``topic``: topic keys (``TOPIC_CONFIGS``), their validation and typed effective values;
- ``broker``: the broker's own keys, the group coordinator's, the split of a broker's
  ``KEY=VALUE`` settings, and the binding of keys to typed settings dataclasses;
- ``quotas``: the client quota keys (``QUOTA_CONFIGS``), kept in ZooKeeper per entity;
- ``describe``: what DescribeConfigs reports (values, sources, synonyms);
- ``reference``: the README's configuration tables, generated from the registry.

Users: the controller (validating topic configs), the broker (storage, CLI, DescribeConfigs,
group coordinator), the operator (``brokers.config`` and topic specs). Values travel as
strings, like Kafka's; a key's ``parse`` turns one into its typed value.
"""

from odradek.config.broker import (BROKER_CONFIGS, GROUP_CONFIGS, BrokerSettings, bound_values,
                                   parse_broker_settings, setting, settings_of)
from odradek.config.keys import INT_MAX, LONG_MAX, ConfigKey, ConfigType, Synonym
from odradek.config.topic import (TOPIC_CONFIGS, effective, topic_defaults, typed_default,
                                  validate_topic_configs)

__all__ = ["BROKER_CONFIGS", "GROUP_CONFIGS", "INT_MAX", "LONG_MAX", "TOPIC_CONFIGS", "BrokerSettings", "ConfigKey",
           "ConfigType", "Synonym", "bound_values", "effective", "parse_broker_settings", "setting", "settings_of",
           "topic_defaults", "typed_default", "validate_topic_configs"]
