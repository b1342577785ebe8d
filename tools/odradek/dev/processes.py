"""Child processes of a local cluster, started and stopped by PID.

A PID is recorded with its start time (``/proc/<pid>/stat`` field 22), so a later
``stop`` never signals an unrelated process that reused the number. Ports of servers that do
not report their own (``odradek.ports``): ``listening_ports`` reads what one listens on,
``candidate_port`` picks one to try for a server that cannot bind port 0.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

_CANDIDATES = 12000   # how far below the ephemeral range candidate ports go


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


def listening_ports(pid: int) -> set[int]:
    """The TCP ports ``pid`` listens on (its own sockets, from ``/proc``): how the tooling learns
    what a server that cannot report (ZooKeeper, Prometheus) bound, and that it is that server
    (not another process) which answers on a port. Empty once the process is gone."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
        rows = [line.split() for table in ("tcp", "tcp6")
                for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]]
    except OSError:   # gone: not listening
        return set()
    inodes = {link[len("socket:["):-1] for link in map(_link, (f"/proc/{pid}/fd/{fd}" for fd in fds))
              if link.startswith("socket:[")}
    # fields: sl, local address:port (hex), remote, state (0A = LISTEN), ..., inode (10th)
    return {int(r[1].rsplit(":", 1)[1], 16) for r in rows if r[3] == "0A" and r[9] in inodes}


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:   # a descriptor closed since the listing
        return ""


def candidate_port() -> int:
    """A port to hand a server that cannot bind port 0 and report (ZooKeeper, Karapace), to be
    retried with another when it is taken: a random one below the kernel's ephemeral range, where
    no ``bind(0)`` or outgoing connection of another process lands, so that a taken one is rare
    and a restart on the same port finds it free."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return random.randrange(max(1024, low - _CANDIDATES), low)
