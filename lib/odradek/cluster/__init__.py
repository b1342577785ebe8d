"""Cluster metadata shared by the controller, brokers and tools: ZooKeeper paths and
immutable metadata snapshots (the JSON the controller pushes to brokers)."""
