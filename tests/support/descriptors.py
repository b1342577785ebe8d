"""This process's open descriptors counted by what they refer to, not all of them: threads left
by earlier tests in a session (clients reconnecting, loggers) open and close their own meanwhile,
so a count of every descriptor is not a test's to assert."""

from __future__ import annotations

import os
from collections.abc import Iterator


def target(fd: int) -> str:
    """What ``fd`` refers to, as /proc names it: a path, or ``socket:[inode]``."""
    return os.readlink(f"/proc/self/fd/{fd}")


def descriptors_on(*targets: str | os.PathLike) -> int:
    """How many of this process's descriptors refer to any of ``targets``."""
    wanted = {os.fspath(t) for t in targets}
    return sum(t in wanted for t in _targets())


def descriptors_under(directory: str | os.PathLike) -> int:
    """How many of this process's descriptors refer to files under ``directory``."""
    prefix = os.fspath(directory).rstrip("/") + "/"
    return sum(t.startswith(prefix) for t in _targets())


def _targets() -> Iterator[str]:
    for name in os.listdir("/proc/self/fd"):
        try:
            yield target(int(name))
        except FileNotFoundError:   # closed between the listing and the read
            pass
