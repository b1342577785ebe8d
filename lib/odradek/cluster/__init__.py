"""Cluster metadata shared by the controller, brokers and tools: ZooKeeper paths, immutable
metadata snapshots (the JSON the controller pushes to brokers) and the control-plane contract
(``control_plane``: routes and bodies of the internal HTTP API; ``control_plane_http``: its
transport)."""
