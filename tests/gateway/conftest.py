"""Fixtures of the gateway tests: ``gw``, an HTTP client on the root conftest's
``gw_cluster`` (a dev cluster with its gateway). Extra gateway processes (auth on, short
instance timeouts): ``tests.support.gateway.GatewayProcess``."""

from __future__ import annotations

import httpx
import pytest


@pytest.fixture
def gw(gw_cluster) -> httpx.Client:
    with httpx.Client(base_url=gw_cluster.gateway, timeout=60) as client:
        yield client
