"""Replication on a real cluster of processes (ZooKeeper, controller, 3 brokers), through
real clients: acks=all, ISR shrink and rejoin, min.insync.replicas, controlled shutdown,
unclean leader election, a ZooKeeper restart that changes nothing.

The brokers run with ``replica.lag.time.max.ms=3000`` (passed as a broker setting through
``odradek dev up --config``) so that a stopped follower leaves the ISR within seconds.
Every wait has a deadline; brokers stopped by a test are started again by it.
"""

from __future__ import annotations

import threading
import time

import pytest

from odradek.cluster import control_plane
from odradek.cluster.control_plane_http import call_blocking
from odradek.dev.harness import Cluster, start_cluster, stop_cluster
from odradek.dev.waiting import wait_until
from tests.support.clients import confluent_consume, confluent_produce
from tests.support.records import make_records, verify

LAG_MS = 3000


@pytest.fixture(scope="module")
def rc(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("replication"), brokers=3,
                      extra=("--config", f"replica.lag.time.max.ms={LAG_MS}"))
    yield c
    stop_cluster(c)


def isr(c: Cluster, topic: str, partition: int = 0) -> tuple[int, list[int]]:
    """(leader, ISR) of a partition from a fresh Metadata request."""
    p = c.admin().list_topics(topic, timeout=10).topics[topic].partitions[partition]
    return p.leader, sorted(p.isrs)


def broker_status(c: Cluster, broker_id: int) -> dict:
    return status_at(next(b["internal_url"] for b in c.status_cluster()["brokers"] if b["id"] == broker_id))


def status_at(internal_url: str) -> dict:
    return call_blocking(internal_url, control_plane.status(), timeout=5).to_json()


def partition_status(c: Cluster, broker_id: int, topic: str, partition: int = 0) -> dict:
    return next(p for p in broker_status(c, broker_id)["partitions"]
                if p["topic"] == topic and p["partition"] == partition)


def _status_cluster(self: Cluster) -> dict:
    from odradek.dev.cluster import _load, active_cluster
    return active_cluster(_load(self.data_dir / "cluster.json")) or {"brokers": []}


Cluster.status_cluster = _status_cluster


def produce_acks_all(c: Cluster, topic: str, count: int, **conf) -> list:
    """acks=all with retries off; the delivery errors (empty when all succeeded)."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "retries": 0,
                         "enable.idempotence": False, "message.timeout.ms": 20000, **conf})
    errors = []
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, on_delivery=lambda e, m: e is not None and errors.append(e))
    producer.flush(30)
    return errors


def test_acks_all_produce_and_consume_rf3(rc):
    rc.create_topic("rf3", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
    records = make_records(6000)
    delivered = confluent_produce(rc.bootstrap, "rf3", records, acks="all")
    got, high = confluent_consume(rc.bootstrap, "rf3", 3, len(records))
    verify(records, got, delivered)
    assert high == len(records)
    for p in range(3):  # every replica has the whole log, and the followers' HW caught up
        def replicated():
            ends = {b: partition_status(rc, b, "rf3", p) for b in (1, 2, 3)}
            return all(s["log_end_offset"] == s["high_watermark"] == ends[1]["log_end_offset"] for s in ends.values())
        wait_until(replicated, 20, f"rf3-{p} replicated to every broker")


def test_stopped_follower_leaves_the_isr_catches_up_and_rejoins(rc):
    rc.create_topic("lag", partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
    leader, _ = isr(rc, "lag")
    follower = next(b for b in (1, 2, 3) if b != leader)
    rc.run("kill", str(follower))
    try:
        assert produce_acks_all(rc, "lag", 500) == [], "acks=all with 2 of 3 replicas alive"
        wait_until(lambda: follower not in isr(rc, "lag")[1], 30, f"broker {follower} to leave the ISR")
        assert produce_acks_all(rc, "lag", 500) == []
    finally:
        rc.run("start", str(follower))
    wait_until(lambda: follower in isr(rc, "lag")[1], 60, f"broker {follower} to rejoin the ISR")
    current, _ = isr(rc, "lag")
    lead = partition_status(rc, current, "lag")
    back = wait_until(lambda: (s := partition_status(rc, follower, "lag"))["log_end_offset"] == lead["log_end_offset"]
                      and s, 30, "the returning follower to catch up")
    assert back["log_end_offset"] >= 1000
    assert back["leader_epochs"] == partition_status(rc, current, "lag")["leader_epochs"]


def test_min_insync_replicas_refuses_then_recovers(rc):
    from confluent_kafka import KafkaError
    rc.create_topic("minisr", partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
    leader, _ = isr(rc, "minisr")
    others = [b for b in (1, 2, 3) if b != leader]
    for b in others:
        rc.run("kill", str(b))
    try:
        wait_until(lambda: isr(rc, "minisr") == (leader, [leader]), 30, "the ISR to shrink to the leader")
        errors = produce_acks_all(rc, "minisr", 10)
        assert errors and all(e.code() == KafkaError.NOT_ENOUGH_REPLICAS for e in errors), errors[:3]
        assert produce_acks_all(rc, "minisr", 10, acks="1") == [], "acks=1 still works"
    finally:
        rc.run("start", str(others[0]))
    try:
        wait_until(lambda: len(isr(rc, "minisr")[1]) == 2, 60, "a returning broker to rejoin the ISR")
        assert produce_acks_all(rc, "minisr", 10) == []
    finally:
        rc.run("start", str(others[1]))
    wait_until(lambda: len(isr(rc, "minisr")[1]) == 3, 60, "the last broker to rejoin the ISR")


def test_controlled_shutdown_of_a_leader_shows_no_produce_error(rc):
    from confluent_kafka import Producer
    rc.create_topic("cs", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
    victim = rc.leader_id("cs", 0)
    producer = Producer({"bootstrap.servers": rc.bootstrap, "acks": "all", "linger.ms": 5})  # default retries
    errors, acked = [], []
    stop = threading.Event()

    def produce():
        i = 0
        while not stop.is_set():
            try:
                producer.produce("cs", key=b"%d" % (i % 97), value=b"%d" % i,
                                 on_delivery=lambda e, m: errors.append(e) if e is not None else acked.append(1))
                i += 1
            except BufferError:
                pass
            producer.poll(0.002)
    worker = threading.Thread(target=produce)
    worker.start()
    try:
        wait_until(lambda: len(acked) > 500, 30, "produce to get going")
        rc.run("kill", str(victim), "--graceful")
        before = len(acked)
        wait_until(lambda: len(acked) > before + 500, 30, "produce to go on after the shutdown")
    finally:
        stop.set()
        worker.join(30)
        producer.flush(60)
        rc.run("start", str(victim))
    assert errors == [], f"{len(errors)} delivery errors, first {errors[:3]}"
    log = (rc.data_dir / "logs" / f"broker-{victim}.log").read_text()
    assert "controlled shutdown done" in log, "the broker stopped without moving its leaderships first"
    wait_until(lambda: all(len(isr(rc, "cs", p)[1]) == 3 for p in range(3)), 60, "the broker to rejoin every ISR")


def _values(c: Cluster, topic: str, expected: int) -> list[bytes]:
    got, _ = confluent_consume(c.bootstrap, topic, 1, expected)
    return [g.value for g in sorted(got, key=lambda g: g.offset)]


def test_unclean_leader_election_off_keeps_the_partition_offline_on_accepts_the_loss(rc):
    """Only an out-of-sync replica is left: offline while unclean election is off; turning it
    on elects that replica, and the records only the dead leader had acknowledged are gone
    (their offsets are reused by new records once the old leader truncates to the new one)."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    rc.create_topic("unclean", partitions=1, replication_factor=2, config={"min.insync.replicas": "1"})
    leader, replicas = isr(rc, "unclean")
    follower = next(b for b in replicas if b != leader)
    assert produce_acks_all(rc, "unclean", 100) == []              # on both replicas
    rc.run("kill", str(follower))
    try:
        wait_until(lambda: isr(rc, "unclean") == (leader, [leader]), 30, "the ISR to shrink to the leader")
        assert produce_acks_all(rc, "unclean", 50, acks="1") == []   # acknowledged by the leader alone
        rc.run("kill", str(leader))
        rc.run("start", str(follower))
        wait_until(lambda: follower in rc.admin().list_topics(timeout=10).brokers
                   and leader not in rc.admin().list_topics(timeout=10).brokers, 60,
                   f"broker {follower} back and broker {leader} gone")
        assert isr(rc, "unclean")[0] == -1, "an out-of-sync replica was elected with unclean election off"
        offline = rc.admin().list_topics("unclean", timeout=10).topics["unclean"].partitions[0]
        assert offline.error is not None and offline.error.code() == KafkaError.LEADER_NOT_AVAILABLE
        assert [e.code() for e in produce_acks_all(rc, "unclean", 1, **{"message.timeout.ms": 3000})] \
            == [KafkaError._MSG_TIMED_OUT], "a producer waits for a leader and times out, as with Kafka"

        resource = ConfigResource("topic", "unclean", incremental_configs=[
            ConfigEntry("unclean.leader.election.enable", "true", incremental_operation=AlterConfigOpType.SET)])
        admin = rc.admin()  # the handle must outlive its future
        admin.incremental_alter_configs([resource])[resource].result(30)
        wait_until(lambda: isr(rc, "unclean")[0] == follower, 30, f"the unclean election of broker {follower}")
        assert _values(rc, "unclean", 100) == [b"v%d" % i for i in range(100)], "only the replicated records survive"
        assert produce_acks_all(rc, "unclean", 10) == []
    finally:
        rc.run("start", str(leader), check=False)
        rc.run("start", str(follower), check=False)
    wait_until(lambda: sorted(isr(rc, "unclean")[1]) == sorted(replicas), 60, "the old leader to rejoin the ISR")
    back = wait_until(lambda: (s := partition_status(rc, leader, "unclean"))["log_end_offset"] == 110 and s, 30,
                      "the old leader to truncate to the new leader's log")
    values = _values(rc, "unclean", 110)
    assert values == [b"v%d" % i for i in range(100)] + [b"v%d" % i for i in range(10)], \
        "offsets 100-109 now hold the new records; the 50 acks=1 records are lost"
    assert back["high_watermark"] == 110


def test_controlled_shutdown_does_not_wait_on_single_replica_partitions(rc):
    """A broker leading RF=1 partitions (which nobody can take over) and RF=3 ones: SIGTERM
    moves the RF=3 leaderships and exits without sitting out the followership wait."""
    rc.create_topic("cs-rf1", partitions=3, replication_factor=1)
    rc.create_topic("cs-rf3", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
    victim = rc.leader_id("cs-rf3", 0)
    assert victim in rc.partition_leaders("cs-rf1").values()      # (i + j) mod n: one RF=1 partition per broker
    log_path = rc.data_dir / "logs" / f"broker-{victim}.log"
    rc.run("kill", str(victim), "--graceful")
    try:
        log = log_path.read_text()
        assert "controlled shutdown done" in log
        assert "controlled shutdown: still leading" not in log, "the shutdown waited on a partition it cannot move"
        assert victim not in rc.partition_leaders("cs-rf3").values()
    finally:
        rc.run("start", str(victim))
    wait_until(lambda: all(len(isr(rc, "cs-rf3", p)[1]) == 3 for p in range(3)), 60, "the broker to rejoin every ISR")


def _broker_epochs(c: Cluster) -> dict[int, int]:
    """Each registered broker's epoch (its registration znode's czxid), as the controller sees it."""
    return {b["id"]: b["epoch"] for b in c.status_cluster()["brokers"]}


def test_a_zookeeper_restart_within_the_session_timeout_changes_nothing(rc):
    """Issue 15, finding 6: ZooKeeper killed and started again a few seconds later (well within
    zookeeper.session.timeout.ms, 18 s): every session survives (same broker epochs), no ISR
    shrinks at any moment, during the outage or after it, and acks=all produce works."""
    topic = "zk-restart"
    rc.create_topic(topic, partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
    wait_until(lambda: all(len(isr(rc, topic, p)[1]) == 3 for p in range(3)), 30, "every ISR full")
    epochs = _broker_epochs(rc)
    urls = [b["internal_url"] for b in rc.status_cluster()["brokers"]]  # the controller is out during the outage
    shrunk = []

    def watch(seconds: float) -> None:
        """Every broker's view of every ISR, polled for ``seconds``; a short one is recorded."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for url in urls:
                views = [p for p in status_at(url)["partitions"] if p["topic"] == topic]
                assert len(views) == 3, views
                shrunk.extend((url, p["partition"], p["isr"]) for p in views if len(p["isr"]) != 3)
            time.sleep(0.2)
    rc.run("kill", "zookeeper")
    try:
        watch(4.0)                                    # ZooKeeper down
    finally:
        rc.run("start", "zookeeper")
    wait_until(lambda: rc.status_cluster()["brokers"], 30, "the controller to serve again")
    watch(2 * LAG_MS / 1000)                          # long enough for a lagging follower to be dropped
    assert shrunk == [], f"ISRs shrank: {shrunk[:5]}"
    assert _broker_epochs(rc) == epochs, "a broker registered again: its ZooKeeper session had expired"
    assert produce_acks_all(rc, topic, 200) == []


THROTTLE = 1_000_000                # B/s, kafka-reassign-partitions --throttle
MOVED_PER_PARTITION = 6_000_000     # two partitions: 12 s of moving at the throttle
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


def _replication_metrics(c: Cluster, broker_id: int) -> tuple[float, float]:
    """(LeaderReplication byte rate, replication bytes sent so far) from the broker's /metrics."""
    import urllib.request
    from prometheus_client.parser import text_string_to_metric_families
    with urllib.request.urlopen(c.status()["metrics_url"][f"broker-{broker_id}"], timeout=10) as r:
        samples = {s.name: s.value for f in text_string_to_metric_families(r.read().decode()) for s in f.samples}
    return (samples["kafka_server_leaderreplication_byte_rate"],
            samples["kafka_server_brokertopicmetrics_replicationbytesout_total"])


def _tool_output(proc) -> str:
    assert proc.returncode == 0, f"exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_a_reassignment_under_kafkas_throttle_moves_at_the_throttle_then_verify_clears_it(rc, tmp_path):
    """Kafka's ``kafka-reassign-partitions --execute --throttle`` moves two partitions off broker
    1 (to 2 and 3): the leader's replication bytes out over the move stay under the throttle
    (+20%) and are not starved, its LeaderReplication byte rate reports the move; ``--verify``
    sees it complete and clears the configs."""
    import json
    from confluent_kafka import Producer
    from confluent_kafka.admin import ConfigResource, NewTopic
    from tests.support.kafka_tools import Endpoint, require_kafka
    require_kafka()
    admin = rc.admin()
    admin.create_topics([NewTopic("throttled", 2, replica_assignment=[[1], [1]])])["throttled"].result(timeout=60)
    rc.wait_for_leaders("throttled", 2)
    producer = Producer({"bootstrap.servers": rc.bootstrap, "acks": "all", "linger.ms": 20})
    for i in range(2 * MOVED_PER_PARTITION // 10_000):
        producer.produce("throttled", value=b"%09d" % i + b"x" * 9_991, partition=i % 2)
        producer.poll(0)
    assert producer.flush(60) == 0
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "throttled", "partition": 0, "replicas": [2]}, {"topic": "throttled", "partition": 1, "replicas": [3]}]}))
    tool = Endpoint("odradek", rc.bootstrap)
    _, sent_before = _replication_metrics(rc, 1)
    started = time.monotonic()
    out = _tool_output(tool.tool(REASSIGN, "--execute", "--throttle", str(THROTTLE), "--reassignment-json-file", str(plan)))
    assert f"The inter-broker throttle limit was set to {THROTTLE} B/s" in out
    samples = []   # (seconds since --execute, leader byte rate, bytes sent)

    def moved() -> bool:
        rate, sent = _replication_metrics(rc, 1)
        samples.append((time.monotonic() - started, rate, sent - sent_before))
        parts = admin.list_topics("throttled", timeout=10).topics["throttled"].partitions
        return [parts[0].replicas, parts[1].replicas] == [[2], [3]]
    wait_until(moved, 120, "the reassignment to complete", interval=0.5)
    # while moving: from the first sample with bytes sent (the first fetches' burst) to the first with all sent
    total = samples[-1][2]
    first = next(i for i, s in enumerate(samples) if s[2] > 0)
    last = next(i for i, s in enumerate(samples) if s[2] >= total)
    (t0, _, b0), (t1, _, b1) = samples[first], samples[last]
    mean_rate = sum(rate for _, rate, _ in samples[first:last + 1]) / (last + 1 - first)
    print(f"\nthrottle {THROTTLE} B/s: {total:.0f} bytes sent in {t1:.1f} s after --execute, moved in "
          f"{samples[-1][0]:.1f} s; from the metrics while moving: {(b1 - b0) / (t1 - t0):.0f} B/s sent, LeaderReplication byte rate "
          f"{mean_rate:.0f} B/s on average")
    assert total >= 2 * MOVED_PER_PARTITION, "every byte of both partitions went through broker 1's quota"
    # the throttle holds: never more than 20% over it; a loaded machine may move slower (a CI run
    # measured -17% and then more), so the lower side only shows the move is not starved
    assert 0.5 * THROTTLE <= (b1 - b0) / (t1 - t0) <= 1.2 * THROTTLE
    assert 0 < mean_rate <= 1.3 * THROTTLE   # Kafka's windowed rate starts high over its first windows
    verified = wait_until(lambda: v if "Clearing" in (v := _tool_output(tool.tool(
                              REASSIGN, "--verify", "--reassignment-json-file", str(plan)))) else None,
                          60, "--verify to see the reassignment complete", interval=1)
    assert "Reassignment of partition throttled-0 is completed." in verified
    assert "Clearing topic-level throttles on topic throttled" in verified

    def cleared() -> bool:
        resources = [ConfigResource("topic", "throttled"), *(ConfigResource("broker", str(b)) for b in (1, 2, 3))]
        described = [f.result() for r in resources for f in admin.describe_configs([r]).values()]  # one BROKER a call
        return not any("throttled" in name and entry.value not in ("", None) and not entry.is_default
                       for configs in described for name, entry in configs.items())
    wait_until(cleared, 30, "the throttle configs removed", interval=0.5)


def readiness(c: Cluster, broker_id: int) -> dict | None:
    """The broker's readiness answer at its URL in ``dev status --json`` (None: not answering);
    HTTP 200 exactly when ready (the probe reads the status)."""
    import json
    import urllib.error
    import urllib.request
    url = c.status()["readiness_url"].get(str(broker_id))
    if url is None:
        return None
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            status, body = resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        status, body = e.code, json.loads(e.read())
    except OSError:
        return None
    assert (status == 200) == body["ready"], (status, body)
    return body


def _throttle(c: Cluster, topic: str, brokers, rate: str | None) -> None:
    """Kafka's leader-side replication throttle on ``topic`` at ``rate`` B/s (None: removed)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    op = AlterConfigOpType.SET if rate is not None else AlterConfigOpType.DELETE
    resources = [ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("leader.replication.throttled.replicas", "*" if rate else None, incremental_operation=op)])]
    resources += [ConfigResource(ResourceType.BROKER, str(b), incremental_configs=[
        ConfigEntry("leader.replication.throttled.rate", rate, incremental_operation=op)]) for b in brokers]
    admin = c.admin()
    for resource in resources:  # librdkafka takes one BROKER resource a call
        admin.incremental_alter_configs([resource])[resource].result(30)


def test_a_restarted_broker_is_not_ready_while_out_of_an_isr_and_ready_once_back(rc):
    """Readiness means "safe to take the next broker down": a broker restarted after records
    were produced without it stays not-ready (503) while serving, as long as the leader holds
    its catch-up at a replication throttle, and turns ready (200) once it is back in the ISR."""
    from confluent_kafka import Producer
    rc.create_topic("ready", partitions=1, replication_factor=3)
    leader, _ = isr(rc, "ready")
    follower = next(b for b in (1, 2, 3) if b != leader)
    wait_until(lambda: (r := readiness(rc, follower)) is not None and r["ready"], 30, f"broker {follower} ready")
    rc.run("kill", str(follower), "--graceful")
    others = [b for b in (1, 2, 3) if b != follower]
    try:
        _throttle(rc, "ready", others, "10000")  # 4 MB behind at 10 kB/s: minutes to catch up
        producer = Producer({"bootstrap.servers": rc.bootstrap, "acks": "all", "linger.ms": 20})
        for i in range(400):
            producer.produce("ready", value=b"%09d" % i + b"x" * 9_991)
            producer.poll(0)
        assert producer.flush(60) == 0
    finally:
        rc.run("start", str(follower))
    try:
        held = wait_until(lambda: (r := readiness(rc, follower)) is not None and r["state"] == "RUNNING" and r,
                          60, f"broker {follower} serving")
        assert not held["ready"] and held["out_of_isr"] == 1, held
        assert follower not in isr(rc, "ready")[1]
    finally:
        _throttle(rc, "ready", others, None)
    back = wait_until(lambda: (r := readiness(rc, follower)) is not None and r["ready"] and r, 90,
                      f"broker {follower} back in the ISR and ready")
    assert back == {"broker_id": follower, "ready": True, "state": "RUNNING", "out_of_isr": 0}
    assert follower in isr(rc, "ready")[1]
