"""The metadata-store interface the controller works against, and its snapshot types.

Owns: the immutable ``StoreSnapshot`` (every piece carries the store version that a later
compare-and-set passes back), the abstract ``MetadataStore``, and the project's own store
exceptions. Two ways to fail are kept apart, as Patroni does:

- a lost race (the znode exists already, its version moved) returns ``False``;
- an unreachable store (connection or session lost) raises ``StoreUnavailable``;
- a write fenced off because another controller was elected since raises ``ControllerMoved``;
- a write too large for one transaction raises ``TooLarge`` before anything is sent.

Implementations are synchronous (kazoo is threaded); the service calls them through
``asyncio.to_thread`` and receives watch callbacks on the store's own threads.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping, Sequence, TypeVar

from odradek.cluster.model import BrokerInfo, PartitionState, TopicMetadata
from odradek.cluster.zk_data import CONTROLLER

if TYPE_CHECKING:
    from .users import UserAdmin

T = TypeVar("T")


class StoreError(Exception):
    """Base of the store's own exceptions."""


class StoreUnavailable(StoreError):
    """The store cannot be reached (connection lost, session expired, timeout)."""


class ControllerMoved(StoreError):
    """A controller write was fenced: ``/controller_epoch`` moved past our election."""


class TooLarge(StoreError):
    """A write larger than the store takes at once (ZooKeeper refuses a request above its
    ``jute.maxbuffer`` by dropping the connection): refused before it is sent."""


@dataclass(frozen=True, slots=True)
class ControllerRecord:
    """The ``/controller`` znode: ``{"id", "epoch", "url"}``."""

    id: str
    epoch: int
    url: str

    def to_json(self) -> dict:
        return {"id": self.id, "epoch": self.epoch, "url": self.url}

    @classmethod
    def from_json(cls, d: Mapping) -> "ControllerRecord":
        info = CONTROLLER.from_doc(d)  # the one /controller decoder, the brokers' too
        return cls(info.id, info.epoch, info.url)


@dataclass(frozen=True, slots=True)
class TopicRecord:
    """One topic as stored: assignment, partition states and config overrides, with versions."""

    name: str
    topic_id: str
    assignment: Mapping[int, tuple[int, ...]]  # partition -> replica broker ids
    version: int  # of /brokers/topics/<t>
    states: Mapping[int, PartitionState]
    state_versions: Mapping[int, int]  # partition -> version of its state znode
    configs: Mapping[str, str] = field(default_factory=dict)
    config_version: int = -1  # -1: no /config/topics/<t> znode
    # partitions being reassigned (Kafka's adding_replicas / removing_replicas): the
    # assignment is then ORS + TRS; target = assignment - removing, origin = assignment - adding
    adding: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing: Mapping[int, tuple[int, ...]] = field(default_factory=dict)

    def reassigning(self, partition: int) -> bool:
        return bool(self.adding.get(partition) or self.removing.get(partition))

    def target(self, partition: int) -> tuple[int, ...]:
        gone = set(self.removing.get(partition, ()))
        return tuple(r for r in self.assignment[partition] if r not in gone)

    def origin(self, partition: int) -> tuple[int, ...]:
        new = set(self.adding.get(partition, ()))
        return tuple(r for r in self.assignment[partition] if r not in new)

    def complete(self) -> bool:
        """Every assigned partition has a state, partitions are 0..n-1 (what creation writes)."""
        return (bool(self.assignment) and set(self.assignment) == set(range(len(self.assignment)))
                and set(self.states) == set(self.assignment))

    def metadata(self) -> TopicMetadata:
        return TopicMetadata(self.name, self.topic_id,
                             tuple(self.states[p] for p in sorted(self.states)), dict(self.configs))


@dataclass(frozen=True, slots=True)
class StoreSnapshot:
    cluster_id: str
    controller: ControllerRecord | None
    brokers: tuple[BrokerInfo, ...]  # live, sorted by id; epoch = registration czxid
    topics: Mapping[str, TopicRecord]
    pending_deletions: frozenset[str]
    # /admin/reassign_partitions: (topic, partition) -> target replicas; its znode version
    # (-1: no znode)
    reassign_requests: Mapping[tuple[str, int], tuple[int, ...]] = field(default_factory=dict)
    reassign_version: int = -1
    # /log_dir_event_notification children: znode name -> (broker id, broker epoch it wrote in)
    log_dir_events: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    # /config/brokers/<default>: the cluster-wide dynamic broker defaults (Kafka's controller
    # follows the ones it uses, e.g. unclean.leader.election.enable)
    cluster_defaults: Mapping[str, str] = field(default_factory=dict)
    # /admin/maintenance children: brokers in maintenance mode (elected leader nowhere)
    maintenance: frozenset[int] = frozenset()

    def topic_config(self, record: TopicRecord, topic_key: str, broker_key: str, default: str) -> str:
        """A topic config as the controller applies it: the topic's override, else the
        cluster-wide dynamic default of its broker synonym, else ``default``."""
        return record.configs.get(topic_key, self.cluster_defaults.get(broker_key, default))

    @property
    def live_ids(self) -> tuple[int, ...]:
        return tuple(b.id for b in self.brokers)

    @property
    def offline_dir_ids(self) -> frozenset[int]:
        """Registered brokers whose log directory went offline in their current registration."""
        return frozenset(b.id for b in self.brokers if (b.id, b.epoch) in set(self.log_dir_events.values()))

    def broker(self, broker_id: int) -> BrokerInfo | None:
        return next((b for b in self.brokers if b.id == broker_id), None)


@dataclass(frozen=True, slots=True)
class TopicWrite:
    """One topic's share of a reassignment transaction: the full new assignment and
    adding/removing maps (CAS on the topic znode's version as read in ``topic``) and new
    partition states, each CAS on its state znode's version."""

    topic: TopicRecord
    assignment: Mapping[int, tuple[int, ...]]
    adding: Mapping[int, tuple[int, ...]]
    removing: Mapping[int, tuple[int, ...]]
    states: Mapping[int, tuple[PartitionState, int]]  # partition -> (new state, expected version)


Callback = Callable[[], None]


class MetadataStore(abc.ABC):
    """What the controller needs from ZooKeeper, in the controller's terms."""

    # --- lifecycle and session -------------------------------------------------------
    @abc.abstractmethod
    def start(self, timeout: float | None = None) -> None:
        """Connect within ``timeout`` s (None: the store's own connection timeout); create the
        chroot and the persistent roots; raise StoreUnavailable."""

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def on_session(self, callback: Callable[[str], None]) -> None:
        """Call ``callback("connected" | "suspended" | "lost")`` on session changes."""

    @abc.abstractmethod
    def cluster_id(self) -> str:
        """The cluster id, created once (random base64url UUID) and then read back."""

    # --- reads and watches ---------------------------------------------------------------
    @abc.abstractmethod
    def load(self) -> StoreSnapshot: ...

    @abc.abstractmethod
    def read_controller(self) -> ControllerRecord | None: ...

    @abc.abstractmethod
    def watch_brokers(self, callback: Callback) -> None:
        """Call ``callback`` whenever the set of registered brokers changes (persistent)."""

    @abc.abstractmethod
    def watch_topics(self, topics: Callable[[list[str]], None], deletions: Callback) -> None:
        """Call ``topics`` with every topic's name when topics appear or go, ``deletions`` when
        deletion markers do (persistent)."""

    @abc.abstractmethod
    def watch_reassignments(self, callback: Callback) -> None:
        """Call ``callback`` when ``/admin/reassign_partitions`` is written or deleted."""

    @abc.abstractmethod
    def watch_log_dir_events(self, callback: Callback) -> None:
        """Call ``callback`` when a log directory event notification appears or goes."""

    @abc.abstractmethod
    def watch_cluster_defaults(self, callback: Callback) -> None:
        """Call ``callback`` when ``/config/brokers/<default>`` is written or deleted."""

    @abc.abstractmethod
    def delete_log_dir_events(self, names: list[str]) -> None:
        """Remove handled log directory event notifications (missing ones are fine)."""

    @abc.abstractmethod
    def watch_controller(self, callback: Callable[[ControllerRecord | None], None]) -> None:
        """Call ``callback`` with the ``/controller`` record at every change (persistent)."""

    # --- election -------------------------------------------------------------------------
    @abc.abstractmethod
    def elect(self, controller_id: str, url: str) -> ControllerRecord | None:
        """Try to become controller: create ``/controller`` and increment ``/controller_epoch``
        in one step. Return our record (with the new epoch), or None if another holds it."""

    @abc.abstractmethod
    def resign(self, record: ControllerRecord) -> None:
        """Delete ``/controller`` if it is still ours."""

    # --- controller writes (fenced by the epoch of our election) ---------------------------
    @abc.abstractmethod
    def create_topic(self, name: str, topic_id: str, states: Mapping[int, PartitionState],
                     configs: Mapping[str, str]) -> bool:
        """Create topic, partition states and config atomically; False if the topic exists."""

    @abc.abstractmethod
    def update_partition_state(self, topic: str, state: PartitionState, version: int) -> bool:
        """CAS one partition state on its znode version; False if the version moved."""

    @abc.abstractmethod
    def update_partition_states(self, writes: Sequence[tuple[str, PartitionState, int]]) -> list[bool]:
        """Many ``update_partition_state`` writes at once (topic, state, expected version), each
        on its own (one lost race fails only its partition): one result per write."""

    @abc.abstractmethod
    def add_partitions(self, topic: TopicRecord, new_states: Mapping[int, PartitionState]) -> bool:
        """Extend the assignment (CAS on the topic znode) and create the new states atomically."""

    @abc.abstractmethod
    def set_topic_configs(self, topic: TopicRecord, configs: Mapping[str, str]) -> bool:
        """Replace the overrides (CAS on the config znode's version); False if it moved."""

    @abc.abstractmethod
    def write_reassignments(self, writes: list[TopicWrite],
                            requests: Mapping[tuple[str, int], tuple[int, ...]] | None,
                            requests_version: int) -> bool:
        """Apply ``writes`` and, unless ``requests`` is None, replace ``/admin/reassign_partitions``
        with ``requests`` (deleted when empty; CAS on ``requests_version``, -1 = absent), all in
        one transaction; False if any version moved."""

    @abc.abstractmethod
    def set_maintenance(self, broker_id: int, on: bool) -> None:
        """Create (``on``) or delete ``/admin/maintenance/<id>`` (idempotent, fenced)."""

    @abc.abstractmethod
    def mark_for_deletion(self, topic: str) -> None:
        """Write ``/admin/delete_topics/<t>`` (idempotent)."""

    @abc.abstractmethod
    def delete_topic(self, topic: str) -> None:
        """Remove the topic's znodes, its config and its deletion marker, atomically."""

    # --- Kafka users (OdradekUser): credentials, ACLs, quotas, written as the brokers write them
    @abc.abstractmethod
    def user_call(self, call: Callable[["UserAdmin"], T]) -> T:
        """``call`` with the users' admin on this session; raise StoreUnavailable."""
