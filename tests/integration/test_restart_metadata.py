"""A restarted broker answers clients only once it holds the controller's metadata.

Before its first snapshot a broker knows no broker and no topic: answering Metadata then told
librdkafka that the cluster was empty, and it dropped every broker it knew and re-bootstrapped
(a read_committed consumer then stalled for minutes in offset validation; found by
test_verify_transactional). Connections wait in the listen backlog until the snapshot comes.

A restarted process binds the ports ``odradek dev up`` recorded for it (clients know them); one
taken meanwhile makes ``odradek dev start`` fail at once, saying so, never hang."""

from __future__ import annotations

import socket

import pytest

from kio.schema.types import TopicName
from kio.static.constants import EntityType

from odradek.dev.harness import start_cluster, stop_cluster
from odradek.protocol.codec import Schemas, make
from tests.support.kafka_wire import WireClient

METADATA = 3
TOPIC = "restart-metadata"


def _metadata_request():
    s = Schemas(METADATA, 9, EntityType.request)
    return make(s.MetadataRequest, topics=(make(s.MetadataRequestTopic, name=TopicName(TOPIC)),),
                allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("cluster"), brokers=2)
    yield c
    stop_cluster(c)


def test_a_restarted_broker_serves_clients_only_with_the_controllers_metadata(cluster):
    cluster.create_topic(TOPIC, partitions=2, replication_factor=2)
    cluster.run("kill", "controller-0")   # no controller: the restarted broker gets no snapshot
    cluster.run("kill", "2")
    cluster.run("start", "2")            # returns once it reports its ports (its logs open, nothing served)
    with WireClient(cluster.brokers[2], timeout=3) as client:
        client.send_raw(client.encode(METADATA, 9, _metadata_request()))
        try:
            frame = client.read_frame()
        except socket.timeout:
            frame = None
        assert frame is None, f"answered without metadata: {client.decode(METADATA, 9, frame)}"
        cluster.run("start", "controller-0")
        client.sock.settimeout(60)
        response = client.decode(METADATA, 9, client.read_frame())
    assert sorted(b.node_id for b in response.brokers) == [1, 2]
    (topic,) = response.topics
    assert topic.error_code == 0 and len(topic.partitions) == 2


def test_a_restart_on_a_port_taken_meanwhile_fails_saying_so_and_then_binds_the_same_port(cluster):
    address = cluster.brokers[1]
    cluster.run("kill", "1")
    host, port = address.rsplit(":", 1)
    with socket.create_server((host, int(port))):   # someone else took broker 1's Kafka port
        failed = cluster.run("start", "1", check=False)
    assert failed.returncode == 1, failed.stdout
    assert "broker-1 failed to start" in failed.stderr and "address already in use" in failed.stderr.lower(), \
        failed.stderr
    cluster.run("start", "1")
    cluster.refresh()
    assert cluster.brokers[1] == address
    assert cluster.status()["ports"]["broker-1"]["kafka"] == int(port)
    cluster.wait_for_leaders(TOPIC, 2)
