"""Development helpers: real local servers (ZooKeeper) for ``odradek dev`` and the tests."""
