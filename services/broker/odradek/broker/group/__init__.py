"""The group coordinator: consumer groups (Kafka's classic protocol and KIP-848's) and committed offsets.

- ``records``: the ``__consumer_offsets`` key/value formats (Kafka's, byte for byte);
- ``model``: a group and its members in memory, states, results;
- ``membership``: the join/sync/heartbeat/leave state machine with its timers;
- ``consumer``, ``assignors``: KIP-848 consumer groups (ConsumerGroupHeartbeat) and the
  server-side assignors; ``consumer_records``, ``consumer_state``: their records in
  ``__consumer_offsets`` (Kafka 4.x's kinds 3-8) and a group to and from them;
- ``migration``, ``consumer_classic``, ``embedded``: mixed groups (KIP-848's online upgrade and
  downgrade): the conversions, classic members served by a consumer group, and the consumer's
  embedded Subscription/Assignment;
- ``config``: broker settings and group -> partition placement;
- ``loader``: replaying a ``__consumer_offsets`` partition into groups and offsets;
- ``coordinator``: leadership of offsets partitions, offsets, persistence, retention;
- ``offsets_topic``: creating ``__consumer_offsets``, writing to it, wiring the coordinator to
  the ReplicaManager's snapshots.
"""
