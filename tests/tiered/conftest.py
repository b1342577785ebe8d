"""Fixtures of the tiered storage tests.

- ``s3proxy`` (module): one real S3Proxy server (``odradek.dev.s3proxy``) with a filesystem
  backend under the module's temporary directory, on a free loopback port, stopped by PID at the
  end. Not installed: skipped on a developer's machine, a failure under ``make test``.
- ``rsm``: a RemoteStorageManager on that server (small checksum chunks, so that ranged reads
  cross several; one attempt per request, so that an outage shows at once).
"""

from __future__ import annotations

import pytest

from odradek.broker.storage.remote_storage import RemoteStorageConfig, RemoteStorageManager
from odradek.dev import s3proxy as s3proxy_tool
from tests.support.tools import tool_missing


@pytest.fixture(scope="module")
def s3proxy(tmp_path_factory):
    if s3proxy_tool.installed_jar() is None:
        tool_missing(f"S3Proxy is not installed in {s3proxy_tool.home()} (make test-deps)")
    server = s3proxy_tool.S3ProxyServer(tmp_path_factory.mktemp("s3proxy"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def rsm_config(server, **overrides) -> RemoteStorageConfig:
    settings = dict(endpoint_url=server.endpoint, bucket=server.bucket, access_key=server.access_key,
                    secret_key=server.secret_key, chunk_bytes=4096, max_attempts=1, connect_timeout_s=2.0)
    return RemoteStorageConfig(**(settings | overrides))


@pytest.fixture
def rsm(s3proxy) -> RemoteStorageManager:
    return RemoteStorageManager(rsm_config(s3proxy))
