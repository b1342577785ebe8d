"""What a test does when a tool it needs is missing, and how it stops a tool's process it started.

On a developer's machine a missing tool (Kafka's jars, the Kubernetes binaries, the e2e node)
skips the tests that need it, saying why. Under ``make test`` (``ODRADEK_REQUIRE_TOOLS=1``, what
CI runs) ``make test-tools`` has built them all, so a missing tool is a failure: a skip there
would hide it.
"""

from __future__ import annotations

import os
import subprocess

import pytest


def tool_missing(reason: str) -> None:
    """Skip, or fail when the run requires every tool (CI)."""
    if os.environ.get("ODRADEK_REQUIRE_TOOLS") == "1":
        pytest.fail(f"a required test tool is missing (ODRADEK_REQUIRE_TOOLS=1): {reason}", pytrace=False)
    pytest.skip(reason)


def stop_process(proc: subprocess.Popen, timeout: float = 30) -> None:
    """SIGTERM (the tool's orderly shutdown), SIGKILL after ``timeout`` s: by the PID we started."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
