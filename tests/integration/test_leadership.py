"""ElectLeaders and partition reassignment through the Kafka APIs (forwarded to the controller)."""

import datetime

from confluent_kafka import Consumer, ElectionType, Producer, TopicPartition
from kio.schema.alter_partition_reassignments.v0.request import (AlterPartitionReassignmentsRequest,
                                                                 ReassignablePartition, ReassignableTopic)
from kio.schema.errors import ErrorCode
from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest

from odradek.dev.waiting import wait_until
from tests.support.kafka_wire import WireClient


def _assignment(cluster, topic):
    md = cluster.admin().list_topics(topic, timeout=10).topics[topic].partitions[0]
    return md.leader, list(md.replicas), list(md.isrs)


def test_preferred_leader_election_on_request(cluster):
    cluster.create_topic("elect", partitions=1, replication_factor=3)
    leader, replicas, _ = _assignment(cluster, "elect")
    assert leader == replicas[0]
    cluster.run("kill", str(leader), "--graceful")  # controlled shutdown moves leadership away
    wait_until(lambda: _assignment(cluster, "elect")[0] not in (-1, leader), 30, "a new leader")
    cluster.run("start", str(leader))
    wait_until(lambda: leader in _assignment(cluster, "elect")[2], 60, "the preferred replica back in the ISR")
    admin = cluster.admin()
    result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("elect", 0)]).result(30)
    error = result[TopicPartition("elect", 0)]
    # the controller's automatic rebalance may have been first: then the election is not needed
    assert error is None or error.code() == ErrorCode.election_not_needed
    wait_until(lambda: _assignment(cluster, "elect")[0] == leader, 30, "the preferred leader")


def test_reassignment_moves_a_partition_and_keeps_its_data(cluster):
    cluster.create_topic("moving", partitions=1)
    source, _, _ = _assignment(cluster, "moving")
    target = next(b for b in sorted(cluster.brokers) if b != source)
    p = Producer({"bootstrap.servers": cluster.bootstrap})
    for i in range(500):
        p.produce("moving", value=f"v{i}".encode())
    assert p.flush(30) == 0
    request = AlterPartitionReassignmentsRequest(timeout=datetime.timedelta(seconds=30), topics=(
        ReassignableTopic(name="moving", partitions=(ReassignablePartition(partition_index=0, replicas=(target,)),)),))
    with WireClient(cluster.brokers[source]) as c:
        response = c.request(45, 0, request)
        assert response.error_code == ErrorCode.none
        assert [p.error_code for t in response.responses for p in t.partitions] == [ErrorCode.none]
    wait_until(lambda: _assignment(cluster, "moving")[:2] == (target, [target]), 60, "the move to finish")
    with WireClient(cluster.brokers[target]) as c:
        listed = c.request(46, 0, ListPartitionReassignmentsRequest(timeout=datetime.timedelta(seconds=10),
                                                                     topics=None))
        assert listed.error_code == ErrorCode.none and listed.topics == ()
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "moving-check",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("moving", 0, 0)])
    values = []

    def read_all() -> bool:
        values.extend(m.value() for m in consumer.consume(500, 1.0) if not m.error())
        return len(values) >= 500
    wait_until(read_all, 60, "the moved data")
    consumer.close()
    assert values == [f"v{i}".encode() for i in range(500)]
