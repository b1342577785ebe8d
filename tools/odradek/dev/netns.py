"""A dev cluster in a network namespace of its own, so that faults can cut its network.

``odradek dev up --netns`` creates a namespace named ``odradek-<8 hex>`` (its loopback up) and
runs itself, and so every process of the cluster, inside it; later ``odradek dev`` and
``odradek verify`` commands on that data directory re-run themselves inside it too
(``enter``), since the cluster's 127.0.0.1 is the namespace's own loopback. ``dev down``
deletes the namespace, and with it every iptables rule made in it. Each broker runs under a
group id of its own (``broker_gid``), which is how a rule in the namespace singles out its
packets (``-m owner --gid-owner``). Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and
iproute2's ``ip``, util-linux's ``nsenter``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

PREFIX = "odradek-"
ENV = "ODRADEK_NETNS"            # set by ``enter``: the namespace this process already runs in
GID_BASE = 1_900_000_000         # far above any group of a distribution; only rules of the namespace see it


def broker_gid(broker_id: int) -> int:
    return GID_BASE + broker_id


def path(name: str) -> Path:
    return Path("/run/netns") / name


def _ip(*argv: str) -> None:
    proc = subprocess.run(["ip", *argv], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")


def create() -> str:
    name = PREFIX + uuid.uuid4().hex[:8]
    _ip("netns", "add", name)
    try:
        _ip("-n", name, "link", "set", "lo", "up")
    except RuntimeError:
        delete(name)
        raise
    return name


def delete(name: str) -> None:
    """Delete a namespace this tooling created (only ``odradek-`` names)."""
    if name.startswith(PREFIX) and path(name).exists():
        _ip("netns", "del", name)


def inside(name: str) -> bool:
    try:
        return os.stat("/proc/self/ns/net").st_ino == os.stat(path(name)).st_ino
    except OSError:
        return False


def enter(name: str, command: list[str]) -> None:
    """Re-run ``odradek <command>`` inside namespace ``name``; returns only when already inside."""
    if inside(name):
        return
    if not path(name).exists():
        raise SystemExit(f"network namespace {name} is gone (the cluster was stopped?)")
    argv = [sys.executable, "-m", "odradek.cli", *command]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvpe("nsenter", ["nsenter", f"--net={path(name)}", "--", *argv], {**os.environ, ENV: name})


def iptables(*argv: str) -> None:
    """iptables in the namespace this process runs in (the cluster's, after ``enter``)."""
    proc = subprocess.run(["iptables", "-w", *argv], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise RuntimeError(f"iptables {' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
