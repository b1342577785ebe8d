"""Consumer groups with real clients on a 3-broker dev cluster (processes).

For confluent-kafka, kafka-python and aiokafka: members subscribed with one group.id share the
topic's partitions, the group rebalances when a member joins, leaves (SIGTERM: the client
sends LeaveGroup) or dies (SIGKILL: its session times out); members commit after processing,
so the union of processed records has no gap and, once all stop, the committed offsets equal
the log end. Committed offsets survive consumer restarts and restarts of the coordinator's
broker (``odradek dev kill N --graceful`` / ``dev start N``). librdkafka's KIP-848 consumer
(``group.protocol=consumer``) on the same cluster: the broker assigns, a partition has one owner
at a time (from the members' own rebalance callbacks), a silent member is fenced after
``group.consumer.session.timeout.ms``; the group's coordinator killed and then moved back, its
members keep their ids, member epochs and partitions (the group is in ``__consumer_offsets``);
a ``^prefix.*`` subscription goes to the broker as a regex and picks up a topic created later.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupType

from odradek.broker.group.config import partition_for
from odradek.dev.harness import start_cluster, stop_cluster
from odradek.dev.waiting import wait_until
from tests.support.clients import high_watermark
from tests.support.kafka_wire import WireClient

pytestmark = pytest.mark.timeout(600)

CLIENTS = ["confluent-kafka", "kafka-python", "aiokafka"]
PARTITIONS = 6
INITIAL_DELAY_MS = 300  # group.initial.rebalance.delay.ms, a broker flag (Kafka's default: 3000)
REBALANCE_S = 60  # session timeout 6 s + initial delay + clients' retry back-offs, with slack
CONSUMER_SESSION_MS = 6000    # group.consumer.session.timeout.ms (Kafka's default: 45000)
CONSUMER_HEARTBEAT_MS = 1000  # group.consumer.heartbeat.interval.ms (Kafka's default: 5000)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("groups-cluster"), brokers=3,
                      extra=("--config", f"group.initial.rebalance.delay.ms={INITIAL_DELAY_MS}",
                             "--config", f"group.consumer.session.timeout.ms={CONSUMER_SESSION_MS}",
                             "--config", f"group.consumer.heartbeat.interval.ms={CONSUMER_HEARTBEAT_MS}"))
    yield c
    stop_cluster(c)


class Member:
    """A consumer process (``consumer_proc``) and what it printed."""

    def __init__(self, client: str, bootstrap: str, topic: str, group: str, out: Path,
                 instance: str | None = None) -> None:
        self.out = out
        self._file = open(out, "wb")
        argv = [sys.executable, "-m", "tests.groups.consumer_proc", client, bootstrap, topic, group]
        self.proc = subprocess.Popen(argv + ([instance] if instance else []), stdout=self._file,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     cwd=Path(__file__).resolve().parents[2])

    def _events(self) -> list[dict]:
        out = []
        for line in self.out.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass  # a line being written
        return out

    @property
    def assigned(self) -> set[int]:
        last = [e["assigned"] for e in self._events() if "assigned" in e]
        return set(last[-1]) if last else set()

    def ownership(self, end: float) -> list[tuple[int, float, float]]:
        """(partition, from, to) spans from the member's timed assignment events; a span still
        open ends at ``end`` (the member was killed then)."""
        spans, since = [], {}
        for e in self._events():
            if "assigned" in e and "t" in e:
                now = set(e["assigned"])
                spans += [(p, since.pop(p), e["t"]) for p in set(since) - now]
                since.update({p: e["t"] for p in now - set(since)})
        return spans + [(p, t, end) for p, t in since.items()]

    def processed_list(self) -> list[tuple[int, int]]:
        return [(e["p"], e["o"]) for e in self._events() if "p" in e]

    def processed(self) -> set[tuple[int, int]]:
        return {(e["p"], e["o"]) for e in self._events() if "p" in e}

    def stop(self, sig=signal.SIGTERM, timeout: float = 60) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
            raise AssertionError(f"member {self.out.name} did not stop within {timeout}s:\n"
                                 + self.out.read_text(errors="replace")[-3000:])
        finally:
            self._file.close()


def _kill_leftovers(members: list[Member]) -> None:
    for m in members:
        if m.proc.poll() is None:
            m.stop(signal.SIGKILL)


def _produce(bootstrap: str, topic: str, count: int, start: int = 0) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": False})
    for i in range(start, start + count):
        p.produce(topic, key=str(i).encode(), value=str(i).encode())
    assert p.flush(60) == 0


def _ends(cluster, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "ends-reader"})
    try:
        return {p: high_watermark(c, topic, p) for p in range(PARTITIONS)}
    finally:
        c.close()


def _committed(cluster, topic: str, group: str) -> dict[int, int]:
    """The group's committed offsets, asked again while its coordinator is moving: librdkafka's
    ``committed()`` hands NOT_COORDINATOR back (seen once right after a coordinator restart)
    where Kafka's Java consumer looks the coordinator up again and retries."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
    moving = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
              KafkaError.COORDINATOR_NOT_AVAILABLE}
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})

    def committed():
        try:
            return c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
        except KafkaException as e:
            if e.args[0].code() in moving:
                return None
            raise
    try:
        found = wait_until(committed, 60, f"{group}'s committed offsets", 0.5, retry_on=())
        return {tp.partition: tp.offset for tp in found}
    finally:
        c.close()


def _wait_brokers(cluster, count: int = 3) -> None:
    wait_until(lambda: len(cluster.admin().list_topics(timeout=10).brokers) == count, 60,
               f"{count} live brokers", 0.3)


def _split(members: list[Member]) -> bool:
    """Every member has partitions, none shared, all covered."""
    sets = [m.assigned for m in members]
    return all(sets) and sum(map(len, sets)) == PARTITIONS and set().union(*sets) == set(range(PARTITIONS))


def _wait_split(members: list[Member], what: str) -> None:
    wait_until(lambda: _split(members), REBALANCE_S, what, 0.2)


def _wait_all_processed(members: list[Member], ends: dict[int, int]) -> None:
    wanted = {(p, o) for p, e in ends.items() for o in range(e)}
    wait_until(lambda: wanted <= set().union(*(m.processed() for m in members)), 120,
               "every record to be processed by some member", 0.5)


def _assert_no_gaps(processed: set[tuple[int, int]], ends: dict[int, int]) -> None:
    by_partition = defaultdict(set)
    for p, o in processed:
        by_partition[p].add(o)
    for p, end in ends.items():
        missing = set(range(end)) - by_partition[p]
        assert not missing, f"partition {p}: {len(missing)} records never processed, first {min(missing)}"


def _three_members(cluster, client: str, topic: str, group: str, tmp_path, members: list[Member]) -> None:
    """A topic of PARTITIONS with 3000 records; three members join one after the other, the
    partitions split among them after each join (``members`` holds them, for the caller's cleanup)."""
    _wait_brokers(cluster)
    cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
    _produce(cluster.bootstrap, topic, 3000)
    for i in range(3):
        members.append(Member(client, cluster.bootstrap, topic, group, tmp_path / f"m{i}.jsonl"))
        _wait_split(members, f"{i + 1} members to split the partitions")


@pytest.mark.parametrize("client", CLIENTS)
def test_members_share_partitions_and_rebalance_on_join_leave_and_death(cluster, tmp_path, client):
    topic, group = f"shared-{client}", f"group-{client}"
    members: list[Member] = []
    try:
        _three_members(cluster, client, topic, group, tmp_path, members)
        members[2].stop(signal.SIGTERM)  # leaves the group
        _wait_split(members[:2], "two members after one left")
        members[1].stop(signal.SIGKILL)  # dies: the session times out
        _wait_split(members[:1], "the survivor after a member died")
        _produce(cluster.bootstrap, topic, 3000, start=3000)
        ends = _ends(cluster, topic)
        _wait_all_processed(members, ends)
        members[0].stop(signal.SIGTERM)
        _assert_no_gaps(set().union(*(m.processed() for m in members)), ends)
        assert _committed(cluster, topic, group) == ends
    finally:
        _kill_leftovers(members)


def _coordinator_broker(cluster, group: str) -> int:
    leaders = cluster.wait_for_leaders("__consumer_offsets", 50)
    return leaders[partition_for(group, 50)]


@pytest.mark.parametrize("client", CLIENTS)
def test_committed_offsets_survive_consumer_and_coordinator_restarts(cluster, tmp_path, client):
    topic, group = f"restarts-{client}", f"restarts-{client}"
    _wait_brokers(cluster)
    cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
    _produce(cluster.bootstrap, topic, 2000)
    first = Member(client, cluster.bootstrap, topic, group, tmp_path / "first.jsonl")
    try:
        wait_until(lambda: len(first.processed()) >= 2000, 120, "the first member to process 2000 records", 0.3)
    finally:
        first.stop()
    before = _committed(cluster, topic, group)
    assert before == _ends(cluster, topic)
    coordinator = _coordinator_broker(cluster, group)
    cluster.run("kill", str(coordinator), "--graceful")
    _produce(cluster.bootstrap, topic, 1000, start=2000)
    # the group's partition moves to another replica (RF 3) or waits for the broker (RF 1)
    second = Member(client, cluster.bootstrap, topic, group, tmp_path / "second.jsonl")
    try:
        cluster.run("start", str(coordinator))
        _wait_brokers(cluster)
        wait_until(lambda: len(second.processed()) >= 1000, 180, "the second member to process the new records", 0.3)
    finally:
        second.stop()
    seen = second.processed()
    for p, o in seen:
        assert o >= before[p], f"partition {p}: re-read offset {o} below the committed {before[p]}"
    ends = _ends(cluster, topic)
    assert _committed(cluster, topic, group) == ends
    _assert_no_gaps(first.processed() | seen, ends)


def _wait_preferred_leaders(cluster) -> None:
    """Every partition led by its preferred replica (a preferred election asked for those that
    are not), so that the controller's automatic leader rebalance (every 10 s on the dev
    cluster) has nothing left to move. The restart tests leave leaderships on the brokers that
    stayed up; the tests that count a group's rebalances want its coordinator where it is."""
    from confluent_kafka import ElectionType, KafkaException, TopicPartition
    admin = cluster.admin()

    def settled() -> bool:
        topics = admin.list_topics(timeout=10).topics.values()
        off = [TopicPartition(t.topic, p.id) for t in topics for p in t.partitions.values()
               if p.replicas and p.leader != p.replicas[0]]
        if off:
            try:
                admin.elect_leaders(ElectionType.PREFERRED, off).result(30)
            except KafkaException:
                pass  # e.g. a preferred replica not back in the ISR yet: asked again at the next look
        return not off
    wait_until(settled, 90, "every partition led by its preferred replica", 0.5)


def _listed_type(cluster, group: str):
    admin = cluster.admin()  # held: a collected client cancels its requests
    found = [g.type for g in admin.list_consumer_groups().result(30).valid if g.group_id == group]
    return found[0] if found else None


def _described_split(cluster, group: str) -> bool:
    """ConsumerGroupDescribe: a consumer group, Stable, its three members' assignments (current
    and target) splitting the partitions."""
    admin = cluster.admin()
    d = admin.describe_consumer_groups([group])[group].result(30)
    current = [{tp.partition for tp in m.assignment.topic_partitions} for m in d.members]
    target = [{tp.partition for tp in m.target_assignment.topic_partitions} for m in d.members]
    return (d.type == ConsumerGroupType.CONSUMER and str(d.state.name) == "STABLE" and current == target
            and len(current) == 3 and sorted(p for ps in current for p in ps) == list(range(PARTITIONS)))


def _assert_one_owner_at_a_time(spans: list[tuple[int, float, float]]) -> int:
    """No partition held by two members at once; the number of hand-overs."""
    by_partition = defaultdict(list)
    for p, start, end in spans:
        by_partition[p].append((start, end))
    for p, held in by_partition.items():
        held.sort()
        for (_, end), (start, _) in zip(held, held[1:]):
            assert start >= end, f"partition {p} owned by two members at once: {held}"
    return sum(len(h) - 1 for h in by_partition.values())


def test_kip848_consumers_one_owner_at_a_time_through_joins_leaves_and_fencing(cluster, tmp_path):
    """librdkafka with group.protocol=consumer: ConsumerGroupHeartbeat, the uniform assignor,
    revocation before assignment, leave (epoch -1), fencing after the session timeout, commits
    with the member epoch; the group is listed with type consumer and described."""
    topic, group = "shared-kip848", "group-kip848"
    members: list[Member] = []
    killed_at: dict[int, float] = {}
    _wait_brokers(cluster)
    _wait_preferred_leaders(cluster)  # the group's coordinator stays where it is
    try:
        _three_members(cluster, "confluent-kafka-848", topic, group, tmp_path, members)
        coordinator = _coordinator_broker(cluster, group)
        wait_until(lambda: _listed_type(cluster, group) == ConsumerGroupType.CONSUMER, 30,
                   f"{group} listed with type consumer", 0.5)
        wait_until(lambda: _described_split(cluster, group), 30, f"{group} described (ConsumerGroupDescribe)", 0.5)
        _produce(cluster.bootstrap, topic, 3000, start=3000)
        members[2].stop(signal.SIGTERM)  # leaves: heartbeat with epoch -1
        _wait_split(members[:2], "two members after one left")
        killed_at[1] = time.time()
        members[1].stop(signal.SIGKILL)  # silent: fenced after the session timeout
        _wait_split(members[:1], "the survivor after a member was fenced")
        ends = _ends(cluster, topic)
        _wait_all_processed(members, ends)
        members[0].stop(signal.SIGTERM)
        _assert_no_gaps(set().union(*(m.processed() for m in members)), ends)
        assert _coordinator_broker(cluster, group) == coordinator, "the coordinator moved: the rebalances counted are off"
        handovers = _assert_one_owner_at_a_time([s for i, m in enumerate(members)
                                                 for s in m.ownership(killed_at.get(i, time.time()))])
        reads = [r for m in members for r in m.processed_list()]
        # at least once: a record is read again only from an uncommitted batch (<= 500) of a moved partition
        assert len(reads) - len(set(reads)) <= 500 * handovers
        assert _committed(cluster, topic, group) == ends
    finally:
        _kill_leftovers(members)


def _described(cluster, group: str):
    """ConsumerGroupDescribe over the wire to the group's coordinator (librdkafka's admin shows
    no epochs nor regexes): the described group; None while it moves."""
    from kio.schema.consumer_group_describe.v0 import request as r
    try:
        with WireClient(cluster.brokers[_coordinator_broker(cluster, group)], timeout=30) as client:
            g = client.request(69, 0, r.ConsumerGroupDescribeRequest(
                group_ids=(group,), include_authorized_operations=False)).groups[0]
    except (OSError, KeyError):  # a broker down or its address not known yet
        return None
    return g if g.error_code == 0 else None


def _described_epochs(cluster, group: str):
    """(group epoch, {member id: (member epoch, partitions)}); None while the group moves."""
    g = _described(cluster, group)
    if g is None:
        return None
    return g.group_epoch, {m.member_id: (m.member_epoch, frozenset(
        p for t in m.assignment.topic_partitions for p in t.partitions)) for m in g.members}


def _assignment_events(members: list[Member]) -> list[int]:
    return [sum("assigned" in e for e in m._events()) for m in members]


def test_kip848_members_keep_ids_epochs_and_partitions_when_the_coordinator_moves(cluster, tmp_path):
    """Kafka's coordinator failover for consumer groups: the broker leading the group's
    ``__consumer_offsets`` partition is killed, another replica becomes leader and loads the
    group's records; then the broker is back and a preferred election moves the group back.
    Through both moves the members keep their member ids, member epochs and partitions (no
    rebalance callback in any member, the group epoch unchanged), a partition never has two
    owners, a record is read twice only from a batch uncommitted when its partition changed hands
    (joins, leaves), every record is read and, once all stop, the committed offsets are the log ends."""
    topic, group = "moving-kip848", "moving-kip848"
    members: list[Member] = []
    _wait_brokers(cluster)
    _wait_preferred_leaders(cluster)
    try:
        _three_members(cluster, "confluent-kafka-848", topic, group, tmp_path, members)
        wait_until(lambda: _described_split(cluster, group), 30, f"{group} described (ConsumerGroupDescribe)", 0.5)
        before = wait_until(lambda: _described_epochs(cluster, group), 30, f"{group}'s epochs", 0.5)
        events = _assignment_events(members)
        coordinator = _coordinator_broker(cluster, group)
        cluster.run("kill", str(coordinator), "--graceful")
        wait_until(lambda: _coordinator_broker(cluster, group) != coordinator, 60, "the coordinator to move", 0.5)
        _produce(cluster.bootstrap, topic, 1500, start=3000)
        assert wait_until(lambda: _described_epochs(cluster, group), 60, f"{group} at its new coordinator", 0.5) \
            == before
        cluster.run("start", str(coordinator))
        _wait_brokers(cluster)
        _wait_preferred_leaders(cluster)  # the group's partition goes back to the restarted broker
        assert _coordinator_broker(cluster, group) == coordinator
        _produce(cluster.bootstrap, topic, 1500, start=4500)
        ends = _ends(cluster, topic)
        _wait_all_processed(members, ends)
        assert wait_until(lambda: _described_epochs(cluster, group), 60, f"{group} back home", 0.5) == before
        assert _assignment_events(members) == events, "a member's partitions were revoked or lost"
        for m in members:
            m.stop(signal.SIGTERM)
        now = time.time()
        handovers = _assert_one_owner_at_a_time([s for m in members for s in m.ownership(now)])
        reads = [r for m in members for r in m.processed_list()]
        # at least once: a record is read again only from an uncommitted batch (<= 500) of a moved partition
        assert len(reads) - len(set(reads)) <= 500 * handovers
        _assert_no_gaps(set().union(*(m.processed() for m in members)), ends)
        assert _committed(cluster, topic, group) == ends
    finally:
        _kill_leftovers(members)


def _described_regexes(cluster, group: str) -> set[str | None] | None:
    """The members' SubscribedTopicRegex as ConsumerGroupDescribe shows them (None while it moves)."""
    g = _described(cluster, group)
    return None if g is None else {m.subscribed_topic_regex for m in g.members}


def test_kip848_regex_subscription_picks_up_a_topic_created_later(cluster):
    """librdkafka's ``^prefix.*`` subscription with group.protocol=consumer goes to the broker as
    SubscribedTopicRegex; the broker resolves it, and a matching topic created after the
    subscription enters the member's assignment (a topic that does not match stays out)."""
    from confluent_kafka import Consumer
    group = "group-kip848-regex"
    _wait_brokers(cluster)
    for topic in ("regex-a", "other-regex-a"):
        cluster.create_topic(topic, partitions=2, replication_factor=3)
        _produce(cluster.bootstrap, topic, 10)
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest"})
    seen: set[str] = set()

    def read(topic: str) -> bool:
        msg = c.poll(0.5)
        if msg is not None and msg.error() is None:
            seen.add(msg.topic())
        return topic in seen
    try:
        c.subscribe(["^regex-.*"])
        wait_until(lambda: read("regex-a"), 60, "records of regex-a", 0)
        # librdkafka sends its regex subscriptions joined, each in parentheses
        assert wait_until(lambda: _described_regexes(cluster, group), 30, "the group described", 0.5) == {"(^regex-.*)"}
        cluster.create_topic("regex-b", partitions=2, replication_factor=3)
        _produce(cluster.bootstrap, "regex-b", 10)
        wait_until(lambda: read("regex-b"), 90, "records of regex-b, created after the subscription", 0)
        assert "other-regex-a" not in seen and {tp.topic for tp in c.assignment()} == {"regex-a", "regex-b"}
    finally:
        c.close()
