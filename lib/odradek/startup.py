"""What a process's entry point does before importing its parts (the ``odradek`` command and
``python -m odradek.broker`` / ``.controller`` / ``.gateway``; never a test's own process).

``skip_dev_only_imports``: kio, on import, registers a hypothesis strategy for each of its types
when hypothesis is installed (a development environment, the test suite's: the ``test`` extra).
No process uses them, and they cost ~0.7 s of CPU at every start (importing the broker: 2.8 s
with, 1.9 s without, idle machine, 2026-11-30): every broker, controller and ``odradek dev``
command a test starts paid it. Images have no hypothesis (Dockerfile: no test extra)."""

from __future__ import annotations

import sys


def skip_dev_only_imports() -> None:
    """Make ``import hypothesis`` fail (kio then goes without) unless it is imported already."""
    sys.modules.setdefault("hypothesis", None)
