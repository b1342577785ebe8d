"""The controller follows the dynamic cluster-wide defaults it uses, as Kafka's controller does:
``unclean.leader.election.enable`` set with ``kafka-configs --entity-type brokers
--entity-default`` elects an out-of-sync replica of a partition whose ISR is gone, unless the
topic's own override says false (then deleting that override elects it).

Its own two-broker cluster with ``replica.lag.time.max.ms=3000`` so a stopped follower leaves
the ISR within seconds; brokers stopped here are started again here."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from odradek.dev.harness import Cluster, start_cluster, stop_cluster
from odradek.dev.waiting import wait_until
from tests.support.kafka_tools import CONFIG_COMMAND, Endpoint, require_kafka

UNCLEAN = "unclean.leader.election.enable"


@pytest.fixture(scope="module")
def lagging(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("controller-defaults"), brokers=2,
                      extra=("--config", "replica.lag.time.max.ms=3000"))
    try:
        yield c
    finally:
        stop_cluster(c)


def _leader_isr(c: Cluster, topic: str) -> tuple[int, list[int]]:
    p = c.admin().list_topics(topic, timeout=10).topics[topic].partitions[0]
    return p.leader, sorted(p.isrs)


def _cluster_default(c: Cluster, change: str, value: str) -> None:
    args = ("--add-config", f"{UNCLEAN}={value}") if change == "add" else ("--delete-config", UNCLEAN)
    out = Endpoint("odradek", c.bootstrap).tool(CONFIG_COMMAND, "--entity-type", "brokers", "--entity-default",
                                                "--alter", *args)
    assert out.returncode == 0 and "Completed updating default config for brokers" in out.stdout, out


def test_unclean_election_follows_the_cluster_default_under_topic_overrides(lagging):
    require_kafka()
    leader, follower = sorted(lagging.brokers)
    admin = lagging.admin()  # the handle must outlive its futures
    topics = {"follows-default": {}, "override-off": {UNCLEAN: "false"}}
    futures = admin.create_topics([NewTopic(t, num_partitions=1, replica_assignment=[[leader, follower]], config=cfg)
                                   for t, cfg in topics.items()])
    for f in futures.values():
        f.result(60)
    for t in topics:
        wait_until(lambda t=t: _leader_isr(lagging, t) == (leader, [leader, follower]), 60, f"{t} fully in sync")
    lagging.run("kill", str(follower))
    try:
        for t in topics:
            wait_until(lambda t=t: _leader_isr(lagging, t) == (leader, [leader]), 30, f"{t}'s ISR to shrink")
        lagging.run("kill", str(leader))
        lagging.run("start", str(follower))
        wait_until(lambda: set(lagging.admin().list_topics(timeout=10).brokers) == {follower}, 60,
                   f"broker {follower} back alone")
        assert [_leader_isr(lagging, t)[0] for t in topics] == [-1, -1], "elected with unclean election off"

        _cluster_default(lagging, "add", "true")
        wait_until(lambda: _leader_isr(lagging, "follows-default") == (follower, [follower]), 30,
                   f"the unclean election of broker {follower} by the cluster default")
        assert _leader_isr(lagging, "override-off")[0] == -1, "the topic's own false must win over the default"

        resource = ConfigResource("topic", "override-off", incremental_configs=[
            ConfigEntry(UNCLEAN, None, incremental_operation=AlterConfigOpType.DELETE)])
        fresh = lagging.admin()  # connected to the live broker alone
        fresh.incremental_alter_configs([resource])[resource].result(30)
        wait_until(lambda: _leader_isr(lagging, "override-off")[0] == follower, 30,
                   "the election once the topic follows the default")
    finally:
        _cluster_default(lagging, "delete", "")
        lagging.run("start", str(leader), check=False)
        lagging.run("start", str(follower), check=False)
    for t in topics:
        wait_until(lambda t=t: len(_leader_isr(lagging, t)[1]) == 2, 60, f"{t}: the old leader back in the ISR")


def test_create_topics_reports_the_dynamic_defaults_a_new_topic_takes(lagging):
    """CreateTopics v5+ describes the new topic's configs as Kafka does: a cluster-wide dynamic
    default appears with its value and source DYNAMIC_DEFAULT_BROKER_CONFIG (3)."""
    import datetime

    from kio.schema.create_topics.v7 import request as r

    from tests.admin.test_dynamic_configs import alter_default
    from tests.support.kafka_wire import WireClient
    assert alter_default(lagging, "log.retention.ms", "3600000")[0] == 0
    try:
        body = r.CreateTopicsRequest(topics=(r.CreatableTopic(name="reports-defaults", num_partitions=1,
                                                              replication_factor=1, assignments=(), configs=()),),
                                     timeout=datetime.timedelta(seconds=30), validate_only=False)
        with WireClient(lagging.bootstrap.split(",")[0], timeout=30) as wire:
            [topic] = wire.request(19, 7, body).topics
        assert topic.error_code == 0, topic
        assert {c.name: (c.value, c.config_source) for c in topic.configs}["retention.ms"] == ("3600000", 3)
    finally:
        alter_default(lagging, "log.retention.ms", None)
