"""The broker's one door to ZooKeeper: the only package under ``odradek.broker`` that imports
kazoo (``tests/security/test_zk_door.py`` holds the rule).

- ``session``: the broker's session (``BrokerSession``): registration under ``/brokers/ids``,
  the watch on ``/controller``, log directory events;
- ``znodes``: ``Znodes``, the small primitives every store is written over (get, children,
  compare-and-set, create, delete, watches), kazoo's exceptions mapped to a lost race (False)
  or an absent znode (None), as Patroni's store does;
- ``configs``: ``EntityConfigs``, Kafka's ``/config/<type>/<entity>`` read and written (with the
  change notification), the port handlers use for config reads.

Everything else (the ACL, SCRAM and quota stores, the config change listener) is written over
these ports; what each znode holds is ``odradek.cluster.zk_data``'s.
"""
