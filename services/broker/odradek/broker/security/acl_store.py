"""ACLs in ZooKeeper, where Kafka's ZooKeeper mode (ZkAclStore, ZkAclChangeStore) keeps them,
and every broker's cache of them.

Layout (under the cluster's chroot):

- ``/kafka-acl/<ResourceType>/<name>``: the LITERAL bindings of one resource;
- ``/kafka-acl-extended/prefixed/<ResourceType>/<name>``: the PREFIXED ones;
  each znode ``{"version":1,"acls":[{"principal":..,"permissionType":"Allow","operation":"Read","host":"*"}]}``;
- ``/kafka-acl-changes/acl_changes_<seq>``: a LITERAL change, payload ``<RESOURCE_TYPE>:<name>``;
- ``/kafka-acl-extended-changes/acl_changes_<seq>``: any other, payload
  ``{"version":1,"resourceType":"TOPIC","name":..,"patternType":"PREFIXED"}``.

The broker that receives CreateAcls/DeleteAcls writes the resource znode itself
(read-modify-write on the znode version, retried on a concurrent change, so two brokers adding
to one resource both land) and then a change notification. Every broker watches both change
paths and re-reads the named resource: a change is enforced everywhere as fast as ZooKeeper
delivers a watch (milliseconds). Notifications older than 15 minutes are removed, as Kafka does.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from typing import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NoNodeError, NodeExistsError
from kazoo.recipe.watchers import ChildrenWatch

from odradek.broker.config_changes import purge_expired
from odradek.broker.security.acl import (SPECIFIC_TYPES, Entry, Pattern, PatternType, ResourceType,
                                         decode_entries, encode_entries)

log = logging.getLogger(__name__)

LITERAL_ROOT, PREFIXED_ROOT = "/kafka-acl", "/kafka-acl-extended/prefixed"
LITERAL_CHANGES, EXTENDED_CHANGES = "/kafka-acl-changes", "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"


def znode_path(p: Pattern) -> str:
    root = LITERAL_ROOT if p.pattern == PatternType.LITERAL else PREFIXED_ROOT
    return f"{root}/{p.type.zk_name}/{p.name}"


def change_payload(p: Pattern) -> tuple[str, bytes]:
    """(change path, payload) of Kafka's notification for a change of ``p``."""
    if p.pattern == PatternType.LITERAL:
        return LITERAL_CHANGES, f"{p.type.name}:{p.name}".encode()
    return EXTENDED_CHANGES, json.dumps({"version": 1, "resourceType": p.type.name, "name": p.name,
                                         "patternType": p.pattern.name}).encode()


def parse_change(path: str, data: bytes) -> Pattern:
    if path == LITERAL_CHANGES:
        kind, _, name = data.decode().partition(":")
        return Pattern(ResourceType[kind.upper()], name, PatternType.LITERAL)
    doc = json.loads(data)
    return Pattern(ResourceType[doc["resourceType"].upper()], doc["name"], PatternType[doc["patternType"].upper()])


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
    def __init__(self, zk: Callable[[], KazooClient | None]) -> None:
        self._zk = zk
        self.snapshot = AclSnapshot()
        self._seen: dict[str, int] = {}   # change path -> highest sequence number processed
        self._lock = threading.Lock()     # cache updates come from kazoo's thread and request threads

    # -- loading and watching ------------------------------------------------------------------
    def start(self) -> None:
        """Load every binding, then follow both change paths (call once the session is up)."""
        zk = self._zk()
        for path in (LITERAL_CHANGES, EXTENDED_CHANGES):
            zk.ensure_path(path)
            self._seen[path] = max((self._seq(c) for c in zk.get_children(path)), default=-1)
        bindings = self.read_all(zk)
        with self._lock:
            self.snapshot = AclSnapshot(bindings)
        for path in (LITERAL_CHANGES, EXTENDED_CHANGES):
            ChildrenWatch(zk, path, lambda children, path=path: self._on_changes(path, children))
        log.info("ACLs loaded: %d resource patterns", len(bindings))

    @classmethod
    def read_all(cls, zk: KazooClient) -> dict[Pattern, frozenset[Entry]]:
        """Every binding in ZooKeeper, read once (no watch)."""
        bindings = {}
        for root, pattern in ((LITERAL_ROOT, PatternType.LITERAL), (PREFIXED_ROOT, PatternType.PREFIXED)):
            for rtype in SPECIFIC_TYPES:
                for name in cls._children(zk, f"{root}/{rtype.zk_name}"):
                    p = Pattern(rtype, name, pattern)
                    entries = cls._read(zk, p)[0]
                    if entries:
                        bindings[p] = entries
        return bindings

    @staticmethod
    def _children(zk: KazooClient, path: str) -> list[str]:
        try:
            return zk.get_children(path)
        except NoNodeError:
            return []

    @staticmethod
    def _seq(child: str) -> int:
        return int(child[len(CHANGE_PREFIX):]) if child.startswith(CHANGE_PREFIX) else -1

    def _on_changes(self, path: str, children: list[str]) -> None:
        zk = self._zk()
        if zk is None:
            return
        for child in sorted(children, key=self._seq):
            seq = self._seq(child)
            if seq <= self._seen.get(path, -1):
                continue
            self._seen[path] = seq
            try:
                data, stat = zk.get(f"{path}/{child}")
                self.reload(parse_change(path, data))
            except NoNodeError:
                continue
            except (ValueError, KeyError) as e:
                log.warning("ignoring unreadable ACL change %s/%s: %s", path, child, e)
        purge_expired(zk, path, children)

    def reload(self, p: Pattern) -> None:
        entries = self._read(self._zk(), p)[0]
        self._install(p, entries)

    def _install(self, p: Pattern, entries: frozenset[Entry]) -> None:
        with self._lock:
            self.snapshot = self.snapshot.with_binding(p, entries)

    # -- writing -------------------------------------------------------------------------------
    @staticmethod
    def _read(zk: KazooClient, p: Pattern) -> tuple[frozenset[Entry], int]:
        try:
            data, stat = zk.get(znode_path(p))
        except NoNodeError:
            return frozenset(), -1
        return decode_entries(data), stat.version

    def update(self, p: Pattern, change: Callable[[frozenset[Entry]], frozenset[Entry]]) -> frozenset[Entry]:
        """Read-modify-write of one resource's znode (retried on a concurrent change), then the
        change notification; returns the entries before the change."""
        zk = self._zk()
        while True:
            before, version = self._read(zk, p)
            after = change(before)
            if after == before:
                return before
            try:
                if version < 0:
                    zk.create(znode_path(p), encode_entries(after), makepath=True)
                elif after:
                    zk.set(znode_path(p), encode_entries(after), version=version)
                else:
                    zk.delete(znode_path(p), version=version)
                break
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
        path, payload = change_payload(p)
        zk.create(f"{path}/{CHANGE_PREFIX}", payload, sequence=True, makepath=True)
        self._install(p, after)
        return before
