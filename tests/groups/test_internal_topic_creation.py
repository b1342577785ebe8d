"""The coordinators' topics are created as Kafka's brokers create them (KAFKA-3959): at the
configured replication factor and only once that many brokers are live; never at a lower
factor, not even when the controller sees fewer brokers than the broker does (the broker used
to ask for RF 1 then, and a group first used during a roll got an unwritable __consumer_offsets).
The broker side with a fake controller, then on a 3-broker cluster with one broker down."""

from __future__ import annotations

import asyncio
import logging
import time

from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest

from odradek.broker.internal_topic import InternalTopic
from odradek.cluster import control_plane as cp
from odradek.dev.harness import start_cluster, stop_cluster
from odradek.dev.waiting import wait_until
from odradek.errors import ErrorCode, KafkaError
from tests.support.kafka_wire import WireClient

OFFSETS, FIND_COORDINATOR = "__consumer_offsets", 10


class Replicas:
    def __init__(self, live: int) -> None:
        self.live = live

    def live_brokers(self) -> list[int]:
        return list(range(self.live))


class Controller:
    """Creates the topic unless it sees fewer live brokers (``live``) than the factor asked."""

    def __init__(self, live: int) -> None:
        self.live = live
        self.asked: list[cp.CreateTopic] = []

    async def call(self, request, timeout: float):
        topic = cp.CreateTopic.from_json(request.body)
        self.asked.append(topic)
        if topic.replication_factor > self.live:
            raise KafkaError(ErrorCode.invalid_replication_factor,
                             f"Replication factor: {topic.replication_factor} larger than available brokers: {self.live}.")


def create(broker_sees: int, controller_sees: int, factor: int = 3) -> Controller:
    controller = Controller(controller_sees)
    topic = InternalTopic("__consumer_offsets", 50, factor, {"cleanup.policy": "compact"}, Replicas(broker_sees),
                          controller, "offsets.topic.replication.factor")
    asyncio.run(topic._create())
    return controller


def test_created_at_the_configured_factor_once_enough_brokers_are_live():
    [asked] = create(broker_sees=3, controller_sees=3).asked
    assert (asked.name, asked.partitions, asked.replication_factor) == ("__consumer_offsets", 50, 3)
    assert asked.configs == {"cleanup.policy": "compact"}


def test_not_asked_for_while_fewer_brokers_are_live_with_kafkas_error(caplog):
    with caplog.at_level(logging.ERROR, logger="odradek.broker.internal_topic"):
        assert create(broker_sees=2, controller_sees=2).asked == []
    assert ("Number of alive brokers '2' does not meet the required replication factor '3' for the "
            "__consumer_offsets topic (configured via 'offsets.topic.replication.factor')") in caplog.text


def test_a_controller_that_sees_fewer_brokers_gets_no_lower_factor(caplog):
    with caplog.at_level(logging.ERROR, logger="odradek.broker.internal_topic"):
        asked = create(broker_sees=3, controller_sees=2).asked
    assert [t.replication_factor for t in asked] == [3]   # the broker used to ask again with RF 1
    assert "the controller refused __consumer_offsets with RF 3" in caplog.text


def test_a_smaller_configured_factor_is_used_as_given():
    assert [t.replication_factor for t in create(broker_sees=1, controller_sees=1, factor=1).asked] == [1]


def test_a_group_used_while_a_broker_is_down_waits_for_it_and_gets_every_replica(tmp_path):
    """A 3-broker cluster with broker 3 stopped: FindCoordinator answers COORDINATOR_NOT_AVAILABLE
    and no __consumer_offsets is made; broker 3 back, the group gets a coordinator and the topic
    three replicas per partition (the old broker made it at RF 2 here, for ever)."""
    cluster = start_cluster(tmp_path / "dev", brokers=3)
    try:
        cluster.run("kill", "3", "--graceful")
        wait_until(lambda: len(cluster.admin().list_topics(timeout=10).brokers) == 2, 60, "2 live brokers", 0.3)
        with WireClient(cluster.brokers[1]) as client:
            for _ in range(3):   # each FindCoordinator asks again (a second apart at most)
                assert find_coordinator(client, "early").error_code == ErrorCode.coordinator_not_available
                time.sleep(1.1)
            assert OFFSETS not in cluster.admin().list_topics(timeout=10).topics
            cluster.run("start", "3")
            found = wait_until(lambda: (f := find_coordinator(client, "early")).error_code == ErrorCode.none and f,
                               60, "a coordinator for group early", 0.2)
        assert found.node_id in (1, 2, 3)
        partitions = cluster.admin().list_topics(OFFSETS, timeout=10).topics[OFFSETS].partitions
        assert len(partitions) == 50 and {len(p.replicas) for p in partitions.values()} == {3}
    finally:
        stop_cluster(cluster)


def find_coordinator(client: WireClient, group: str):
    (found,) = client.request(FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=(group,))
                              ).coordinators
    return found
