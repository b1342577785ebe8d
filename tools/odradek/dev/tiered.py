"""``odradek dev up --tiered``: the dev cluster's object store for tiered storage (KIP-405).

Starts S3Proxy (``odradek.dev.s3proxy``) under ``<data-dir>/s3proxy`` on a free loopback port
before the brokers, records its PID as the process ``s3proxy`` (so ``status``/``down``/``kill``
treat it as every other process of the cluster) and its endpoint, bucket and credentials as
``object_store`` in the cluster state (``odradek dev status --json`` prints them).

``broker_config`` turns that into the brokers' settings: ``remote.log.storage.system.enable``,
the store's ``rsm.config.*`` keys and a shared-credentials file (mode 0600) under the store's
directory, so that no secret is a broker key DescribeConfigs would show.
"""

from __future__ import annotations

import os
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


def broker_config(state: dict, task_interval_ms: int = 1000) -> list[str]:
    """The brokers' ``KEY=VALUE`` settings for the object store ``start`` recorded (a dev
    cluster's remote log manager runs every second, not Kafka's 30)."""
    store = state["object_store"]
    credentials = Path(state["data_dir"]) / NAME / "credentials"
    fd = os.open(credentials, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"[default]\naws_access_key_id = {store['access_key']}\n"
                f"aws_secret_access_key = {store['secret_key']}\n")
    return ["remote.log.storage.system.enable=true", f"remote.log.manager.task.interval.ms={task_interval_ms}",
            f"rsm.config.storage.s3.endpoint.url={store['endpoint']}",
            f"rsm.config.storage.s3.bucket.name={store['bucket']}",
            f"rsm.config.storage.aws.credentials.file={credentials}"]


def summary(state: dict) -> str:
    store = state.get("object_store")
    return f"  object store (S3): {store['endpoint']} bucket {store['bucket']}\n" if store else ""
