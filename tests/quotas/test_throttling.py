"""Client quotas enforced on a two-broker dev cluster, with real clients (librdkafka).

A ``producer_byte_rate`` quota of N bytes/s on one client id: once its rate's samples are
full (Kafka's 11 windows of 1 s; the first ~10 s of bytes pass at once, as on Kafka), the
producer's rate over a span of 11 s stays within 20% of N and librdkafka reports throttle times; a second client
on the same broker, without a quota, keeps its own rate and is never throttled. A
``consumer_byte_rate`` quota throttles a consumer the same way. A quota altered through one
broker is applied by the other (the ``/config/changes`` notification)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.dev.waiting import wait_until
from odradek.protocol.codec import EntityType, Schemas, make
from tests.support.kafka_wire import WireClient
from tests.support.prometheus import broker_metrics

N = 100_000                 # the slow client's quota, bytes/s
VALUE = b"q" * 2000
# seconds: the rate measured once the samples are full, over one whole span of samples (the
# bytes of a sample that expires are room for a burst: any shorter span may catch one)
STEADY_FROM, STEADY_TO = 11.0, 22.0


def alter_client_quota(bootstrap: str, client_id: str, key: str, value: float | None,
                       entity_type: str = "client-id") -> None:
    """AlterClientQuotas sent to the first broker (which applies it before it answers); None removes."""
    s = Schemas(49, 1, EntityType.request)
    body = make(s.AlterClientQuotasRequest, validate_only=False, entries=(make(
        s.EntryData, entity=(make(s.EntityData, entity_type=entity_type, entity_name=client_id),),
        ops=(make(s.OpData, key=key, value=value or 0.0, remove=value is None),)),))
    with WireClient(bootstrap.split(",")[0]) as wire:
        answer = wire.request(49, 1, body)
    assert [e.error_code for e in answer.entries] == [0], answer


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(30)


class Paced:
    """A producer sending ``VALUE``s as fast as it may (or at ``target`` bytes/s), recording
    when each was acknowledged and the throttle times librdkafka reports."""

    def __init__(self, bootstrap: str, client_id: str, topic: str, target: float | None = None) -> None:
        self.throttles: list[float] = []
        self.acked: list[float] = []
        self.topic, self.target = topic, target
        self.producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                                  "queue.buffering.max.kbytes": 256, "throttle_cb": self._throttled})
        self.sent = 0

    def _throttled(self, event) -> None:
        if event.throttle_time > 0:
            self.throttles.append(event.throttle_time)

    def _delivered(self, err, _msg) -> None:
        if err is None:
            self.acked.append(time.monotonic())

    def step(self, started: float) -> None:
        if self.target is not None and self.sent * len(VALUE) > self.target * (time.monotonic() - started):
            return
        try:
            self.producer.produce(self.topic, VALUE, on_delivery=self._delivered)
            self.sent += 1
        except BufferError:
            pass

    def rate(self, started: float, lo: float, hi: float) -> float:
        return sum(1 for t in self.acked if lo <= t - started < hi) * len(VALUE) / (hi - lo)


def test_a_producer_quota_holds_the_rate_and_leaves_other_clients_alone(cluster):
    bootstrap = cluster.bootstrap
    create_topic(bootstrap, "quota-produce")
    alter_client_quota(bootstrap, "slow", "producer_byte_rate", N)
    slow = Paced(bootstrap, "slow", "quota-produce")
    other = Paced(bootstrap, "other", "quota-produce", target=3 * N)
    started = time.monotonic()
    while time.monotonic() - started < STEADY_TO:
        slow.step(started)
        other.step(started)
        slow.producer.poll(0.001)
        other.producer.poll(0)
    for p in (slow, other):
        p.producer.flush(30)
    slow_rate = slow.rate(started, STEADY_FROM, STEADY_TO)
    other_rate = other.rate(started, STEADY_FROM, STEADY_TO)
    assert 0.8 * N <= slow_rate <= 1.2 * N, (slow_rate, len(slow.throttles))
    assert slow.throttles, "librdkafka reported no throttle time"
    assert other_rate >= 2.5 * N and not other.throttles, (other_rate, other.throttles)
    # Kafka's sensor kafka.server:type=Produce,client-id=slow in Strimzi's names; none for "other"
    series = broker_metrics(cluster, cluster.leader_address("quota-produce", 0))
    slow_labels = frozenset({"resource": "Produce", "clientId": "slow"}.items())
    assert 0 < series[("kafka_server_quota_byte_rate", slow_labels)] <= 1.5 * N  # decays once it stopped
    assert series[("kafka_server_quota_throttle_time", slow_labels)] > 0
    assert not [k for k in series if k[0].startswith("kafka_server_quota_") and ("clientId", "other") in k[1]]


def test_a_consumer_quota_throttles_fetches(cluster):
    bootstrap = cluster.bootstrap
    create_topic(bootstrap, "quota-fetch")
    producer = Producer({"bootstrap.servers": bootstrap})
    for _ in range(1500):   # 3 MB
        producer.produce("quota-fetch", VALUE)
    producer.flush(30)
    alter_client_quota(bootstrap, "slow-reader", "consumer_byte_rate", N)
    throttles = []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "quota-readers", "client.id": "slow-reader",
                         "auto.offset.reset": "earliest",
                         "max.partition.fetch.bytes": 200_000,
                         "throttle_cb": lambda e: throttles.append(e.throttle_time) if e.throttle_time else None})
    consumer.subscribe(["quota-fetch"])
    got, started = 0, time.monotonic()
    try:
        while time.monotonic() - started < 15 and got < 1500:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got += 1
    finally:
        consumer.close()
    elapsed = time.monotonic() - started
    # ~1 MB passes at once (10 windows of N), then N per second: 3 MB take ~20 s
    assert got * len(VALUE) <= N * (elapsed + 11) * 1.2, (got, elapsed)
    assert throttles, "librdkafka reported no throttle time"


def test_a_quota_altered_on_one_broker_is_enforced_by_the_other(cluster):
    create_topic(cluster.bootstrap, "quota-spread", partitions=2)
    leaders = cluster.wait_for_leaders("quota-spread", 2)
    far = next(p for p, broker in leaders.items() if broker != 1)
    alter_client_quota(cluster.brokers[1], "far", "producer_byte_rate", 1000)   # through broker 1 only
    throttles = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "client.id": "far", "linger.ms": 5,
                         "throttle_cb": lambda e: throttles.append(e.throttle_time) if e.throttle_time else None})

    def throttled() -> bool:
        for _ in range(10):     # 20 kB a round: past the ~10 s x 1000 B/s a new sensor allows
            producer.produce("quota-spread", VALUE, partition=far)
        producer.poll(0.5)
        return bool(throttles)
    wait_until(throttled, 30, f"broker {leaders[far]} throttling client 'far'")
    producer.flush(30)


def test_a_request_quota_throttles_a_fetch_in_its_own_answer(cluster):
    """``request_percentage`` over its quota: a consumer's Fetch is answered empty with the
    throttle time (at most one window), as Kafka's KafkaApis answers it; the records stay there
    for the next fetch once the quota is gone."""
    import datetime

    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
    create_topic(cluster.bootstrap, "quota-request")
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    producer.produce("quota-request", VALUE)
    assert producer.flush(30) == 0
    leader = cluster.leader_address("quota-request", 0)
    request = FetchRequest(replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
                           isolation_level=0, session_id=0, session_epoch=-1, topics=(FetchTopic(
                               topic="quota-request", partitions=(FetchPartition(
                                   partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                                   log_start_offset=-1, partition_max_bytes=1 << 20),)),),
                           forgotten_topics_data=(), rack_id="")
    def fetched():
        with WireClient(leader, timeout=30, client_id="cpu-hog") as wire:  # a new one: a throttled one is muted
            return wire.request(1, 12, request)
    alter_client_quota(leader, "cpu-hog", "request_percentage", 0.0001)
    try:  # in force on the broker that answered AlterClientQuotas
        throttled = fetched()
    finally:
        alter_client_quota(leader, "cpu-hog", "request_percentage", None)
    assert throttled.throttle_time.total_seconds() <= 1.0 and throttled.responses == (), throttled
    answer = fetched()
    assert answer.throttle_time.total_seconds() == 0 and answer.responses[0].partitions[0].records
    series = broker_metrics(cluster, leader)
    assert series[("kafka_server_quota_throttle_time", frozenset({"resource": "Request", "clientId": "cpu-hog"}
                                                                  .items()))] > 0
