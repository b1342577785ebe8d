"""A command in a real terminal: a detached tmux session on a server socket of the test's own
(so no other tmux server is touched), read with ``tmux capture-pane -p``; on exit the command
and the tmux server are stopped by PID. tmux comes from Debian (``make test-tools`` runs
scripts/tmux.sh)."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Callable

from odradek.dev.waiting import wait_until
from tests.support.tools import tool_missing


class TmuxPane:
    def __init__(self, socket: Path, argv: list[str], width: int = 160, height: int = 60) -> None:
        self.tmux = shutil.which("tmux")
        if self.tmux is None:
            tool_missing("tmux is not installed (make test-tools runs scripts/tmux.sh)")
        self.socket, self.argv, self.size = socket, argv, (width, height)
        self.pids: list[int] = []

    def _run(self, *args: str) -> str:
        return subprocess.run([self.tmux, "-S", str(self.socket), *args], capture_output=True, text=True,
                              check=True, timeout=30, stdin=subprocess.DEVNULL).stdout

    def __enter__(self) -> "TmuxPane":
        width, height = self.size
        # exec: the pane's process is the command itself (its PID is the pane's)
        self._run("new-session", "-d", "-x", str(width), "-y", str(height), "exec " + shlex.join(self.argv))
        self.pids = [int(self._run("display-message", "-p", "#{pid}").strip()),
                     int(self._run("display-message", "-p", "#{pane_pid}").strip())]
        return self

    def text(self) -> str:
        return self._run("capture-pane", "-p")

    def wait_for(self, predicate: Callable[[str], object], what: str, timeout: float = 60) -> str:
        try:
            return wait_until(lambda: t if predicate(t := self.text()) else None, timeout, what, 0.5)
        except TimeoutError as e:
            raise AssertionError(f"{e}; the pane shows:\n{self.text()}") from None

    def __exit__(self, *_: object) -> None:
        server, command = self.pids
        for pid in (command, server):  # the command first: the session (and server) end with it
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for pid in (command, server):
            try:
                wait_until(lambda: not _alive(pid), 10, f"process {pid} to exit", 0.1)
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie child of ours would look alive: the tmux server is not our child (it daemonizes)
    return not Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z")
