"""What a mapped Kafka principal may do on topics and on the cluster, as its brokers say: the
``topic_authorized_operations`` of a Metadata request naming the topics (librdkafka's
DescribeTopics, which never creates a topic) and the ``cluster_authorized_operations`` of
DescribeCluster, both sent over the principal's own connection (its ``KafkaBridge``, logged in
as it), so the brokers' ACLs and super users decide exactly as for its Kafka requests.

Answers are cached per login and resource for ``TTL_S`` seconds, at most ``MAX_ENTRIES`` of
them (the oldest go first): a revoked ACL takes effect within ``TTL_S``. A topic the brokers
hide (no DESCRIBE) or do not have counts as one with no operations: Kafka reports a
principal's operations only on topics that exist. Not thread-safe: used from the event loop."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Iterable

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AclOperation

from odradek.gateway.errors import KafkaFailure
from odradek.gateway.kafka import KafkaBridge

TTL_S = 5.0
MAX_ENTRIES = 10_000
REQUEST_TIMEOUT_S = 10.0
CLUSTER = object()      # the cache's resource key of the cluster (no topic can be this)
NO_OPERATIONS: frozenset = frozenset()
# the brokers' answers that mean "no operations here" rather than a failure to ask
_NONE_HERE = (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.UNKNOWN_TOPIC_OR_PART)


class KafkaRights:
    """The cache of principals' operations, shared by every request of a gateway."""

    def __init__(self, ttl_s: float = TTL_S, max_entries: int = MAX_ENTRIES, clock=time.monotonic) -> None:
        self.ttl_s, self.max_entries, self.clock = ttl_s, max_entries, clock
        self._cache: OrderedDict[tuple, tuple[float, frozenset]] = OrderedDict()

    async def on_topics(self, login: tuple, bridge: KafkaBridge, topics: Iterable[str]) -> dict[str, frozenset]:
        """Each topic's operations allowed to the principal (``login``: its cache key)."""
        wanted = set(topics)
        out = {t: ops for t in wanted if (ops := self._cached(login, t)) is not None}
        missing = sorted(wanted - out.keys())
        if missing:
            asked = await asyncio.to_thread(_describe_topics, bridge, missing)
            for topic, ops in asked.items():
                self._keep(login, topic, ops)
            out.update(asked)
        return out

    async def on_cluster(self, login: tuple, bridge: KafkaBridge) -> frozenset:
        ops = self._cached(login, CLUSTER)
        if ops is None:
            ops = await asyncio.to_thread(_describe_cluster, bridge)
            self._keep(login, CLUSTER, ops)
        return ops

    def _cached(self, login: tuple, resource) -> frozenset | None:
        found = self._cache.get((login, resource))
        if found is None or found[0] < self.clock():
            return None
        return found[1]

    def _keep(self, login: tuple, resource, ops: frozenset) -> None:
        key = (login, resource)
        self._cache.pop(key, None)
        self._cache[key] = (self.clock() + self.ttl_s, ops)
        while len(self._cache) > self.max_entries:
            self._cache.popitem(last=False)


def _operations(found) -> frozenset:
    return frozenset(found or ()) - {AclOperation.UNKNOWN}


def _describe_topics(bridge: KafkaBridge, topics: list[str]) -> dict[str, frozenset]:
    futures = bridge.admin.describe_topics(TopicCollection(topics), include_authorized_operations=True,
                                           request_timeout=REQUEST_TIMEOUT_S)
    out = {}
    for topic, future in futures.items():
        try:
            out[topic] = _operations(future.result(REQUEST_TIMEOUT_S + 5).authorized_operations)
        except KafkaException as e:
            if e.args[0].code() not in _NONE_HERE:
                raise KafkaFailure.of(e.args[0], topics=topic) from None
            out[topic] = NO_OPERATIONS
    return out


def _describe_cluster(bridge: KafkaBridge) -> frozenset:
    future = bridge.admin.describe_cluster(include_authorized_operations=True, request_timeout=REQUEST_TIMEOUT_S)
    try:
        return _operations(future.result(REQUEST_TIMEOUT_S + 5).authorized_operations)
    except KafkaException as e:
        raise KafkaFailure.of(e.args[0]) from None
