"""Replication throttles (KIP-73, Kafka's ReplicationQuotaManager): the leader's and the
follower's quota on the bytes of *throttled replicas*, and which replicas those are.

Two quotas per broker, each a rate in bytes/s from a dynamic broker config
(``leader.replication.throttled.rate``, ``follower.replication.throttled.rate``; the broker's
own value, else the cluster default, else unlimited, as Kafka's BrokerConfigHandler) and a set
of throttled partitions from the topics' configs (``leader.replication.throttled.replicas``,
``follower.replication.throttled.replicas``: ``*``, or ``partition:broker`` entries of which
only this broker's count, as Kafka's TopicConfigHandler.parseThrottledPartitions).

What is done with them lives where the bytes move, as in Kafka:
- the leader (``replication.read``) answers a follower's fetch of a throttled partition without
  records while that follower is out of the ISR and the leader quota is exceeded
  (ReplicaManager.shouldLeaderThrottle), and records every byte of throttled partitions it
  sends to followers, in-sync ones included (KafkaApis.sizeOfThrottledPartitions);
- the follower (``replication.fetcher``) leaves out of its fetch the throttled partitions it
  has not caught up on (lag > 0: PartitionFetchState.isReplicaInSync) while the follower quota
  is exceeded, and records every byte of throttled partitions it appends.

Unlike Kafka, a fetch carries at most ``fetch_budget`` bytes of throttled, not caught-up
partitions (the follower's per-partition max bytes, the leader's read), so that the bytes move
at the throttle instead of in bursts of ``replica.fetch.max.bytes`` per partition.

The rate is Kafka's ``SimpleRate`` over ``replication.quota.window.num`` samples of
``replication.quota.window.size.seconds``: total bytes over the time since the oldest sample
began, at least one window. The quota is exceeded when that rate is above the bound
(Kafka's Quota.upperBound). Event-loop thread only.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable, Mapping

from odradek.broker.quotas.rate import SampledRate
from odradek.config.keys import LONG_MAX
from odradek.config.topic import FOLLOWER_THROTTLED_REPLICAS, LEADER_THROTTLED_REPLICAS

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
ALL_REPLICAS = None   # a topic throttled with "*"


class SimpleRate(SampledRate):
    """Kafka's SimpleRate: the elapsed time since the oldest sample began, at least one window
    (a Rate would count ``samples - 1`` windows at first: a move's first burst would not show)."""
    __slots__ = ()

    def elapsed_ms(self, now_ms: float) -> float:
        self._purge(now_ms)
        return now_ms - min(s.start_ms for s in self._samples)

    def window_size_ms(self, now_ms: float) -> float:
        return max(self.elapsed_ms(now_ms), float(self.window_ms))

    def total(self, now_ms: float) -> float:
        self._purge(now_ms)
        return sum(s.value for s in self._samples)


def throttled_partitions(value: str, broker_id: int) -> frozenset[int] | None:
    """This broker's partitions in a throttled-replicas list (None: all, ``*``)."""
    value = value.strip()
    if value == "*":
        return ALL_REPLICAS
    pairs = (entry.split(":") for entry in value.split(",") if entry.strip())
    return frozenset(int(p) for p, b in pairs if int(b) == broker_id)


class ReplicationQuota:
    """One direction's quota (Kafka's QuotaType LeaderReplication or FollowerReplication)."""

    def __init__(self, kind: str, samples: int, window_s: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.kind = kind
        self.bound = LONG_MAX
        self._clock = clock
        self._samples, self._window_ms = samples, window_s * 1000
        # created at the first byte, as Kafka's sensor: a sample started at the broker's start and
        # never recorded into would count as elapsed time, letting a first move burst past the rate
        self._rate: SimpleRate | None = None
        self._throttled: dict[str, frozenset[int] | None] = {}
        self.bytes_total = 0   # every replication byte this way, throttled or not (Replication*BytesPerSec)

    def _now_ms(self) -> float:
        return self._clock() * 1000.0

    def update_quota(self, bound: int) -> None:
        self.bound = bound

    def mark_throttled(self, throttled: Mapping[str, frozenset[int] | None]) -> None:
        """The throttled partitions, per topic (replacing the previous ones)."""
        self._throttled = dict(throttled)

    @property
    def throttled_topics(self) -> Mapping[str, frozenset[int] | None]:
        return self._throttled

    def is_throttled(self, topic: str, partition: int) -> bool:
        if topic not in self._throttled:
            return False
        partitions = self._throttled[topic]
        return partitions is ALL_REPLICAS or partition in partitions

    def record(self, size: int) -> None:
        """Bytes of a throttled partition moved (counted even over the quota, as Kafka's)."""
        now = self._now_ms()
        if self._rate is None:
            self._rate = SimpleRate(self._samples, self._window_ms, now)
        self._rate.record(size, now)

    def rate(self) -> float:
        """Bytes/s of throttled partitions over the quota's samples (Kafka's ``byte-rate``)."""
        return self._rate.rate(self._now_ms()) if self._rate is not None else 0.0

    def exceeded(self) -> bool:
        return self.bound < LONG_MAX and self.rate() > self.bound

    def fetch_budget(self) -> int:
        """Bytes of throttled partitions one fetch may move: what keeps the rate at the bound, at
        most one window's worth, at least a tenth of one. Kafka asks replica.fetch.max.bytes of
        every partition whatever the quota, so one fetch may carry many windows' worth at once and
        the rate reads above the throttle until it is spread over the samples; bounded here, the
        bytes come in steps of a tenth of a window and the rate holds at the bound."""
        if self.bound >= LONG_MAX:
            return LONG_MAX
        window = self.bound * self._window_ms / 1000.0
        allowance = window
        if self._rate is not None:
            now = self._now_ms()
            allowance = self.bound * self._rate.window_size_ms(now) / 1000.0 - self._rate.total(now)
        return int(max(min(allowance, window), window / 10, 1))

    def delay_s(self) -> float:
        """How long until the rate is back at the bound with nothing more moved (0: not above)."""
        if not self.exceeded():
            return 0.0
        if self.bound <= 0:
            return self._window_ms / 1000.0
        assert self._rate is not None   # exceeded: something was recorded
        now = self._now_ms()   # total / max(elapsed + delay, window) = bound
        return max(self._rate.total(now) / self.bound - self._rate.elapsed_ms(now) / 1000.0, 0.0)


class ReplicationQuotas:
    """This broker's leader and follower quotas (Kafka's QuotaManagers.leader / .follower)."""

    def __init__(self, broker_id: int, samples: int = 11, window_s: int = 1,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.broker_id = broker_id
        self.leader = ReplicationQuota("LeaderReplication", samples, window_s, clock)
        self.follower = ReplicationQuota("FollowerReplication", samples, window_s, clock)

    def update_rates(self, value: Callable[[str], str]) -> None:
        """The rates now in force; ``value(key)``: the broker key's value (dynamic over static)."""
        self.leader.update_quota(int(value(LEADER_RATE)))
        self.follower.update_quota(int(value(FOLLOWER_RATE)))

    def update_topics(self, configs: Iterable[tuple[str, Mapping[str, str]]]) -> None:
        """The throttled replicas from every topic's configs ((name, overrides) pairs)."""
        configs = list(configs)
        for quota, key in ((self.leader, LEADER_THROTTLED_REPLICAS), (self.follower, FOLLOWER_THROTTLED_REPLICAS)):
            quota.mark_throttled({name: throttled_partitions(overrides[key], self.broker_id)
                                  for name, overrides in configs if overrides.get(key, "").strip()})
