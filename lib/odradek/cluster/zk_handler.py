"""kazoo's threading handler with every wait of a ZooKeeper connection bounded by ``attempt_s``
(``zk_session`` says why: kazoo gives a connect, and the wait for the server's answer to the
session's Connect request, the whole session timeout)."""

from __future__ import annotations

from kazoo.handlers.threading import SequentialThreadingHandler


class BoundedHandler(SequentialThreadingHandler):
    """Connects and waits on the socket for at most ``attempt_s`` at a time. kazoo's session loop
    already wakes every third of the session to ping, so only a stalled attempt is cut short."""

    def __init__(self, attempt_s: float) -> None:
        super().__init__()
        self.attempt_s = attempt_s

    def bound(self, timeout: float | None) -> float:
        return min(timeout or self.attempt_s, self.attempt_s)

    def create_connection(self, *args, timeout=None, **kwargs):
        return super().create_connection(*args, timeout=self.bound(timeout), **kwargs)

    def select(self, rlist, wlist, xlist, timeout=None):
        return super().select(rlist, wlist, xlist, self.bound(timeout))
