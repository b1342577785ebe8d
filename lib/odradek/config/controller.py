"""The controller's own keys (Kafka's names where Kafka has the setting), given as
``odradek controller --config KEY=VALUE`` or the controller's flags.

The controller also takes the broker's ZooKeeper session keys (``zookeeper.session.timeout.ms``,
``zookeeper.connection.timeout.ms``), ``inter.broker.protocol.version`` and the cluster's security keys
(``odradek.config.cluster_security``): those are stated once, with the broker's. Kafka reads
the keys here on its brokers (whichever is controller); Odradek's controller is its own
process, so they are its settings. ``odradek.controller.config.ControllerConfig`` binds them.
"""

from __future__ import annotations

from odradek.config.keys import BOOLEAN, INT_MAX, POSITIVE, ConfigKey, fraction, integer, registry

NUM_PARTITIONS = "num.partitions"
DEFAULT_REPLICATION_FACTOR = "default.replication.factor"
AUTO_LEADER_REBALANCE = "auto.leader.rebalance.enable"
LEADER_IMBALANCE_CHECK_INTERVAL = "leader.imbalance.check.interval.seconds"
LEADER_IMBALANCE_PER_BROKER_PERCENTAGE = "leader.imbalance.per.broker.percentage"
RESYNC_INTERVAL = "controller.resync.interval.ms"
DELETION_PUSH_TIMEOUT = "controller.topic.deletion.push.timeout.ms"

CONTROLLER_CONFIGS: dict[str, ConfigKey] = registry(
    ConfigKey(NUM_PARTITIONS, integer(1, INT_MAX), "1", "partitions of a topic created without a count (-1)"),
    ConfigKey(DEFAULT_REPLICATION_FACTOR, integer(1, INT_MAX), "1",
              "replication factor of a topic created without one (-1)"),
    ConfigKey(AUTO_LEADER_REBALANCE, BOOLEAN, "true",
              "move leadership back to preferred replicas every leader.imbalance.check.interval.seconds, for "
              "brokers past leader.imbalance.per.broker.percentage"),
    # Kafka's is a whole number of seconds; fractions are accepted here (tests check in 0.5 s).
    ConfigKey(LEADER_IMBALANCE_CHECK_INTERVAL, POSITIVE, "300", "how often, in seconds, the rebalance checks"),
    ConfigKey(LEADER_IMBALANCE_PER_BROKER_PERCENTAGE, fraction(0.0, 100.0), "10",
              "rebalance a broker when more than this percentage of the partitions whose preferred replica "
              "it is are led by others"),
    # Not Kafka keys: Odradek's controller's own timings.
    ConfigKey(RESYNC_INTERVAL, integer(1, INT_MAX), "60000",
              "a full reload of ZooKeeper even without watch events (a safety net: each reads every "
              "partition's state; every 10 s kept an idle controller at ~20% of a core at 10,000 partitions)"),
    ConfigKey(DELETION_PUSH_TIMEOUT, integer(1, INT_MAX), "5000",
              "how long a topic deletion waits for every broker to take a snapshot without the topic "
              "before its znodes go"),
)
