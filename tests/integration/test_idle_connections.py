"""Idle client connections (issue 21): 1,000 connections that did ApiVersions and then stay
silent cost the broker little memory (no receive buffer is held by an idle connection: each
used to keep 64 KiB; its request queue is a deque), it stays responsive meanwhile, and ``connections.max.idle.ms`` closes
them, as Kafka's does. The full-size figures (10,000 connections) are bench/idle_connections.py's
(docs/performance.md, "Idle connections")."""

from __future__ import annotations

import time

import pytest

from bench.idle_connections import open_idle, raise_nofile, round_trip_ms, still_open
from bench.side_by_side import memory_mb
from odradek.dev.harness import start_cluster, stop_cluster
from odradek.dev.waiting import wait_until

CONNECTIONS = 1000
IDLE_MS = 3000
REAPER_TICK_S = IDLE_MS / 4000          # the listener checks every quarter of connections.max.idle.ms
PER_CONNECTION_BOUND = 32 * 1024        # bytes of broker RSS per idle connection (measured ~5 KiB)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    if raise_nofile() < CONNECTIONS + 100:
        pytest.skip(f"RLIMIT_NOFILE too low for {CONNECTIONS} connections")
    cluster = start_cluster(tmp_path_factory.mktemp("idle") / "dev", brokers=1,
                            extra=("--config", f"connections.max.idle.ms={IDLE_MS}"))
    yield cluster
    stop_cluster(cluster)


def test_idle_connections_cost_little_and_are_closed_after_connections_max_idle_ms(broker):
    host, port = broker.brokers[1].rsplit(":", 1)
    pid = broker.pids["broker-1"]
    before = memory_mb(pid)["VmRSS"]
    socks = open_idle(host, int(port), CONNECTIONS)
    try:
        opened = time.monotonic()
        grown_mb = memory_mb(pid)["VmRSS"] - before
        assert grown_mb * 2**20 < CONNECTIONS * PER_CONNECTION_BOUND, f"RSS grew {grown_mb:.1f} MB"
        assert round_trip_ms(host, int(port)) < 2000, "the broker is slow to answer beside idle connections"
        assert still_open(socks[-1]), "closed before connections.max.idle.ms"
        wait_until(lambda: not any(still_open(s) for s in socks), IDLE_MS / 1000 + REAPER_TICK_S + 15,
                   "the broker to close every idle connection", 0.2)
        assert time.monotonic() - opened >= IDLE_MS / 1000 - 2, "closed well before connections.max.idle.ms"
    finally:
        for s in socks:
            s.close()
