"""Any Kafka cluster as ``odradek rebalance --bootstrap-server`` sees and drives it: Kafka's admin
API over kafka-python (librdkafka's admin client has no AlterPartitionReassignments; the
``rebalance`` extra), so it works against any cluster the user can reach, Odradek or Apache Kafka.

Owns: the ``ClusterModel`` built from DescribeCluster and Metadata (brokers, racks, replicas,
leaders) plus partition sizes from DescribeLogDirs (refused: sizes are 0 and the plan counts
replicas, not bytes), and the executor's ``Port`` (``odradek.balance.executor``) over the same
admin client, its blocking calls run in a thread; ``save`` keeps the state in memory only (an
in-process run is not resumable).
"""

from __future__ import annotations

import asyncio
from typing import Iterable, Mapping

from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType

from odradek.balance import Broker, ClusterModel, Partition
from odradek.balance.executor import BROKER_RATES, TOPIC_REPLICAS, PartitionView
from odradek.dev.access import KafkaAccess

Key = tuple[str, int]
TIMEOUT_MS = 30_000


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

    # -- the executor's Port (blocking admin calls in a thread) ----------------------------------------
    async def reassign(self, targets: Mapping[Key, tuple[int, ...] | None]) -> dict[Key, str | None]:
        return await asyncio.to_thread(self._reassign, dict(targets))

    async def ongoing(self) -> set[Key]:
        return await asyncio.to_thread(self.ongoing_now)

    async def partitions(self, keys: Iterable[Key]) -> dict[Key, PartitionView]:
        return await asyncio.to_thread(self._partitions, set(keys))

    async def alter_broker_configs(self, broker: int, configs: Mapping[str, str | None]) -> None:
        await asyncio.to_thread(self.alter_configs, ConfigResourceType.BROKER, str(broker), configs)

    async def alter_topic_configs(self, topic: str, configs: Mapping[str, str | None]) -> None:
        await asyncio.to_thread(self.alter_configs, ConfigResourceType.TOPIC, topic, configs)

    async def elect_preferred(self, keys: Iterable[Key]) -> None:
        await asyncio.to_thread(self._elect_preferred, list(keys))

    async def save(self, execution: dict) -> None:
        self.saved = execution   # in memory: a run over the admin API ends with the process

    # -- blocking -----------------------------------------------------------------------------------
    def _reassign(self, targets: dict[Key, tuple[int, ...] | None]) -> dict[Key, str | None]:
        answer = self.admin.alter_partition_reassignments(
            {TopicPartition(t, p): (None if r is None else list(r)) for (t, p), r in targets.items()},
            timeout_ms=TIMEOUT_MS)
        return {(tp.topic, tp.partition): (None if e is None else e.__name__) for tp, e in answer.items()}

    def ongoing_now(self) -> set[Key]:
        return {(tp.topic, tp.partition) for tp in self.admin.list_partition_reassignments(timeout_ms=TIMEOUT_MS)}

    def _partitions(self, wanted: set[Key]) -> dict[Key, PartitionView]:
        out = {}
        for t in self.admin.describe_topics(sorted({k[0] for k in wanted})):
            for p in t["partitions"]:
                key = (t["name"], p["partition_index"])
                if key in wanted:   # min.insync.replicas is the broker's to enforce here: 1
                    out[key] = PartitionView(tuple(p["replica_nodes"]), tuple(p["isr_nodes"]))
        return out

    def alter_configs(self, kind, name: str, configs: Mapping[str, str | None]) -> None:
        ops = {k: ("DELETE", None) if v is None else ("SET", v) for k, v in configs.items()}
        result = self.admin.alter_configs([ConfigResource(kind, name, configs=ops)], raise_on_unknown=False,
                                          incremental=True)
        for by_name in result.values():   # 'OK' or the error's text
            for resource, outcome in by_name.items():
                if outcome != "OK":
                    raise RuntimeError(f"altering the configs of {resource}: {outcome}")

    def cancel_all(self) -> list[Key]:
        """Cancel every running reassignment, remove the throttles of their topics and of every
        broker (``--stop`` without an executor's state); the cancelled partitions."""
        running = sorted(self.ongoing_now())
        if running:
            self._reassign(dict.fromkeys(running))
        for topic in sorted({t for t, _ in running}):
            self.alter_configs(ConfigResourceType.TOPIC, topic, dict.fromkeys(TOPIC_REPLICAS))
        for broker in self.model(topics=sorted({t for t, _ in running}) or None).broker_ids():
            self.alter_configs(ConfigResourceType.BROKER, str(broker), dict.fromkeys(BROKER_RATES))
        return running

    def _elect_preferred(self, keys: list[Key]) -> None:
        by_topic: dict[str, list[int]] = {}
        for t, p in keys:
            by_topic.setdefault(t, []).append(p)
        if by_topic:   # ELECTION_NOT_NEEDED for partitions already led by their preferred leader
            self.admin.elect_leaders(0, by_topic, timeout_ms=TIMEOUT_MS, raise_errors=False)
