"""The collectors' series over built state (no processes): names, labels and values as
docs/observability.md lists them, the partition-level switch, the request-time split, and the
JSON log format's stable keys."""

from __future__ import annotations

import asyncio
import json
import logging
from types import SimpleNamespace

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from odradek import logs, metrics_http
from odradek.broker.metrics import stats as st
from odradek.broker.metrics.collector import BrokerCollector
from odradek.broker.quotas.replication import ReplicationQuotas
from odradek.cluster.model import PartitionState
from odradek.controller.metrics import ControllerCollector
from odradek.controller.store import StoreSnapshot, TopicRecord


def samples(collector) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted label pairs): value} of one scrape, parsed back from the text format."""
    text = generate_latest(metrics_http.registry(collector)).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _partition(topic, index, replicas, isr, leading, min_isr=2, parked=0):
    state = PartitionState(index, tuple(replicas), replicas[0], 1, tuple(isr), 1, 1)
    return SimpleNamespace(topic=topic, index=index, leading=leading, state=state, isr=tuple(isr), min_isr=min_isr,
                           produces=[None] * parked)


def _log(topic, partition, start, end, hw, size):
    return SimpleNamespace(topic=topic, partition=partition, log_start_offset=start, log_end_offset=end,
                           high_watermark=hw, size=size, segments=[1, 2])


def _replication_quotas() -> ReplicationQuotas:
    quotas = ReplicationQuotas(1, clock=lambda: 100.0)
    quotas.leader.record(3000)   # within the first window: 3000 B/s
    quotas.leader.bytes_total, quotas.follower.bytes_total = 5000, 700
    return quotas


def broker_collector(partition_level=True) -> BrokerCollector:
    parts = [_partition("t", 0, [1, 2, 3], [1, 2, 3], True), _partition("t", 1, [1, 2, 3], [1], True, parked=2),
             _partition("t", 2, [2, 1, 3], [2, 1], False)]
    partition_logs = {("t", 0): _log("t", 0, 0, 100, 90, 5000), ("t", 1): _log("t", 1, 10, 50, 50, 2000)}
    logs_ = SimpleNamespace(logs=lambda: list(partition_logs.values()), get=lambda t, p: partition_logs.get((t, p)),
                            failures=SimpleNamespace(offline=False))
    replicas = SimpleNamespace(partitions=lambda: parts, logs=logs_, isr=SimpleNamespace(shrinks=3, expands=1),
                               fetchers=SimpleNamespace(max_lag=lambda: 7), wakeup=SimpleNamespace(waiting=4),
                               quotas=_replication_quotas())
    group = SimpleNamespace(offsets={("t", 0): SimpleNamespace(offset=60), ("t", 1): SimpleNamespace(offset=50),
                                     ("elsewhere", 0): SimpleNamespace(offset=1)})
    groups = SimpleNamespace(membership=SimpleNamespace(groups={"g": group, "not-mine": group}), unparseable_records=0,
                             serves=lambda g: g in ("g", "c"),
                             consumer=SimpleNamespace(groups={"c": SimpleNamespace(state="Stable")}))
    topic_stats = st.TopicStats()
    topic_stats.produced("t", 1000, 10)
    topic_stats.produced("u", 500, 5)
    topic_stats.fetched("t", 300)
    topic_stats.no_key_compacted_records = 2
    requests = st.RequestStats()
    requests.on_request(0, 9, 10.0, 10.001, 10.011, 10.012)  # Produce v9: 1 ms queue, 10 ms handling, 1 ms send
    return BrokerCollector(replicas, groups, topic_stats, requests, zk_state=lambda: "CONNECTED",
                           connections=lambda: {"PLAINTEXT": 3}, auth_failures=lambda: {"SASL_PLAINTEXT": 2},
                           partition_level=partition_level)


def test_replica_manager_and_purgatory_series():
    s = samples(broker_collector())
    assert s[("kafka_server_replicamanager_partitioncount", ())] == 3
    assert s[("kafka_server_replicamanager_leadercount", ())] == 2
    assert s[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 1
    assert s[("kafka_server_replicamanager_underminisrpartitioncount", ())] == 1
    assert s[("kafka_server_replicamanager_isrshrinks_total", ())] == 3
    assert s[("kafka_server_replicamanager_isrexpands_total", ())] == 1
    assert s[("kafka_server_replicafetchermanager_maxlag", (("clientId", "Replica"),))] == 7
    assert s[("kafka_server_delayedoperationpurgatory_purgatorysize", (("delayedOperation", "Produce"),))] == 2
    assert s[("kafka_server_delayedoperationpurgatory_purgatorysize", (("delayedOperation", "Fetch"),))] == 4


def test_replication_throttle_series():
    s = samples(broker_collector())
    assert s[("kafka_server_leaderreplication_byte_rate", ())] == 3000
    assert s[("kafka_server_followerreplication_byte_rate", ())] == 0
    assert s[("kafka_server_brokertopicmetrics_replicationbytesout_total", ())] == 5000
    assert s[("kafka_server_brokertopicmetrics_replicationbytesin_total", ())] == 700


def test_topic_series_per_topic_and_in_total():
    s = samples(broker_collector())
    assert s[("kafka_server_brokertopicmetrics_bytesin_total", (("topic", "t"),))] == 1000
    assert s[("kafka_server_brokertopicmetrics_bytesin_total", ())] == 1500
    assert s[("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "u"),))] == 5
    assert s[("kafka_server_brokertopicmetrics_bytesout_total", (("topic", "t"),))] == 300
    assert s[("kafka_server_brokertopicmetrics_nokeycompactedtopicrecords_total", ())] == 2


def test_request_time_is_split_into_queue_local_remote_and_response():
    s = samples(broker_collector())
    produce = (("request", "Produce"),)
    assert s[("kafka_network_requestmetrics_requests_total", (("request", "Produce"), ("version", "9")))] == 1
    assert abs(s[("kafka_network_requestmetrics_requestqueuetimems_sum", produce)] - 1) < 0.01
    assert abs(s[("kafka_network_requestmetrics_localtimems_sum", produce)] - 10) < 0.01
    assert abs(s[("kafka_network_requestmetrics_responsesendtimems_sum", produce)] - 1) < 0.01
    assert abs(s[("kafka_network_requestmetrics_totaltimems_sum", produce)] - 12) < 0.01
    p99 = s[("kafka_network_requestmetrics_totaltimems", (("quantile", "0.99"), ("request", "Produce")))]
    assert 12 <= p99 <= 12 * 2 ** 0.25  # the bucket bound above 12 ms


def test_remote_time_is_what_the_request_spent_parked():
    requests = st.RequestStats()

    async def one_request():
        st.remote_time(0.004)
        st.remote_time(0.001)
        requests.on_request(1, 12, 0.0, 0.0, 0.006, 0.006)  # Fetch: 6 ms handling, 5 of them parked
        requests.on_request(1, 12, 0.0, 0.0, 0.001, 0.001)  # the next request of the connection: none
    asyncio.run(one_request())
    fetch = requests.apis["Fetch"]
    assert round(fetch.sums_ms[st.REMOTE], 3) == 5.0
    assert round(fetch.sums_ms[st.LOCAL], 3) == 2.0


def test_log_and_lag_series_and_the_partition_level_switch():
    s = samples(broker_collector())
    tp0 = (("partition", "0"), ("topic", "t"))
    assert s[("kafka_log_log_size", tp0)] == 5000
    assert s[("kafka_log_log_logendoffset", tp0)] == 100
    assert s[("kafka_log_log_logstartoffset", (("partition", "1"), ("topic", "t")))] == 10
    lag0 = (("consumergroup", "g"), ("partition", "0"), ("topic", "t"))
    assert s[("kafka_consumergroup_lag", lag0)] == 30  # HW 90 - committed 60
    assert s[("kafka_consumergroup_lag_sum", (("consumergroup", "g"),))] == 30  # t-1 is caught up
    assert not any(name == "kafka_consumergroup_lag" and ("consumergroup", "not-mine") in labels
                   for name, labels in s)
    assert s[("kafka_server_group_coordinator_metrics_group_count", (("protocol", "consumer"),))] == 1
    assert s[("kafka_server_group_coordinator_metrics_group_count", (("protocol", "classic"),))] == 1
    assert s[("kafka_server_group_coordinator_metrics_consumer_group_count", (("state", "stable"),))] == 1
    off = samples(broker_collector(partition_level=False))
    assert not any(name.startswith("kafka_log_log_") or name == "kafka_consumergroup_lag" for name, _ in off)
    assert off[("kafka_consumergroup_lag_sum", (("consumergroup", "g"),))] == 30


def test_network_authentication_zookeeper_and_process_series():
    s = samples(broker_collector())
    assert s[("kafka_server_socket_server_metrics_connection_count",
              (("listener", "PLAINTEXT"), ("networkProcessor", "0")))] == 3
    assert s[("kafka_server_socket_server_metrics_failed_authentication_total",
              (("listener", "SASL_PLAINTEXT"), ("networkProcessor", "0")))] == 2
    assert s[("kafka_server_sessionexpirelistener_sessionstate", (("state", "CONNECTED"),))] == 1
    assert s[("kafka_server_sessionexpirelistener_sessionstate", (("state", "LOST"),))] == 0
    assert ("process_resident_memory_bytes", ()) in s and ("process_open_fds", ()) in s


def _snapshot() -> StoreSnapshot:
    states = {0: PartitionState(0, (1, 2), 1, 1, (1, 2), 1, 1), 1: PartitionState(1, (2, 1), -1, 1, (2,), 1, 1)}
    topic = TopicRecord("t", "id-t", {p: s.replicas for p, s in states.items()}, 0, states, {0: 1, 1: 1})
    return StoreSnapshot("cid", None, (), {"t": topic}, frozenset())


def test_controller_series_active_and_standby():
    active = SimpleNamespace(active=True, active_snapshot=_snapshot(), leader_elections=4, elections_won=1,
                             zk_state="CONNECTED")
    s = samples(ControllerCollector(active))
    assert s[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 1
    assert s[("kafka_controller_kafkacontroller_offlinepartitionscount", ())] == 1
    assert s[("kafka_controller_kafkacontroller_globalpartitioncount", ())] == 2
    assert s[("kafka_controller_controllerstats_leaderelectionrateandtimems_count", ())] == 4
    standby = SimpleNamespace(active=False, active_snapshot=None, leader_elections=0, elections_won=0,
                              zk_state="SUSPENDED")
    s = samples(ControllerCollector(standby))
    assert s[("kafka_controller_kafkacontroller_activecontrollercount", ())] == 0
    assert s[("kafka_controller_kafkacontroller_offlinepartitionscount", ())] == 0
    assert s[("kafka_server_sessionexpirelistener_sessionstate", (("state", "SUSPENDED"),))] == 1


def test_json_logs_have_stable_keys(capsys):
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    logs.configure("broker", "INFO", "json", broker_id=2)
    try:
        logging.getLogger("odradek.test").info("leader of %s-%d", "t", 3, extra={"topic": "t", "partition": 3})
        logging.getLogger("odradek.test").warning("no partition here")
    finally:
        root.handlers[:], root.level = saved  # pytest's own capture handlers back
    first, second = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    keys = ["time", "level", "component", "broker_id", "topic", "partition", "message"]
    assert list(first)[:7] == keys and list(second)[:7] == keys
    assert (first["component"], first["broker_id"], first["topic"], first["partition"]) == ("broker", 2, "t", 3)
    assert first["message"] == "leader of t-3" and first["time"].endswith("Z")
    assert (second["topic"], second["partition"], second["level"]) == (None, None, "WARNING")
