"""The cluster as ``odradek rebalance`` sees and drives it: Kafka's admin API over kafka-python
(librdkafka's admin client has no AlterPartitionReassignments), so it works against any
cluster the user can reach, Odradek or Apache Kafka.

Owns: the ``ClusterModel`` built from DescribeCluster and Metadata (brokers, racks, replicas,
leaders) plus partition sizes from DescribeLogDirs (or, refused, a dev cluster's brokers' Prometheus
``kafka_log_log_size``; otherwise sizes are 0 and the plan counts replicas, not bytes), and
the ``executor.ClusterPort`` over the same admin client.
"""

from __future__ import annotations

import re
import urllib.request
from typing import Iterable

from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType

from odradek.balance import Broker, ClusterModel, Partition
from odradek.dev.access import KafkaAccess

Key = tuple[str, int]
TIMEOUT_MS = 30_000
_SIZE = re.compile(r'^kafka_log_log_size\{([^}]*)\}\s+([0-9.e+]+)', re.M)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


class KafkaPort:
    def __init__(self, access: KafkaAccess) -> None:
        self.admin = KafkaAdminClient(**access.kafka_python(client_id="odradek-rebalance",
                                                            request_timeout_ms=TIMEOUT_MS))

    def close(self) -> None:
        self.admin.close()

    # -- what the planner needs ---------------------------------------------------------------
    def model(self, sizes: dict[Key, int] | None = None, topics: list[str] | None = None) -> ClusterModel:
        cluster = self.admin.describe_cluster()
        brokers = tuple(Broker(b["broker_id"], b.get("rack")) for b in cluster["brokers"])
        partitions = []
        for t in self.admin.describe_topics(topics):   # Metadata's fields, snake_case
            if t.get("is_internal") and topics is None:
                continue
            for p in t["partitions"]:
                key = (t["name"], p["partition_index"])
                partitions.append(Partition(key[0], key[1], tuple(p["replica_nodes"]), p["leader_id"],
                                            (sizes or {}).get(key, 0)))
        return ClusterModel(brokers, tuple(sorted(partitions, key=lambda p: p.key)))

    def sizes(self) -> dict[Key, int] | None:
        """Each partition's largest log size over the brokers (DescribeLogDirs, as
        ``kafka-log-dirs``): the leader's is what a new replica copies. None if refused."""
        try:
            answers = self.admin.describe_log_dirs()
        except Exception:   # noqa: BLE001 - an old broker, or no DESCRIBE on the cluster: count replicas only
            return None
        sizes: dict[Key, int] = {}
        for answer in answers:
            for log_dir in answer["log_dirs"]:
                for topic in log_dir.get("topics", ()):
                    for p in topic.get("partitions", ()):
                        key = (topic["name"], p["partition_index"])
                        sizes[key] = max(sizes.get(key, 0), p["partition_size"])
        return sizes

    # -- executor.ClusterPort -----------------------------------------------------------------
    def reassign(self, targets: dict[Key, tuple[int, ...] | None]) -> dict[Key, str | None]:
        answer = self.admin.alter_partition_reassignments(
            {TopicPartition(t, p): (None if r is None else list(r)) for (t, p), r in targets.items()},
            timeout_ms=TIMEOUT_MS)
        return {(tp.topic, tp.partition): (None if e is None else e.__name__) for tp, e in answer.items()}

    def ongoing(self) -> set[Key]:
        return {(tp.topic, tp.partition) for tp in self.admin.list_partition_reassignments(timeout_ms=TIMEOUT_MS)}

    def replicas_and_isr(self, keys: Iterable[Key]) -> dict[Key, tuple[tuple[int, ...], tuple[int, ...]]]:
        wanted = set(keys)
        out = {}
        for t in self.admin.describe_topics(sorted({k[0] for k in wanted})):
            for p in t["partitions"]:
                key = (t["name"], p["partition_index"])
                if key in wanted:
                    out[key] = (tuple(p["replica_nodes"]), tuple(p["isr_nodes"]))
        return out

    def alter_broker_configs(self, broker: int, configs: dict[str, str | None]) -> None:
        self._alter(ConfigResourceType.BROKER, str(broker), configs)

    def alter_topic_configs(self, topic: str, configs: dict[str, str | None]) -> None:
        self._alter(ConfigResourceType.TOPIC, topic, configs)

    def _alter(self, kind, name: str, configs: dict[str, str | None]) -> None:
        ops = {k: ("DELETE", None) if v is None else ("SET", v) for k, v in configs.items()}
        result = self.admin.alter_configs([ConfigResource(kind, name, configs=ops)], raise_on_unknown=False,
                                          incremental=True)
        for by_name in result.values():   # 'OK' or the error's text
            for resource, outcome in by_name.items():
                if outcome != "OK":
                    raise RuntimeError(f"altering the configs of {resource}: {outcome}")

    def elect_preferred(self, keys: Iterable[Key]) -> None:
        by_topic: dict[str, list[int]] = {}
        for t, p in keys:
            by_topic.setdefault(t, []).append(p)
        if by_topic:   # ELECTION_NOT_NEEDED for partitions already led by their preferred leader
            self.admin.elect_leaders(0, by_topic, timeout_ms=TIMEOUT_MS, raise_errors=False)


def sizes_from_metrics(urls: Iterable[str]) -> dict[Key, int]:
    """Each partition's largest log size over the brokers' ``/metrics`` (the leader's is the
    bytes a new replica copies)."""
    sizes: dict[Key, int] = {}
    for url in urls:
        with urllib.request.urlopen(url, timeout=10) as resp:
            text = resp.read().decode()
        for labels, value in _SIZE.findall(text):
            d = dict(_LABEL.findall(labels))
            key = (d["topic"], int(d["partition"]))
            sizes[key] = max(sizes.get(key, 0), int(float(value)))
    return sizes
