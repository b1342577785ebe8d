"""``Znodes``: the ZooKeeper primitives the broker's stores are written over, on one kazoo session.

Two ways to fail, kept apart (as Patroni's store and the controller's ``zkstore``): a lost
race (a version moved, a znode created or removed meanwhile) returns False; an absent znode
reads as None / no children; an unreachable ZooKeeper raises ``NoZooKeeper`` (kazoo's own
errors otherwise pass through). Blocking calls: run them off the event loop (kazoo's watch
callbacks run on kazoo's thread).
"""

from __future__ import annotations

import time
from typing import Callable, Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

CHANGE_EXPIRY_S = 15 * 60   # Kafka removes change notifications older than this


class NoZooKeeper(Exception):
    """No session yet (the broker has not registered) or no longer."""


class Znodes:
    def __init__(self, client: Callable[[], KazooClient | None]) -> None:
        self._client = client

    def _zk(self) -> KazooClient:
        zk = self._client()
        if zk is None:
            raise NoZooKeeper("not connected to ZooKeeper")
        return zk

    @property
    def available(self) -> bool:
        return self._client() is not None

    def get(self, path: str) -> tuple[bytes, int] | None:
        """(data, version), or None without the znode."""
        try:
            data, stat = self._zk().get(path)
        except NoNodeError:
            return None
        return data, stat.version

    def children(self, path: str) -> list[str]:
        try:
            return sorted(self._zk().get_children(path))
        except NoNodeError:
            return []

    def ensure(self, path: str) -> None:
        self._zk().ensure_path(path)

    def put(self, path: str, data: bytes, version: int) -> bool:
        """Compare-and-set: create when ``version`` < 0, else set at ``version``; False if lost."""
        zk = self._zk()
        try:
            if version < 0:
                zk.create(path, data, makepath=True)
            else:
                zk.set(path, data, version=version)
            return True
        except (BadVersionError, NodeExistsError, NoNodeError):
            return False

    def delete(self, path: str, version: int = -1) -> bool:
        try:
            self._zk().delete(path, version=version)
            return True
        except (BadVersionError, NoNodeError):
            return False

    def append(self, prefix: str, data: bytes) -> str:
        """A persistent sequential child ``<prefix><seq>`` (its parents made); its path."""
        return self._zk().create(prefix, data, sequence=True, makepath=True)

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> None:
        """``callback(children)`` now and on every change (kazoo's thread)."""
        ChildrenWatch(self._zk(), path, callback)

    def watch_data(self, path: str, callback: Callable[[bytes | None], None]) -> None:
        """``callback(data or None)`` now and on every change (kazoo's thread)."""
        DataWatch(self._zk(), path, lambda data, _stat: callback(data))

    def purge_expired(self, path: str, children: Iterable[str], expiry_s: float = CHANGE_EXPIRY_S) -> None:
        """Remove the notifications under ``path`` older than ``expiry_s`` (Kafka: 15 minutes)."""
        zk = self._zk()
        cutoff = (time.time() - expiry_s) * 1000
        for child in children:
            try:
                if zk.exists(f"{path}/{child}").ctime < cutoff:
                    zk.delete(f"{path}/{child}")
            except (NoNodeError, AttributeError):
                continue
