"""The ``disk-full`` nemesis' small disk: one broker's data directory on a size-limited tmpfs
that the run mounts, fills, frees and removes.

``SmallDisk.setup`` stops the broker (SIGTERM), moves its data directory aside, mounts a tmpfs
of the data's size plus ``headroom`` bytes in its place (source name ``odradek-verify-<run>``,
so ``findmnt`` tells whose it is), copies the data in and starts the broker again. ``fill``
writes a filler file until the filesystem answers ENOSPC; ``free`` deletes it. Both first size
the tmpfs to its data plus ``headroom`` (``resize``), as the data grows during the run. ``teardown``
(also after a failed run) stops the broker, copies the data back to an ordinary directory,
unmounts the tmpfs and starts the broker again. Mounting needs root (CAP_SYS_ADMIN).
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess
from pathlib import Path

log = logging.getLogger("odradek.verify")

FILLER = ".odradek-verify-filler"
CHUNK = 1 << 20


class SmallDiskUnavailable(RuntimeError):
    """The tmpfs could not be mounted (not root, no mount(8))."""


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _mounted(path: Path) -> bool:
    return os.path.ismount(path)


class SmallDisk:
    def __init__(self, cluster, broker: str, run_id: str, headroom: int = 64 << 20) -> None:
        self.cluster, self.broker, self.headroom = cluster, broker, headroom
        self.source = f"odradek-verify-{run_id}"
        self.path = Path(cluster.data_dir).resolve() / broker
        self.aside = self.path.with_name(f"{broker}.{self.source}")
        self.mounted = False

    def _run(self, *argv: str) -> None:
        proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise SmallDiskUnavailable(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")

    def setup(self) -> None:
        """Put the broker's data directory on a tmpfs of its size plus ``headroom``."""
        self.cluster.dev("kill", self.broker, "--graceful")
        size = _du(self.path) + self.headroom
        self.path.rename(self.aside)
        self.path.mkdir()
        try:
            self._run("mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", self.source, str(self.path))
        except SmallDiskUnavailable:
            self.path.rmdir()
            self.aside.rename(self.path)
            self.cluster.start(self.broker)
            raise
        self.mounted = True
        shutil.copytree(self.aside, self.path, dirs_exist_ok=True, symlinks=True)
        shutil.rmtree(self.aside)
        log.info("disk-full: %s's data on a %d MiB tmpfs (%s)", self.broker, size >> 20, self.source)
        self.cluster.start(self.broker)

    def resize(self) -> None:
        """Size the tmpfs to what it holds plus ``headroom``: the broker's data keeps growing
        during a long run, and a disk it filled by itself would stay full after the filler is
        gone (a fixed size filled up after ~150 faults of a 200-fault run)."""
        st = os.statvfs(self.path)
        used = (st.f_blocks - st.f_bfree) * st.f_frsize
        self._run("mount", "-o", f"remount,size={used + self.headroom}", str(self.path))

    def fill(self) -> int:
        """Write the filler until ENOSPC; returns the bytes written."""
        self.resize()
        written = 0
        chunk = b"\0" * CHUNK
        with open(self.path / FILLER, "wb", buffering=0) as f:
            while True:
                try:
                    written += f.write(chunk)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    if len(chunk) == 4096:
                        return written
                    chunk = chunk[:4096]  # the last bytes too, a page at a time

    def free(self) -> None:
        (self.path / FILLER).unlink(missing_ok=True)
        if self.mounted:
            self.resize()

    def teardown(self) -> None:
        """Back to an ordinary directory with the same data; the broker running again."""
        if not self.mounted:
            return
        self.free()
        try:
            self.cluster.dev("kill", self.broker, "--graceful")
        except RuntimeError as e:
            log.warning("disk-full teardown: %s", e)
        shutil.copytree(self.path, self.aside, symlinks=True)
        try:
            self._run("umount", str(self.path))
        except SmallDiskUnavailable:
            self._run("umount", "-l", str(self.path))
        self.mounted = False
        self.path.rmdir()
        self.aside.rename(self.path)
        log.info("disk-full: %s's data back on the ordinary disk; tmpfs %s removed", self.broker, self.source)
        self.cluster.start(self.broker)
