"""Development tooling: a local cluster as processes (``odradek dev``: ``cluster``, ``processes``,
``zookeeper``), a handle on one for tests and benches (``harness``), and the one polling loop
with a deadline (``waiting.wait_until``)."""
