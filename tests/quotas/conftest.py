"""One two-broker dev cluster per quota test module (module-scoped: its tests share it)."""

from __future__ import annotations

import pytest

from odradek.dev.harness import start_cluster, stop_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("quotas"), brokers=2)
    try:
        yield c
    finally:
        stop_cluster(c)
