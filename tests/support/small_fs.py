"""A size-limited filesystem for full-disk tests: a tmpfs of a few MiB mounted on a directory
the test owns (root only), unmounted and removed afterwards even when the test fails.

``fill(directory)`` writes a ballast file until the filesystem answers ENOSPC; ``free``
removes it. Mounting needs CAP_SYS_ADMIN: without it the tests that need one are skipped,
saying so.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from pathlib import Path
from typing import Iterator

from tests.support.tools import tool_missing

BALLAST = "ballast"


@contextlib.contextmanager
def small_tmpfs(directory: Path, size_mib: int) -> Iterator[Path]:
    """``directory`` (created) as a tmpfs of ``size_mib`` MiB for the duration of the block."""
    directory.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(directory)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        tool_missing(f"cannot mount a tmpfs (needs root / CAP_SYS_ADMIN): {proc.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], capture_output=True, check=False)
        with contextlib.suppress(OSError):
            directory.rmdir()


def fill(directory: Path) -> int:
    """Write a ballast file into ``directory`` until ENOSPC; its size."""
    block, written = b"\0" * 65536, 0
    fd = os.open(directory / BALLAST, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while True:
            try:
                written += os.write(fd, block if written % 65536 == 0 else block[: 65536 - written % 65536])
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                break
        # whatever is left is smaller than a block: take it byte by byte
        while True:
            try:
                written += os.write(fd, b"\0")
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                return written
    finally:
        os.close(fd)


def free(directory: Path) -> None:
    (directory / BALLAST).unlink(missing_ok=True)
