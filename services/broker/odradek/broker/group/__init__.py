"""The group coordinator: consumer groups and committed offsets (Kafka's classic protocol).

- ``records``: the ``__consumer_offsets`` key/value formats (Kafka's, byte for byte);
- ``model``: a group and its members in memory, states, results;
- ``membership``: the join/sync/heartbeat/leave state machine with its timers;
- ``config``: broker settings and group -> partition placement;
- ``loader``: replaying a ``__consumer_offsets`` partition into groups and offsets;
- ``coordinator``: leadership of offsets partitions, offsets, persistence, retention;
- ``offsets_topic``: creating ``__consumer_offsets``, writing to it, wiring the coordinator to
  the ReplicaManager's snapshots.
"""
