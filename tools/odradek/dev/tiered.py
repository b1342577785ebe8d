"""``odradek dev up --tiered``: the dev cluster's object store for tiered storage (KIP-405).

Starts S3Proxy (``odradek.dev.s3proxy``) under ``<data-dir>/s3proxy`` on a free loopback port
before the brokers, records its PID as the process ``s3proxy`` (so ``status``/``down``/``kill``
treat it as every other process of the cluster) and its endpoint, bucket and credentials as
``object_store`` in the cluster state (``odradek dev status --json`` prints them).
"""

from __future__ import annotations

from pathlib import Path

from odradek.dev import processes, s3proxy
from odradek.dev.processes import ProcessRecord

NAME = "s3proxy"


def start(state: dict, timeout: float) -> None:
    """Start the object store of the cluster ``state`` describes and record it there."""
    directory = Path(state["data_dir"]) / NAME
    directory.mkdir(parents=True, exist_ok=True)
    server = s3proxy.S3ProxyServer(directory, timeout=timeout).start()
    state["processes"][NAME] = ProcessRecord(NAME, server.pid, processes.start_time(server.pid) or 0,
                                             str(directory / s3proxy.LOG_NAME)).to_json()
    state["object_store"] = {"endpoint": server.endpoint, "bucket": server.bucket,
                             "access_key": server.access_key, "secret_key": server.secret_key,
                             "data_dir": str(server.data_dir)}
    state.setdefault("ports", {})[NAME] = {"s3": server.port}


def summary(state: dict) -> str:
    store = state.get("object_store")
    return f"  object store (S3): {store['endpoint']} bucket {store['bucket']}\n" if store else ""
