"""Idle client connections to one broker (issue 21): RSS and idle CPU with N open TCP connections
that each did an ApiVersions round trip and then stay silent, as a fleet of idle clients would.

    .venv/bin/python -m bench.idle_connections --connections 10000 --idle-seconds 30

Starts a one-broker dev cluster (``odradek.dev.harness``) and measures the broker with no client
connection, then with ``--connections`` idle ones: RSS (``/proc/<pid>/status``), CPU over
``--idle-seconds`` (``/proc/<pid>/stat``), an ApiVersions round trip on a fresh connection (is the
broker still responsive?) and the load average (the machine is shared). With
``--idle-ms M`` the broker runs with ``connections.max.idle.ms=M`` and the run also reports how
long it took until the broker had closed every idle connection. Prints one JSON document.

The client side raises its own ``RLIMIT_NOFILE`` soft limit to the hard one (each connection is
a descriptor here too); the broker raises its own at start-up (``odradek.broker.cli``).
"""

from __future__ import annotations

import argparse
import json
import resource
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

from bench.scale import load
from bench.side_by_side import cpu_seconds, memory_mb
from odradek.dev.harness import Cluster, start_cluster, stop_cluster
from odradek.dev.waiting import wait_until
from odradek.protocol.api_keys import ApiKey

API_VERSIONS = ApiKey.API_VERSIONS
CLIENT_ID = b"idle-bench"
BATCH = 250  # connections opened (and their requests sent) before their answers are read


def api_versions_request(correlation_id: int) -> bytes:
    """ApiVersions v0 (header v1: api key, version, correlation id, client id; empty body)."""
    body = struct.pack(">hhih", API_VERSIONS, 0, correlation_id, len(CLIENT_ID)) + CLIENT_ID
    return struct.pack(">i", len(body)) + body


def read_response(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", _read_exactly(sock, 4))[0]
    return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def open_idle(host: str, port: int, count: int) -> list[socket.socket]:
    """``count`` connections, each past one ApiVersions round trip, left open and silent."""
    socks: list[socket.socket] = []
    while len(socks) < count:
        batch = [socket.create_connection((host, port), timeout=60) for _ in range(min(BATCH, count - len(socks)))]
        for i, s in enumerate(batch):
            s.sendall(api_versions_request(i))
        for s in batch:
            read_response(s)
        socks.extend(batch)
    return socks


def round_trip_ms(host: str, port: int) -> float:
    started = time.perf_counter()
    with socket.create_connection((host, port), timeout=30) as s:
        s.sendall(api_versions_request(1))
        read_response(s)
    return (time.perf_counter() - started) * 1000


def still_open(sock: socket.socket) -> bool:
    """False once the broker closed it (a read would return EOF at once)."""
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def measure(pid: int, host: str, port: int, seconds: float) -> dict:
    before, started = cpu_seconds([pid]), time.monotonic()
    time.sleep(seconds)
    cpu = 100 * (cpu_seconds([pid]) - before) / (time.monotonic() - started)
    mem = memory_mb(pid)
    return {"cpu_pct_of_a_core": round(cpu, 2), "rss_mb": mem.get("VmRSS"), "peak_rss_mb": mem.get("VmHWM"),
            "api_versions_ms": round(round_trip_ms(host, port), 2), "loadavg": load()}


def raise_nofile() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def run(cluster: Cluster, connections: int, idle_seconds: float, idle_ms: int | None) -> dict:
    host, port = cluster.brokers[1].rsplit(":", 1)
    pid = cluster.pids["broker-1"]
    result = {"connections": connections, "idle_seconds": idle_seconds, "no_connections": measure(
        pid, host, int(port), idle_seconds)}
    started = time.monotonic()
    socks = open_idle(host, int(port), connections)
    opened = time.monotonic()
    result["open_seconds"] = round(opened - started, 2)
    try:
        result["idle_connections"] = measure(pid, host, int(port), idle_seconds)
        if idle_ms is not None:  # from the last connection's ApiVersions answer to the last close
            wait_until(lambda: not any(still_open(s) for s in socks), 4 * idle_ms / 1000 + 60,
                       "the broker to close every idle connection", 0.5)
            result["all_closed_after_s"] = round(time.monotonic() - opened, 1)
            result["after_reaping"] = {"rss_mb": memory_mb(pid).get("VmRSS"), "loadavg": load()}
    finally:
        for s in socks:
            s.close()
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.idle_connections", description=__doc__.split("\n")[0])
    ap.add_argument("--connections", type=int, default=10000)
    ap.add_argument("--idle-seconds", type=float, default=30.0, help="CPU measuring window")
    ap.add_argument("--idle-ms", type=int, default=None, help="connections.max.idle.ms for the broker")
    ap.add_argument("--dir", type=Path, help="the dev cluster's data directory (default: a temporary one)")
    args = ap.parse_args(argv)
    nofile = raise_nofile()
    if nofile < args.connections + 100:
        sys.exit(f"RLIMIT_NOFILE is {nofile}: raise the hard limit (ulimit -Hn) above {args.connections + 100}")
    extra = ("--config", f"connections.max.idle.ms={args.idle_ms}") if args.idle_ms is not None else ()
    with tempfile.TemporaryDirectory(prefix="idle-bench-") as scratch:
        cluster = start_cluster(args.dir or Path(scratch) / "dev", brokers=1, extra=extra)
        try:
            result = run(cluster, args.connections, args.idle_seconds, args.idle_ms)
        finally:
            stop_cluster(cluster, strict=False)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
