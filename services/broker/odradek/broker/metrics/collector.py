"""The broker's Prometheus series, computed at scrape time from the state the broker keeps
(``BrokerCollector``), named as Strimzi's JMX-exporter rules name Apache Kafka's MBeans
(lower-case names, JMX keys as labels: ``topic``, ``partition``, ``request``, ``version``,
``clientId``, ``delayedOperation``, ``listener``, ``networkProcessor``). The list, with types
and meanings, is docs/observability.md's.

Per-partition series (``kafka_log_log_*``, ``kafka_consumergroup_lag`` per partition) are left
out when ``metrics.partition.level.enabled`` is false; the per-group sum
(``kafka_consumergroup_lag_sum``) stays.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterator

from prometheus_client.core import Metric

from odradek.broker.metrics import stats as st
from odradek.metrics_http import counter, gauge

ZK_STATES = ("CONNECTED", "SUSPENDED", "LOST")


def per_topic(name: str, doc: str, kind: str, rows: dict[str, list], slot: int) -> Metric:
    """A BrokerTopicMetrics family (``kind`` counter or gauge) of ``rows[topic][slot]``: Kafka's
    per-topic MBeans carry topic=..., the broker-wide one none: both, as Strimzi sees them."""
    family = Metric(name, doc, kind)
    sample = name + "_total" if kind == "counter" else name
    family.add_sample(sample, {}, sum(row[slot] for row in rows.values()))
    for topic, row in rows.items():
        family.add_sample(sample, {"topic": topic}, row[slot])
    return family


@dataclass(eq=False)
class BrokerCollector:
    """``zk_state()``: the ZooKeeper session's state (one of ``ZK_STATES``) or None before it starts;
    ``connections()``: open connections per listener; ``auth_failures()``: failed authentications
    per listener."""
    replicas: object            # ReplicaManager
    groups: object              # GroupCoordinator
    topic_stats: st.TopicStats
    requests: st.RequestStats
    zk_state: Callable[[], str | None]
    connections: Callable[[], dict[str, int]]
    auth_failures: Callable[[], dict[str, int]]
    partition_level: bool = True

    def collect(self) -> Iterator[Metric]:
        yield from self._replica_manager()
        yield from self._topics()
        yield from self._requests()
        yield from self._logs()
        yield from self._group_lag()
        yield from self._network()

    # -- kafka.server:type=ReplicaManager, ReplicaFetcherManager, DelayedOperationPurgatory --
    def _replica_manager(self) -> Iterator[Metric]:
        parts = self.replicas.partitions()
        leading = [p for p in parts if p.leading and p.state is not None]
        prefix = "kafka_server_replicamanager_"
        yield gauge(prefix + "partitioncount", "partitions (replicas) hosted on this broker", len(parts))
        yield gauge(prefix + "leadercount", "partitions this broker leads", len(leading))
        yield gauge(prefix + "underreplicatedpartitions",
                    "partitions led here whose ISR is smaller than their replica set",
                    sum(len(p.isr) < len(p.state.replicas) for p in leading))
        yield gauge(prefix + "underminisrpartitioncount", "partitions led here whose ISR is below min.insync.replicas",
                    sum(len(p.isr) < p.min_isr for p in leading))
        yield gauge(prefix + "atminisrpartitioncount", "partitions led here whose ISR is exactly min.insync.replicas",
                    sum(len(p.isr) == p.min_isr for p in leading))
        offline = self.replicas.logs.failures.offline
        yield gauge(prefix + "offlinereplicacount", "replicas hosted here whose log directory is offline",
                    len(parts) if offline else 0)
        isr = self.replicas.isr
        yield counter(prefix + "isrshrinks", "ISR shrinks made by this broker as leader", isr.shrinks)
        yield counter(prefix + "isrexpands", "ISR expansions made by this broker as leader", isr.expands)
        yield gauge("kafka_server_replicafetchermanager_maxlag", "largest lag (records) of a partition this "
                    "broker follows, behind its leader's high watermark", labels=["clientId"],
                    samples=[(["Replica"], self.replicas.fetchers.max_lag())])
        yield from self._replication_quotas()
        yield gauge("kafka_server_delayedoperationpurgatory_purgatorysize",
                    "requests parked: acks=all produces waiting for replication, fetches long-polling",
                    labels=["delayedOperation"],
                    samples=[(["Produce"], sum(len(p.produces) for p in leading)),
                             (["Fetch"], self.replicas.wakeup.waiting)])

    # -- kafka.server:type=LeaderReplication / FollowerReplication, ReplicationBytes*PerSec ------
    def _replication_quotas(self) -> Iterator[Metric]:
        """The replication throttles' byte rates (Kafka's ``byte-rate`` of the LeaderReplication
        and FollowerReplication sensors: bytes/s of throttled partitions over the quota's
        samples) and every replication byte (the broker-wide ReplicationBytesOut/InPerSec)."""
        quotas = self.replicas.quotas
        for quota in (quotas.leader, quotas.follower):
            yield gauge(f"kafka_server_{quota.kind.lower()}_byte_rate",
                        f"bytes/s of throttled replicas ({quota.kind}) over the replication quota's samples",
                        quota.rate())
        prefix = "kafka_server_brokertopicmetrics_"
        yield counter(prefix + "replicationbytesout", "record bytes sent to followers (leader)",
                      quotas.leader.bytes_total)
        yield counter(prefix + "replicationbytesin", "record bytes fetched from leaders (follower)",
                      quotas.follower.bytes_total)

    # -- kafka.server:type=BrokerTopicMetrics ---------------------------------------------------
    def _topics(self) -> Iterator[Metric]:
        rows = self.topic_stats.topics
        prefix = "kafka_server_brokertopicmetrics_"
        for name, slot, doc in (("bytesin", st.BYTES_IN, "record batch bytes appended by producers (leader)"),
                                ("messagesin", st.MESSAGES_IN, "records appended by producers (leader)"),
                                ("bytesout", st.BYTES_OUT, "record bytes sent to consumers (not followers)"),
                                ("totalproducerequests", st.PRODUCE_REQUESTS, "produce requests, per partition"),
                                ("totalfetchrequests", st.FETCH_REQUESTS, "consumer fetch requests, per topic"),
                                ("failedproducerequests", st.FAILED_PRODUCE, "failed produces, per partition"),
                                ("failedfetchrequests", st.FAILED_FETCH, "failed fetches")):
            yield per_topic(prefix + name, doc, "counter", rows, slot)
        yield counter(prefix + "nokeycompactedtopicrecords", "records refused for having no key on a compacted "
                      "topic (INVALID_RECORD)", self.topic_stats.no_key_compacted_records)

    # -- kafka.network:type=RequestMetrics ------------------------------------------------------
    def _requests(self) -> Iterator[Metric]:
        self.requests.rotate()
        apis = self.requests.apis
        yield counter("kafka_network_requestmetrics_requests", "requests handled, per API and version",
                      labels=["request", "version"],
                      samples=[([api, str(v)], n) for api, e in apis.items() for v, n in e.versions.items()])
        for phase, name in enumerate(st.PHASES):
            family = Metric("kafka_network_requestmetrics_" + name,
                            f"request {name[:-6]} time in ms, per API (quantiles over the last 1-2 minutes)",
                            "summary")
            base = "kafka_network_requestmetrics_" + name
            for api, entry in apis.items():
                for q, ms in entry.quantiles(phase):
                    family.add_sample(base, {"request": api, "quantile": str(q)}, ms)
                family.add_sample(base + "_count", {"request": api}, entry.count)
                family.add_sample(base + "_sum", {"request": api}, entry.sums_ms[phase])
            yield family

    # -- kafka.log:type=Log ---------------------------------------------------------------------
    def _logs(self) -> Iterator[Metric]:
        if not self.partition_level:
            return
        logs = self.replicas.logs.logs()
        labels = ["topic", "partition"]
        for name, doc, value in (("size", "bytes of the partition's log on disk", lambda lg: lg.size),
                                 ("logstartoffset", "first offset of the log", lambda lg: lg.log_start_offset),
                                 ("logendoffset", "offset the next record appended gets", lambda lg: lg.log_end_offset),
                                 ("numlogsegments", "segments of the log", lambda lg: len(lg.segments))):
            yield gauge("kafka_log_log_" + name, doc, labels=labels,
                        samples=[([lg.topic, str(lg.partition)], value(lg)) for lg in logs])

    # -- consumer lag, as Strimzi's Kafka Exporter names it -------------------------------------
    def _group_lag(self) -> Iterator[Metric]:
        """For the groups this broker coordinates: high watermark minus committed offset, for the
        partitions whose log is hosted here (the leader's HW when it leads here)."""
        labels = ["consumergroup", "topic", "partition"]
        lag, current, totals = [], [], []
        logs = self.replicas.logs
        for group_id, group in list(self.groups.membership.groups.items()):
            if not self.groups.serves(group_id):
                continue
            total = 0
            for (topic, partition), value in list(group.offsets.items()):
                lg = logs.get(topic, partition)
                if lg is None:
                    continue
                behind = max(0, lg.high_watermark - value.offset)
                total += behind
                if self.partition_level:
                    key = [group_id, topic, str(partition)]
                    lag.append((key, behind))
                    current.append((key, value.offset))
            totals.append(([group_id], total))
        if self.partition_level:
            yield gauge("kafka_consumergroup_lag", "records behind: high watermark minus committed offset",
                        labels=labels, samples=lag)
            yield gauge("kafka_consumergroup_current_offset", "committed offset", labels=labels, samples=current)
        yield gauge("kafka_consumergroup_lag_sum", "records behind over the group's partitions",
                    labels=["consumergroup"], samples=totals)
        yield from self._group_counts()
        yield counter("odradek_group_coordinator_unparseable_records",  # skipped while loading (issue 30)
                      "records of __consumer_offsets skipped while loading: they could not be parsed",
                      self.groups.unparseable_records)

    def _group_counts(self) -> Iterator[Metric]:
        """Kafka's group-coordinator-metrics: groups served by protocol, KIP-848 groups by state."""
        consumer = [g for gid, g in list(self.groups.consumer.groups.items()) if self.groups.serves(gid)]
        classic = sum(1 for gid in list(self.groups.membership.groups)
                      if gid not in self.groups.consumer.groups and self.groups.serves(gid))
        yield gauge("kafka_server_group_coordinator_metrics_group_count", "groups this coordinator serves",
                    labels=["protocol"], samples=[(["classic"], classic), (["consumer"], len(consumer))])
        states = Counter(g.state.lower() for g in consumer)
        yield gauge("kafka_server_group_coordinator_metrics_consumer_group_count", "KIP-848 groups by state",
                    labels=["state"], samples=[([s], states[s]) for s in ("empty", "assigning", "reconciling", "stable")])

    # -- kafka.server:type=socket-server-metrics, SessionExpireListener -------------------------
    def _network(self) -> Iterator[Metric]:
        labels = ["listener", "networkProcessor"]
        yield gauge("kafka_server_socket_server_metrics_connection_count", "open connections, per listener",
                    labels=labels, samples=[([name, "0"], n) for name, n in self.connections().items()])
        yield counter("kafka_server_socket_server_metrics_failed_authentication", "failed SASL authentications",
                      labels=labels, samples=[([name, "0"], n) for name, n in self.auth_failures().items()])
        state = self.zk_state()
        yield gauge("kafka_server_sessionexpirelistener_sessionstate",
                    "1 for the ZooKeeper session's current state", labels=["state"],
                    samples=[([s], 1 if s == state else 0) for s in ZK_STATES])
