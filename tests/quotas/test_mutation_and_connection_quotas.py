"""Connection creation rates (KIP-612) and the controller mutation quota (KIP-599) on a dev
cluster. Mutations, with the quota set by Kafka's own ``kafka-configs``: over the quota, CreateTopics v6+, CreatePartitions v3+ and DeleteTopics v5+
answer THROTTLING_QUOTA_EXCEEDED per topic with the throttle time (a topic that fails Kafka's
earlier checks keeps its own error), older versions are taken and throttled; the connection is
muted for the throttle time (KIP-219). Connections: over an address's rate they are closed
after the throttle time, over the broker's rate accepting waits (none refused)."""

from __future__ import annotations

import datetime
import time

from tests.support.kafka_tools import CONFIG_COMMAND, Endpoint, require_kafka
from tests.support.kafka_wire import WireClient
from tests.support.prometheus import broker_metrics

RATE = 2.0            # partitions per second; a full bucket holds 11 windows' worth: 22
CLIENT = "mutator"
THROTTLED, EXISTS = 89, 36


def _create(wire: WireClient, version: int, *topics: tuple[str, int]):
    from importlib import import_module
    r = import_module(f"kio.schema.create_topics.v{version}.request")
    body = r.CreateTopicsRequest(topics=tuple(
        r.CreatableTopic(name=n, num_partitions=p, replication_factor=1, assignments=(), configs=())
        for n, p in topics), timeout=datetime.timedelta(seconds=30), validate_only=False)
    return wire.request(19, version, body)


def _grow(wire: WireClient, topic: str, count: int):
    from kio.schema.create_partitions.v3 import request as r
    body = r.CreatePartitionsRequest(topics=(r.CreatePartitionsTopic(name=topic, count=count, assignments=None),),
                                     timeout=datetime.timedelta(seconds=30), validate_only=False)
    return wire.request(37, 3, body)


def _delete(wire: WireClient, topic: str):
    from kio.schema.delete_topics.v5 import request as r
    return wire.request(20, 5, r.DeleteTopicsRequest(topic_names=(topic,), timeout=datetime.timedelta(seconds=30)))


def _ms(throttle) -> float:
    return throttle.total_seconds() * 1000


def test_mutations_over_the_quota_are_refused_by_new_versions_and_throttled_on_old(cluster):
    require_kafka()
    first = cluster.bootstrap.split(",")[0]  # every request goes to one broker: its bucket
    out = Endpoint("odradek", cluster.bootstrap).tool(CONFIG_COMMAND, "--entity-type", "clients", "--entity-name", CLIENT,
                                                  "--alter", "--add-config", f"controller_mutation_rate={RATE:g}")
    assert out.returncode == 0, out
    with WireClient(first, client_id="other") as other:  # created before: a topic that exists
        assert [t.error_code for t in _create(other, 7, ("existing", 1)).topics] == [0]
    # each throttled answer mutes its connection: every request below has its own
    wire, second, third, fourth = (WireClient(first, timeout=30, client_id=CLIENT) for _ in range(4))
    try:
        # a full bucket (22) takes the 30 partitions of the first topic, going 8 below zero
        answer = _create(wire, 7, ("burst", 30), ("refused", 1), ("existing", 1))
        answered = time.monotonic()
        assert [(t.name, t.error_code, t.error_message) for t in answer.topics] == [
            ("burst", 0, None), ("refused", THROTTLED, None), ("existing", EXISTS, "Topic 'existing' already exists.")]
        assert 3000 <= _ms(answer.throttle_time) <= 4000, answer.throttle_time  # 8 partitions at 2/s

        grown = _grow(second, "burst", 31)
        assert [(r.error_code, r.error_message) for r in grown.results] == [(THROTTLED, None)]
        assert _ms(grown.throttle_time) > 2000
        assert [(r.name, r.error_code) for r in _delete(third, "burst").responses] == [("burst", THROTTLED)]
        old = _create(fourth, 5, ("taken", 2))  # v5, before KIP-599's error: taken, and throttled
        assert [(t.name, t.error_code) for t in old.topics] == [("taken", 0)]
        assert _ms(old.throttle_time) > _ms(grown.throttle_time)

        _create(wire, 7, ("after-mute", 0))  # read by the broker only once the first mute ended
        assert time.monotonic() - answered >= _ms(answer.throttle_time) / 1000 - 0.2
    finally:
        for w in (wire, second, third, fourth):
            w.close()
    with WireClient(first, client_id="other") as other:  # other clients are not held back
        free = _delete(other, "taken")
        assert [r.error_code for r in free.responses] == [0] and _ms(free.throttle_time) == 0
    # Kafka's sensors (kafka.server:type=ControllerMutation,client-id=mutator) in Strimzi's names
    series = broker_metrics(cluster, first)
    labels = frozenset({"resource": "ControllerMutation", "clientId": CLIENT}.items())
    assert series[("kafka_server_quota_throttle_time", labels)] >= 2000
    assert series[("kafka_server_quota_tokens", labels)] < 22
    assert series[("kafka_server_quota_mutation_rate", labels)] > 0


def _answered(address: str, source: str | None = None) -> bool:
    """A new connection's ApiVersions answered (False: closed by the broker unanswered)."""
    from kio.schema.api_versions.v0 import request as r
    with WireClient(address, timeout=30, source=source) as wire:
        try:
            wire.request(18, 0, r.ApiVersionsRequest())
            return True
        except ConnectionError:
            return False


def test_connections_over_an_address_rate_are_closed_after_the_throttle_others_served(cluster):
    """``connection_creation_rate`` of ip 127.0.0.2: 2/s, i.e. 20 connections at once (Kafka's
    young rate divides by at least 10 windows), then further ones closed unanswered after their
    throttle time; connections from 127.0.0.1 meanwhile are served at once."""
    from tests.quotas.test_throttling import alter_client_quota
    first = cluster.bootstrap.split(",")[0]
    alter_client_quota(first, "127.0.0.2", "connection_creation_rate", 2, entity_type="ip")
    try:
        assert all(_answered(first, source="127.0.0.2") for _ in range(20))
        later = []  # (served, seconds until answered or closed): the rate recovers while one waits
        for _ in range(5):
            started = time.monotonic()
            later.append((_answered(first, source="127.0.0.2"), time.monotonic() - started))
        refused = [took for served, took in later if not served]
        assert refused and min(refused) >= 0.2, later  # closed once its throttle time passed
        series = broker_metrics(cluster, first)
        listener = frozenset({"listener": "PLAINTEXT"}.items())
        assert series[("kafka_server_socket_server_metrics_ip_connection_accept_throttle_time", listener)] >= 200
        assert series[("kafka_server_socket_server_metrics_connection_accept_rate", listener)] > 0
        started = time.monotonic()
        assert _answered(first) and time.monotonic() - started < 0.5, "another address was held back"
    finally:
        alter_client_quota(first, "127.0.0.2", "connection_creation_rate", None, entity_type="ip")


def test_connections_over_the_broker_rate_wait_to_be_accepted(cluster):
    """``max.connection.creation.rate=2`` on one broker, set with ``kafka-configs``: past the
    first 20, new connections are all served, but accepted about 2 per second, none waiting
    more than a window (Kafka's bound)."""
    from tests.admin.test_dynamic_configs import describe_wire
    first = cluster.bootstrap.split(",")[0]
    broker = next(i for i, a in cluster.brokers.items() if a == first)
    tool = Endpoint("odradek", first)
    out = tool.tool(CONFIG_COMMAND, "--entity-type", "brokers", "--entity-name", str(broker), "--alter",
                    "--add-config", "max.connection.creation.rate=2")
    assert out.returncode == 0, out
    try:
        assert describe_wire(cluster, 4, str(broker))["max.connection.creation.rate"] == "2"
        times, served = [], []
        for _ in range(24):  # the 20 a young rate lets through at once (fewer: earlier tests' count too)
            started = time.monotonic()
            served.append(_answered(first))
            times.append(time.monotonic() - started)
        assert all(served), served
        assert sum(times[-4:]) >= 1.5, f"4 connections past the burst at 2/s took {sum(times[-4:]):.1f} s"
        assert max(times) <= 1.5, f"a connection waited {max(times):.1f} s: more than one window"
    finally:
        tool.tool(CONFIG_COMMAND, "--entity-type", "brokers", "--entity-name", str(broker), "--alter",
                  "--delete-config", "max.connection.creation.rate")
