"""The ZooKeeper implementation of ``MetadataStore`` (the only controller module importing kazoo).

Owns: the kazoo session (chroot ``/odradek/<cluster>``, created first if missing), the JSON
shape of every znode (docs/control-plane.md, "ZooKeeper znodes"), the election
transaction, and the mapping of kazoo's exceptions to the store's own.

Every write the controller makes is one kazoo transaction that starts with
``check(/controller_epoch, version of our election)``: a deposed controller's writes fail
with ``ControllerMoved`` instead of landing (Kafka's ZooKeeper-era fencing). Topic creation
and deletion are single transactions, so a controller killed midway leaves nothing half-made.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import uuid
from typing import Any, Callable, Mapping, Sequence

from kazoo.client import KazooState
from kazoo.exceptions import (BadVersionError, ConnectionClosedError, ConnectionDropped,
                              ConnectionLoss, NodeExistsError, NoNodeError, OperationTimeoutError,
                              RolledBackError, RuntimeInconsistency, SessionExpiredError)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.serialization import Transaction

from odradek.cluster import paths, zk_session
from odradek.cluster.zk_data import ENTITY_CONFIG, MAINTENANCE
from odradek.cluster.model import BrokerInfo, PartitionState
from odradek.cluster.zk_session import ZkSecurity, ZkTimeouts

from .store import (Callback, ControllerMoved, ControllerRecord, MetadataStore, StoreError,
                    StoreSnapshot, StoreUnavailable, T, TooLarge, TopicRecord, TopicWrite)
from .users import UserAdmin

log = logging.getLogger(__name__)

CLUSTER_ID = "/cluster/id"
_UNAVAILABLE = (ConnectionLoss, ConnectionDropped, ConnectionClosedError, SessionExpiredError,
                OperationTimeoutError, KazooTimeoutError)
_OP_TIMEOUT = 10.0
_CLUSTER_DEFAULTS = paths.entity_config("brokers", paths.DEFAULT_ENTITY)
# ZooKeeper drops a connection whose request exceeds jute.maxbuffer (0xfffff bytes by default),
# and with it the session's standing for a while: a bigger transaction is refused here instead
# (a topic of 2,500-3,000 partitions at RF 3 fits, depending on the length of its znode paths).
MAX_TRANSACTION_BYTES = 1_000_000
# Partition states per transaction of leader and ISR changes: ~50 KB at most with 249-character
# topic names, far below the limit above.
STATES_PER_TRANSACTION = 100


def _unavailable_as_store_error(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except _UNAVAILABLE as e:
            raise StoreUnavailable(f"ZooKeeper unavailable: {type(e).__name__}") from e
    return wrapper


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def new_cluster_id() -> str:
    """A random UUID in URL-safe base64 without padding, as Kafka's cluster ids; never starting
    with "-" (Kafka's ``Uuid.randomUuid`` rule: tools would read such an id as an option)."""
    while (cid := base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()).startswith("-"):
        pass
    return cid


def topic_json(topic_id: str, assignment: Mapping[int, tuple[int, ...]],
               adding: Mapping[int, tuple[int, ...]] | None = None,
               removing: Mapping[int, tuple[int, ...]] | None = None) -> dict:
    """``/brokers/topics/<t>``; ``adding_replicas`` / ``removing_replicas`` (Kafka's names)
    appear only while partitions are being reassigned."""
    body = {"version": 1, "topic_id": topic_id,
            "partitions": {str(p): list(r) for p, r in sorted(assignment.items())}}
    for key, value in (("adding_replicas", adding), ("removing_replicas", removing)):
        kept = {str(p): list(r) for p, r in sorted((value or {}).items()) if r}
        if kept:
            body[key] = kept
    return body


def reassign_json(requests: Mapping[tuple[str, int], tuple[int, ...]]) -> dict:
    """``/admin/reassign_partitions`` in Kafka's format."""
    return {"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": list(r)}
                                         for (t, p), r in sorted(requests.items())]}


def parse_reassign(data: bytes) -> dict[tuple[str, int], tuple[int, ...]]:
    """Entries of ``/admin/reassign_partitions``; unreadable ones are skipped (logged).
    ``replicas`` may be null or absent in an entry: a cancellation request (kept as ``()``)."""
    try:
        body = json.loads(data)
        entries = body.get("partitions", []) if isinstance(body, dict) else []
    except ValueError:
        log.warning("unreadable /admin/reassign_partitions: %r", data[:200])
        return {}
    requests = {}
    for e in entries:
        try:
            replicas = e.get("replicas")
            requests[(str(e["topic"]), int(e["partition"]))] = \
                tuple(int(r) for r in replicas) if replicas is not None else ()
        except (KeyError, TypeError, ValueError, AttributeError):
            log.warning("skipping unreadable reassignment entry %r", e)
    return requests


def state_json(s: PartitionState) -> dict:
    return {"version": 1, "leader": s.leader, "leader_epoch": s.leader_epoch, "isr": list(s.isr),
            "controller_epoch": s.controller_epoch}


class ZkStore(MetadataStore):
    """``timeouts.session_ms`` is how long a dead controller keeps ``/controller`` and how long
    a ZooKeeper outage may last before this instance loses its role (a suspended connection
    only makes it inactive until it reconnects)."""

    def __init__(self, connect: str, cluster: str, timeouts: ZkTimeouts = ZkTimeouts(),
                 security: ZkSecurity = ZkSecurity()) -> None:
        self._connect = connect
        self._cluster = cluster
        self._timeouts = timeouts
        self._security = security
        self._zk = zk_session.client(connect, timeouts, paths.chroot(cluster), security)
        self._fence_version: int | None = None  # /controller_epoch's version after our election
        self._users = UserAdmin(lambda: self._zk)

    # --- lifecycle --------------------------------------------------------------------------
    @_unavailable_as_store_error
    def start(self, timeout: float | None = None) -> None:
        timeouts = self._timeouts if timeout is None else ZkTimeouts(self._timeouts.session_ms, int(timeout * 1000))
        zk_session.ensure_chroot(self._connect, self._cluster, timeouts, self._security)
        self._zk.start(timeout=timeouts.connection_s)
        for p in (paths.BROKER_IDS, paths.TOPICS, paths.CONFIG_TOPICS, paths.DELETE_TOPICS, "/cluster",
                  "/admin", paths.LOG_DIR_EVENT_NOTIFICATION, paths.MAINTENANCE):
            self._zk.ensure_path(p)
        try:
            self._zk.create(paths.CONTROLLER_EPOCH, _dump(0))
        except NodeExistsError:
            pass

    def close(self) -> None:
        self._zk.stop()
        self._zk.close()

    def on_session(self, callback: Callable[[str], None]) -> None:
        names = {KazooState.CONNECTED: "connected", KazooState.SUSPENDED: "suspended",
                 KazooState.LOST: "lost"}
        self._zk.add_listener(lambda state: callback(names[state]))

    @_unavailable_as_store_error
    def cluster_id(self) -> str:
        try:
            return json.loads(self._zk.get(CLUSTER_ID)[0])["id"]
        except NoNodeError:
            pass
        try:
            self._zk.create(CLUSTER_ID, _dump({"version": "1", "id": new_cluster_id()}))
        except NodeExistsError:
            pass
        return json.loads(self._zk.get(CLUSTER_ID)[0])["id"]

    # --- reads --------------------------------------------------------------------------------
    @_unavailable_as_store_error
    def load(self) -> StoreSnapshot:
        zk = self._zk
        broker_ids = zk.get_children(paths.BROKER_IDS)
        names = zk.get_children(paths.TOPICS)
        deletions = frozenset(zk.get_children(paths.DELETE_TOPICS))
        event_reads = {e: zk.get_async(paths.log_dir_event(e))
                       for e in zk.get_children(paths.LOG_DIR_EVENT_NOTIFICATION)}
        reassign_read = zk.get_async(paths.REASSIGN_PARTITIONS)
        defaults_read = zk.get_async(_CLUSTER_DEFAULTS)
        maintenance_read = zk.get_children_async(paths.MAINTENANCE)
        broker_reads = {b: zk.get_async(paths.broker(int(b))) for b in broker_ids if b.isdigit()}
        topic_reads = {t: (zk.get_async(paths.topic(t)), zk.get_async(paths.topic_config(t)))
                       for t in names}
        topic_bodies = {t: (_result(topic_read), config_read) for t, (topic_read, config_read) in topic_reads.items()}
        # every partition state read is sent before any answer is awaited (a new controller
        # loads 10,000 states in one pipelined burst, not one round trip per topic)
        state_reads = {t: {p: zk.get_async(paths.partition_state(t, p)) for p in _assignment(got[0])}
                       for t, (got, _) in topic_bodies.items() if got is not None}
        brokers = []
        for b, pending in broker_reads.items():
            got = _result(pending)
            if got is None:
                continue
            try:
                info = BrokerInfo.from_json(json.loads(got[0]))
            except (ValueError, KeyError, TypeError):
                log.warning("ignoring unreadable broker registration %s: %r", b, got[0])
                continue
            brokers.append(BrokerInfo(int(b), info.host, info.port, info.internal_url, info.rack,
                                      got[1].czxid, info.endpoints))
        topics = {}
        for name, (got, config_read) in topic_bodies.items():
            if got is not None:
                topics[name] = _topic_record(name, got, state_reads[name], config_read)
        reassign = _result(reassign_read)
        requests = parse_reassign(reassign[0]) if reassign else {}
        return StoreSnapshot(self.cluster_id(), self.read_controller(),
                             tuple(sorted(brokers, key=lambda b: b.id)), topics, deletions,
                             requests, reassign[1].version if reassign else -1, _log_dir_events(event_reads),
                             ENTITY_CONFIG.decode((_result(defaults_read) or (None,))[0], _CLUSTER_DEFAULTS),
                             MAINTENANCE.broker_ids(_result(maintenance_read) or []))

    @_unavailable_as_store_error
    def read_controller(self) -> ControllerRecord | None:
        try:
            data, _ = self._zk.get(paths.CONTROLLER)
        except NoNodeError:
            return None
        return _controller_record(data)

    # --- watches (kazoo re-arms them after reconnects) ---------------------------------------
    def watch_brokers(self, callback: Callback) -> None:
        self._zk.ChildrenWatch(paths.BROKER_IDS, lambda _children: callback())

    def watch_topics(self, topics: Callable[[list[str]], None], deletions: Callback) -> None:
        self._zk.ChildrenWatch(paths.TOPICS, topics)
        self._zk.ChildrenWatch(paths.DELETE_TOPICS, lambda _children: deletions())

    def watch_reassignments(self, callback: Callback) -> None:
        self._zk.DataWatch(paths.REASSIGN_PARTITIONS, lambda _data, _stat: callback())

    def watch_cluster_defaults(self, callback: Callback) -> None:
        self._zk.DataWatch(_CLUSTER_DEFAULTS, lambda _data, _stat: callback())

    def watch_log_dir_events(self, callback: Callback) -> None:
        self._zk.ChildrenWatch(paths.LOG_DIR_EVENT_NOTIFICATION, lambda _children: callback())

    @_unavailable_as_store_error
    def delete_log_dir_events(self, names: list[str]) -> None:
        for name in names:
            try:
                self._zk.delete(paths.log_dir_event(name))
            except NoNodeError:
                pass

    def watch_controller(self, callback: Callable[[ControllerRecord | None], None]) -> None:
        self._zk.DataWatch(paths.CONTROLLER,
                           lambda data, _stat: callback(_controller_record(data) if data else None))

    # --- election ------------------------------------------------------------------------------
    @_unavailable_as_store_error
    def elect(self, controller_id: str, url: str) -> ControllerRecord | None:
        while True:
            data, stat = self._zk.get(paths.CONTROLLER_EPOCH)
            record = ControllerRecord(controller_id, int(json.loads(data)) + 1, url)
            t = self._zk.transaction()
            t.create(paths.CONTROLLER, _dump(record.to_json()), ephemeral=True)
            t.set_data(paths.CONTROLLER_EPOCH, _dump(record.epoch), version=stat.version)
            failed = _failure(t.commit())
            if failed is None:
                self._fence_version = stat.version + 1
                return record
            index, error = failed
            if index == 0 and isinstance(error, NodeExistsError):
                return self._resume_own_election(controller_id)
            if not isinstance(error, BadVersionError):
                raise StoreError(f"election transaction failed: {error!r}")
            # another candidate bumped the epoch between our read and our write: read again

    def _resume_own_election(self, controller_id: str) -> ControllerRecord | None:
        """``/controller`` exists: ours (same session, e.g. after a reconnect) or another's."""
        try:
            data, stat = self._zk.get(paths.CONTROLLER)
            epoch_data, epoch_stat = self._zk.get(paths.CONTROLLER_EPOCH)
        except NoNodeError:
            return None
        record = _controller_record(data)
        if (record is None or stat.ephemeralOwner != self._zk.client_id[0]
                or record.id != controller_id or record.epoch != int(json.loads(epoch_data))):
            return None
        self._fence_version = epoch_stat.version
        return record

    @_unavailable_as_store_error
    def resign(self, record: ControllerRecord) -> None:
        self._fence_version = None
        try:
            data, stat = self._zk.get(paths.CONTROLLER)
        except NoNodeError:
            return
        if _controller_record(data) == record:
            try:
                self._zk.delete(paths.CONTROLLER, version=stat.version)
            except (NoNodeError, BadVersionError):
                pass

    # --- fenced writes ------------------------------------------------------------------------
    def _fenced(self):
        if self._fence_version is None:
            raise ControllerMoved("not the elected controller")
        t = self._zk.transaction()
        t.check(paths.CONTROLLER_EPOCH, self._fence_version)
        return t

    def _commit(self, t) -> tuple[int, Exception] | None:
        size = len(Transaction(t.operations).serialize())
        if size > MAX_TRANSACTION_BYTES:
            raise TooLarge(f"a transaction of {size} bytes exceeds {MAX_TRANSACTION_BYTES} bytes")
        return _fenced_failure(t.commit())

    @_unavailable_as_store_error
    def create_topic(self, name: str, topic_id: str, states: Mapping[int, PartitionState],
                     configs: Mapping[str, str]) -> bool:
        t = self._fenced()
        t.create(paths.topic(name), _dump(topic_json(topic_id, {p: s.replicas for p, s in states.items()})))
        t.create(paths.partitions(name), b"")
        for p, s in sorted(states.items()):
            t.create(f"{paths.partitions(name)}/{p}", b"")
            t.create(paths.partition_state(name, p), _dump(state_json(s)))
        t.create(paths.topic_config(name), _dump({"version": 1, "config": dict(configs)}))
        failed = self._commit(t)
        if failed is None:
            return True
        if failed[0] == 1 and isinstance(failed[1], NodeExistsError):
            return False
        raise StoreError(f"creating topic {name} failed at step {failed[0]}: {failed[1]!r}")

    def update_partition_state(self, topic: str, state: PartitionState, version: int) -> bool:
        return self.update_partition_states([(topic, state, version)])[0]

    @_unavailable_as_store_error
    def update_partition_states(self, writes: Sequence[tuple[str, PartitionState, int]]) -> list[bool]:
        """Fenced transactions of up to ``STATES_PER_TRANSACTION`` partitions each, all sent
        before the first answer is awaited: kazoo's async API pipelines them on the one
        connection (Kafka 1.1's asynchronous ZooKeeper writes). A transaction that loses a race
        commits nothing; its partitions are then written one a transaction, so that a lost race
        fails only its own. One transaction a partition made a controlled shutdown of a broker
        in 10,000 partitions' ISRs spend ~2.2 s writing (2026-11-28)."""
        chunks = [writes[i:i + STATES_PER_TRANSACTION] for i in range(0, len(writes), STATES_PER_TRANSACTION)]
        pending = [self._states_transaction(chunk).commit_async() for chunk in chunks]
        written: list[bool] = []
        for chunk, answer in zip(chunks, pending):
            if self._states_committed(answer):
                written.extend(True for _ in chunk)
            else:
                retried = [self._states_transaction([w]).commit_async() for w in chunk]
                written.extend(self._states_committed(r) for r in retried)
        return written

    def _states_transaction(self, writes: Sequence[tuple[str, PartitionState, int]]):
        t = self._fenced()
        for topic, state, version in writes:
            t.set_data(paths.partition_state(topic, state.partition), _dump(state_json(state)), version=version)
        return t

    @staticmethod
    def _states_committed(answer) -> bool:
        """False if a partition's version moved (a lost race); raises if the controller did."""
        return _lost_race(_fenced_failure(answer.get(timeout=_OP_TIMEOUT)))

    @_unavailable_as_store_error
    def add_partitions(self, topic: TopicRecord, new_states: Mapping[int, PartitionState]) -> bool:
        assignment = dict(topic.assignment)
        assignment.update({p: s.replicas for p, s in new_states.items()})
        t = self._fenced()
        t.set_data(paths.topic(topic.name),
                   _dump(topic_json(topic.topic_id, assignment, topic.adding, topic.removing)),
                   version=topic.version)
        for p, s in sorted(new_states.items()):
            t.create(f"{paths.partitions(topic.name)}/{p}", b"")
            t.create(paths.partition_state(topic.name, p), _dump(state_json(s)))
        return _lost_race(self._commit(t))

    @_unavailable_as_store_error
    def write_reassignments(self, writes: list[TopicWrite],
                            requests: Mapping[tuple[str, int], tuple[int, ...]] | None,
                            requests_version: int) -> bool:
        t = self._fenced()
        for w in writes:
            t.set_data(paths.topic(w.topic.name),
                       _dump(topic_json(w.topic.topic_id, w.assignment, w.adding, w.removing)),
                       version=w.topic.version)
            for p, (state, version) in sorted(w.states.items()):
                t.set_data(paths.partition_state(w.topic.name, p), _dump(state_json(state)), version=version)
        if requests is not None:
            body = _dump(reassign_json(requests))
            if requests_version < 0:
                if requests:
                    t.create(paths.REASSIGN_PARTITIONS, body)
            elif requests:
                t.set_data(paths.REASSIGN_PARTITIONS, body, version=requests_version)
            else:
                t.delete(paths.REASSIGN_PARTITIONS, version=requests_version)
        return _lost_race(self._commit(t))

    @_unavailable_as_store_error
    def set_topic_configs(self, topic: TopicRecord, configs: Mapping[str, str]) -> bool:
        t = self._fenced()
        body = _dump({"version": 1, "config": dict(configs)})
        if topic.config_version < 0:
            t.create(paths.topic_config(topic.name), body)
        else:
            t.set_data(paths.topic_config(topic.name), body, version=topic.config_version)
        return _lost_race(self._commit(t))

    @_unavailable_as_store_error
    def allocate_producer_id_block(self, broker_id: int, size: int) -> tuple[int, int]:
        """Reserve the next ``size`` producer ids after Kafka's ``/producer_id_block`` (same JSON:
        block_start/block_end as strings), compare-and-set on the znode's version, fenced."""
        while True:
            try:
                data, stat = self._zk.get(paths.PRODUCER_ID_BLOCK)
                start = int(json.loads(data)["block_end"]) + 1
            except NoNodeError:
                stat, start = None, 0
            block = _dump({"version": 1, "broker": broker_id, "block_start": str(start),
                           "block_end": str(start + size - 1)})
            t = self._fenced()
            if stat is None:
                t.create(paths.PRODUCER_ID_BLOCK, block)
            else:
                t.set_data(paths.PRODUCER_ID_BLOCK, block, version=stat.version)
            if self._commit(t) is None:
                return start, start + size - 1

    @_unavailable_as_store_error
    def user_call(self, call: Callable[[UserAdmin], T]) -> T:
        # Not fenced: brokers write these znodes too (AlterUserScramCredentials, CreateAcls).
        return call(self._users)

    @_unavailable_as_store_error
    def set_maintenance(self, broker_id: int, on: bool) -> None:
        t = self._fenced()
        if on:
            t.create(MAINTENANCE.path(broker_id), MAINTENANCE.encode(broker_id))
        else:
            t.delete(MAINTENANCE.path(broker_id))
        failed = self._commit(t)
        if failed is not None and not isinstance(failed[1], NodeExistsError if on else NoNodeError):
            raise StoreError(f"setting broker {broker_id}'s maintenance to {on} failed: {failed[1]!r}")

    @_unavailable_as_store_error
    def mark_for_deletion(self, topic: str) -> None:
        t = self._fenced()
        t.create(paths.delete_topic(topic), _dump({"version": 1}))
        failed = self._commit(t)
        if failed is not None and not isinstance(failed[1], NodeExistsError):
            raise StoreError(f"marking {topic} for deletion failed: {failed[1]!r}")

    @_unavailable_as_store_error
    def delete_topic(self, topic: str) -> None:
        for _ in range(5):
            t = self._fenced()
            try:
                parts = self._zk.get_children(paths.partitions(topic))
            except NoNodeError:
                parts = []
            for p in parts:
                base = f"{paths.partitions(topic)}/{p}"
                if self._zk.exists(base + "/state"):
                    t.delete(base + "/state")
                t.delete(base)
            if self._zk.exists(paths.partitions(topic)):
                t.delete(paths.partitions(topic))
            for path in (paths.topic(topic), paths.topic_config(topic), paths.delete_topic(topic)):
                if self._zk.exists(path):
                    t.delete(path)
            if self._commit(t) is None:
                return
        raise StoreError(f"deleting topic {topic}: its znodes kept changing")


def _assignment(topic_body: bytes) -> dict[int, tuple[int, ...]]:
    return {int(p): tuple(int(r) for r in rs) for p, rs in json.loads(topic_body)["partitions"].items()}


def _topic_record(name: str, got: tuple[bytes, Any], state_reads: Mapping[int, Any], config_read) -> TopicRecord:
    body = json.loads(got[0])
    assignment = _assignment(got[0])
    states, versions = {}, {}
    for p, pending in state_reads.items():
        s = _result(pending)
        if s is None:
            continue
        d = json.loads(s[0])
        states[p] = PartitionState(p, assignment[p], int(d["leader"]), int(d["leader_epoch"]),
                                   tuple(d["isr"]), int(d.get("controller_epoch", 0)), s[1].version)
        versions[p] = s[1].version
    config = _result(config_read)
    configs = ENTITY_CONFIG.decode(config[0] if config else None, f"topic {name}")
    adding, removing = ({int(p): tuple(int(r) for r in rs) for p, rs in body.get(key, {}).items()}
                        for key in ("adding_replicas", "removing_replicas"))
    return TopicRecord(name, body["topic_id"], assignment, got[1].version, states, versions,
                       configs, config[1].version if config else -1, adding, removing)


def _result(pending) -> tuple[bytes, Any] | None:
    try:
        return pending.get(timeout=_OP_TIMEOUT)
    except NoNodeError:
        return None


def _failure(results: list) -> tuple[int, Exception] | None:
    """The failing operation of a transaction (index, error), or None if it committed."""
    for i, r in enumerate(results):
        if isinstance(r, Exception) and not isinstance(r, (RolledBackError, RuntimeInconsistency)):
            return i, r
    return None


def _fenced_failure(results: list) -> tuple[int, Exception] | None:
    """``_failure`` of a transaction from ``_fenced``: its failed first step (the epoch check)
    means another controller was elected."""
    failed = _failure(results)
    if failed is not None and failed[0] == 0:
        raise ControllerMoved("/controller_epoch moved: another controller was elected")
    return failed


def _lost_race(failed: tuple[int, Exception] | None) -> bool:
    if failed is None:
        return True
    if isinstance(failed[1], (BadVersionError, NoNodeError, NodeExistsError)):
        return False
    raise StoreError(f"transaction failed: {failed[1]!r}")


def _log_dir_events(reads: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """{znode name: (broker, broker epoch)} of the readable log directory failure events."""
    events = {}
    for name, pending in reads.items():
        got = _result(pending)
        try:
            body = json.loads(got[0]) if got else None
            if body is not None and int(body["event"]) == paths.LOG_DIR_FAILURE:
                events[name] = (int(body["broker"]), int(body.get("broker_epoch", -1)))
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring unreadable log directory event %s: %r", name, got[0])
    return events


def _controller_record(data: bytes | None) -> ControllerRecord | None:
    try:
        return ControllerRecord.from_json(json.loads(data)) if data else None
    except (ValueError, KeyError, TypeError):
        log.warning("unreadable /controller znode: %r", data)
        return None
