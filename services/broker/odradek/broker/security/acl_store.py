"""ACLs in ZooKeeper, where Kafka's ZooKeeper mode (ZkAclStore, ZkAclChangeStore) keeps them,
and every broker's cache of them.

The layout (``/kafka-acl``, ``/kafka-acl-extended/prefixed`` and their change notifications) is
``odradek.cluster.zk_data``'s ``ACL`` and ``ACL_CHANGE``; this module maps it to ``Pattern`` and
``Entry`` and keeps the cache, over the broker's ``Znodes``.

The broker that receives CreateAcls/DeleteAcls writes the resource znode itself
(read-modify-write on the znode version, retried on a concurrent change, so two brokers adding
to one resource both land) and then a change notification. Every broker watches both change
paths and re-reads the named resource: a change is enforced everywhere as fast as ZooKeeper
delivers a watch (milliseconds). Notifications older than 15 minutes are removed, as Kafka does.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Callable

from odradek.broker.security.acl import (SPECIFIC_TYPES, Entry, Pattern, PatternType, ResourceType,
                                         decode_entries, encode_entries)
from odradek.broker.zk.znodes import NoZooKeeper, Znodes
from odradek.cluster.zk_data import ACL, ACL_CHANGE

log = logging.getLogger(__name__)


def znode_path(p: Pattern) -> str:
    return ACL.path(p.type.zk_name, p.name, p.pattern == PatternType.PREFIXED)


def change_payload(p: Pattern) -> tuple[str, bytes]:
    """(change path, payload) of Kafka's notification for a change of ``p``."""
    return ACL_CHANGE.encode(p.type.name, p.name, p.pattern.name)


def parse_change(path: str, data: bytes) -> Pattern:
    kind, name, pattern = ACL_CHANGE.decode(path, data)
    return Pattern(ResourceType[kind], name, PatternType[pattern])


@dataclass(frozen=True)
class AclSnapshot:
    """All bindings, indexed for the authorizer; immutable, swapped whole on each change."""
    bindings: dict[Pattern, frozenset[Entry]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        prefixed: dict[ResourceType, list[tuple[str, frozenset[Entry]]]] = {}
        for p, entries in self.bindings.items():
            if p.pattern == PatternType.PREFIXED:
                prefixed.setdefault(p.type, []).append((p.name, entries))
        object.__setattr__(self, "_prefixed", prefixed)

    def matching(self, rtype: ResourceType, name: str) -> list[Entry]:
        """Every entry of a pattern that covers this resource (LITERAL name, ``*``, PREFIXED)."""
        out: list[Entry] = []
        for literal in (name, "*"):
            out.extend(self.bindings.get(Pattern(rtype, literal, PatternType.LITERAL), ()))
        for prefix, entries in self._prefixed.get(rtype, ()):  # type: ignore[attr-defined]
            if name.startswith(prefix):
                out.extend(entries)
        return out

    def with_binding(self, p: Pattern, entries: frozenset[Entry]) -> AclSnapshot:
        bindings = dict(self.bindings)
        if entries:
            bindings[p] = entries
        else:
            bindings.pop(p, None)
        return AclSnapshot(bindings)


class AclStore:
    def __init__(self, znodes: Znodes) -> None:
        self._znodes = znodes
        self.snapshot = AclSnapshot()
        self._seen: dict[str, int] = {}   # change path -> highest sequence number processed
        self._lock = threading.Lock()     # cache updates come from kazoo's thread and request threads

    # -- loading and watching ------------------------------------------------------------------
    def start(self) -> None:
        """Load every binding, then follow both change paths (call once the session is up)."""
        znodes = self._znodes
        for path in ACL_CHANGE.roots:
            znodes.ensure(path)
            self._seen[path] = max((ACL_CHANGE.sequence(c) for c in znodes.children(path)), default=-1)
        bindings = self.read_all()
        with self._lock:
            self.snapshot = AclSnapshot(bindings)
        for path in ACL_CHANGE.roots:
            znodes.watch_children(path, lambda children, path=path: self._on_changes(path, children))
        log.info("ACLs loaded: %d resource patterns", len(bindings))

    def read_all(self) -> dict[Pattern, frozenset[Entry]]:
        """Every binding in ZooKeeper, read once (no watch)."""
        bindings = {}
        for pattern in (PatternType.LITERAL, PatternType.PREFIXED):
            root = ACL.root(pattern == PatternType.PREFIXED)
            for rtype in SPECIFIC_TYPES:
                for name in self._znodes.children(f"{root}/{rtype.zk_name}"):
                    p = Pattern(rtype, name, pattern)
                    entries = self._read(p)[0]
                    if entries:
                        bindings[p] = entries
        return bindings

    def _on_changes(self, path: str, children: list[str]) -> None:
        try:
            self._follow(path, children)
        except NoZooKeeper:   # the session is closing
            return

    def _follow(self, path: str, children: list[str]) -> None:
        for child in sorted(children, key=ACL_CHANGE.sequence):
            seq = ACL_CHANGE.sequence(child)
            if seq <= self._seen.get(path, -1):
                continue
            self._seen[path] = seq
            found = self._znodes.get(f"{path}/{child}")
            if found is None:
                continue
            try:
                self.reload(parse_change(path, found[0]))
            except (ValueError, KeyError) as e:
                log.warning("ignoring unreadable ACL change %s/%s: %s", path, child, e)
        self._znodes.purge_expired(path, children)

    def reload(self, p: Pattern) -> None:
        self._install(p, self._read(p)[0])

    def _install(self, p: Pattern, entries: frozenset[Entry]) -> None:
        with self._lock:
            self.snapshot = self.snapshot.with_binding(p, entries)

    # -- writing -------------------------------------------------------------------------------
    def _read(self, p: Pattern) -> tuple[frozenset[Entry], int]:
        found = self._znodes.get(znode_path(p))
        if found is None:
            return frozenset(), -1
        return decode_entries(found[0]), found[1]

    def update(self, p: Pattern, change: Callable[[frozenset[Entry]], frozenset[Entry]]) -> frozenset[Entry]:
        """Read-modify-write of one resource's znode (retried on a concurrent change), then the
        change notification; returns the entries before the change."""
        znodes = self._znodes
        while True:
            before, version = self._read(p)
            after = change(before)
            if after == before:
                return before
            if version >= 0 and not after:
                written = znodes.delete(znode_path(p), version)
            else:
                written = znodes.put(znode_path(p), encode_entries(after), version)
            if written:
                break
        path, payload = change_payload(p)
        znodes.append(f"{path}/{ACL_CHANGE.child_prefix}", payload)
        self._install(p, after)
        return before
