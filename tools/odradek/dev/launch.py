"""Starting one process of the dev cluster and learning the ports it bound.

No port is chosen here and handed over (another process could bind it in between): each
server binds what its command says, 0 meaning "any", and reports the ports it bound in
``<data-dir>/ports/<name>.json`` (``odradek.ports``; the path goes in its environment).
``await_ports`` waits for that report, failing as soon as the process exits first, with the
error it logged (a taken port, a full disk). The caller then records the ports and rewrites
the process's command with them, so that a restart binds the same ones (and fails clearly if
one was taken meanwhile).
"""

from __future__ import annotations

import os
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from odradek import ports
from odradek.dev import processes


class StartFailed(RuntimeError):
    """A process exited (or went silent) before reporting its ports; the message says why."""


@dataclass(frozen=True)
class Launched:
    name: str
    proc: subprocess.Popen
    log: Path
    since: int   # where its log stood when it started

    def log_text(self) -> str:
        """What the process logged since it started."""
        with open(self.log, "rb") as f:
            f.seek(self.since)
            return f.read().decode(errors="replace")


def ports_path(data_dir: str | os.PathLike, name: str) -> Path:
    return Path(data_dir) / "ports" / f"{name}.json"


def start(state: dict, name: str) -> Launched:
    """Spawn ``state["commands"][name]``, recording it in ``state["processes"]``."""
    log_path = Path(state["data_dir"]) / "logs" / f"{name}.log"
    since = log_path.stat().st_size if log_path.exists() else 0
    report = ports_path(state["data_dir"], name)
    report.unlink(missing_ok=True)   # a previous run's ports are not this one's
    proc, rec = processes.spawn(name, state["commands"][name], log_path, env={**os.environ, ports.ENV: str(report)},
                                group=state.get("groups", {}).get(name))
    state["processes"][name] = rec.to_json()
    return Launched(name, proc, log_path, since)


def await_ports(state: dict, launched: Launched, timeout: float) -> dict[str, int]:
    """The ports ``launched`` reports, also recorded in ``state["ports"]``; ``StartFailed`` with
    its logged error when it exits first or stays silent past ``timeout``."""
    try:
        bound = ports.wait_for(ports_path(state["data_dir"], launched.name), timeout,
                               alive=lambda: launched.proc.poll() is None, what=launched.name)
    except ports.PortsNotReported as e:
        raise StartFailed(f"{e}: {failure(launched)}") from None
    state.setdefault("ports", {})[launched.name] = bound
    return bound


def failure(launched: Launched) -> str:
    """Why a process did not start: its last logged error (else its log's tail) and exit code."""
    text = launched.log_text()
    errors = [line for line in text.splitlines() if " ERROR " in line or " CRITICAL " in line]
    lines = text.strip().splitlines()
    last = lines[-1] if lines else ""   # an uncaught exception's own line (an OSError on bind)
    why = errors[-1] if errors else text.strip()[-500:]
    if last and last not in why:
        why = f"{why} ... {last}"
    code = launched.proc.poll()
    return why if code is None else f"exited with code {code}: {why}"


def preferred(port: int) -> int:
    """``port`` if nothing holds it now, else 0 (any): the user's fixed ports (9092, 8080) when
    free, as before. A process that finds it taken after all fails and says so."""
    if port == 0:
        return 0
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return 0
    return port
