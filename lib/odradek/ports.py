"""Bound ports, reported by the process that bound them.

A server given port 0 binds any free port; whoever started it learns which from a small JSON
file the server writes once its sockets are bound. Choosing a free port first and handing it
over loses a race: another process can bind it in between (``address already in use``).

The file's path comes in the environment (``ODRADEK_PORTS_FILE``), so each entry point makes
one call, ``report(kafka=..., metrics=...)``, where it knows its bound ports; without the
variable the call does nothing. The file is written atomically (a temporary file renamed over
it), so a reader never sees half of it::

    {"pid": 4242, "ports": {"kafka": 40123, "internal": 40124, "metrics": 40125}}

``wait_for(path, timeout, alive)`` is the reader: it waits until the file appears, fails at
once when ``alive()`` turns false first (the server exited: e.g. its fixed port was taken) and
at the deadline otherwise. Not thread-safe per path: one writer, the server, once per start.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable

ENV = "ODRADEK_PORTS_FILE"


class PortsNotReported(RuntimeError):
    """The server exited, or the deadline passed, before it reported its ports."""


def report(**ports: int | None) -> None:
    """Write ``ports`` (names to bound ports; None ones left out) to ``$ODRADEK_PORTS_FILE``, if set."""
    path = os.environ.get(ENV)
    if path:
        write(Path(path), {name: port for name, port in ports.items() if port is not None})


def write(path: Path, ports: dict[str, int]) -> None:
    """Write the ports file atomically: a reader sees the whole file or none."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"pid": os.getpid(), "ports": {k: int(v) for k, v in ports.items()}}))
    os.replace(tmp, path)


def read(path: Path) -> dict[str, int] | None:
    """The reported ports, or None while there is no file."""
    try:
        return {k: int(v) for k, v in json.loads(path.read_text())["ports"].items()}
    except FileNotFoundError:
        return None


def wait_for(path: Path, timeout: float, alive: Callable[[], bool] = lambda: True,
             what: str = "the server", interval: float = 0.05) -> dict[str, int]:
    """The ports the server reports in ``path``; ``PortsNotReported`` if ``alive()`` turns false
    first or ``timeout`` seconds pass. Remove a previous run's file before starting the server."""
    deadline = time.monotonic() + timeout
    while True:
        ports = read(path)
        if ports is not None:
            return ports
        if not alive():
            raise PortsNotReported(f"{what} exited before reporting its ports")
        if time.monotonic() > deadline:
            raise PortsNotReported(f"{what} did not report its ports within {timeout:.0f}s")
        time.sleep(interval)
