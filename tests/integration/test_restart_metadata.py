"""A restarted broker answers clients only once it holds the controller's metadata.

Before its first snapshot a broker knows no broker and no topic: answering Metadata then told
librdkafka that the cluster was empty, and it dropped every broker it knew and re-bootstrapped
(a read_committed consumer then stalled for minutes in offset validation; found by
test_verify_transactional). Connections wait in the listen backlog until the snapshot comes."""

from __future__ import annotations

import socket

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


def test_a_restarted_broker_serves_clients_only_with_the_controllers_metadata(tmp_path):
    cluster = start_cluster(tmp_path / "cluster", brokers=2)
    try:
        cluster.create_topic(TOPIC, partitions=2, replication_factor=2)
        cluster.run("kill", "controller-0")   # no controller: the restarted broker gets no snapshot
        cluster.run("kill", "2")
        cluster.run("start", "2")            # returns once its logs are open
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
    finally:
        stop_cluster(cluster)
