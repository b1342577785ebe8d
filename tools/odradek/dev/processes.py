"""Child processes of a local cluster, started and stopped by PID.

A PID is recorded with its start time (``/proc/<pid>/stat`` field 22), so a later
``stop`` never signals an unrelated process that reused the number.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcessRecord:
    name: str
    pid: int
    start_time: int
    log: str

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "ProcessRecord":
        return cls(d["name"], int(d["pid"]), int(d["start_time"]), d["log"])


def start_time(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def spawn(name: str, argv: list[str], log_path: Path, env: dict | None = None,
          group: int | None = None) -> tuple[subprocess.Popen, ProcessRecord]:
    """Start ``argv`` in a session of its own, output to ``log_path``; ``group``: its group id
    (how a network fault's iptables rule singles it out, ``netns``)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env, group=group)
    return proc, ProcessRecord(name, proc.pid, start_time(proc.pid) or 0, str(log_path))


def alive(rec: ProcessRecord) -> bool:
    st = start_time(rec.pid)
    if st is None or st != rec.start_time:
        return False
    try:
        state = Path(f"/proc/{rec.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def stop(rec: ProcessRecord, sig: int = signal.SIGTERM, timeout: float = 20.0) -> None:
    """Signal the process (if it is still the recorded one) and wait until it is gone;
    SIGKILL when it outlives ``timeout``."""
    if not alive(rec):
        _reap(rec.pid)
        return
    os.kill(rec.pid, sig)
    deadline = time.monotonic() + timeout
    while alive(rec):
        _reap(rec.pid)
        if time.monotonic() > deadline:
            os.kill(rec.pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
        time.sleep(0.05)
    _reap(rec.pid)
