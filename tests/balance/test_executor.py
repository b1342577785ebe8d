"""The rebalance executor over a fake cluster: batches of at most ``concurrency`` moves, only on
in-sync partitions, Kafka's throttle set before the first move and removed after the last,
reorderings in one request, a preferred-leader election at the end, a stop cancelling."""

from __future__ import annotations

import pytest

from odradek.balance import Broker, ClusterModel, Partition, plan
from odradek.rebalance import executor
from odradek.rebalance.executor import StopRequested, execute, throttled_replicas

executor.POLL_S = 0


class FakeCluster:
    """Reassignments finish after ``polls`` looks at the running ones."""

    def __init__(self, model: ClusterModel, polls: int = 2, out_of_sync: set = frozenset()) -> None:
        self.replicas = {p.key: p.replicas for p in model.partitions}
        self.running: dict = {}
        self.polls = polls
        self.out_of_sync = set(out_of_sync)
        self.calls: list[tuple] = []
        self.max_running = 0
        self.broker_configs: dict[int, dict] = {}
        self.topic_configs: dict[str, dict] = {}

    def reassign(self, targets):
        self.calls.append(("reassign", dict(targets)))
        for key, target in targets.items():
            if target is None:
                self.running.pop(key, None)
            elif sorted(target) == sorted(self.replicas[key]):
                self.replicas[key] = tuple(target)   # a reordering completes at once
            else:
                self.running[key] = [tuple(target), self.polls]
        self.max_running = max(self.max_running, len(self.running))
        return dict.fromkeys(targets)

    def ongoing(self):
        for key in list(self.running):
            entry = self.running[key]
            entry[1] -= 1
            if entry[1] <= 0:
                self.replicas[key] = entry[0]
                del self.running[key]
                self.out_of_sync.discard(key)
        return set(self.running)

    def replicas_and_isr(self, keys):
        return {k: (self.replicas[k], () if k in self.out_of_sync else self.replicas[k]) for k in keys}

    def alter_broker_configs(self, broker, configs):
        self.calls.append(("broker", broker))
        self._apply(self.broker_configs.setdefault(broker, {}), configs)

    def alter_topic_configs(self, topic, configs):
        self.calls.append(("topic", topic))
        self._apply(self.topic_configs.setdefault(topic, {}), configs)

    @staticmethod
    def _apply(target, configs):
        for k, v in configs.items():
            if v is None:
                target.pop(k, None)
            else:
                target[k] = v

    def elect_preferred(self, keys):
        self.calls.append(("elect", sorted(keys)))


def _model() -> ClusterModel:
    return ClusterModel(tuple(Broker(i) for i in range(1, 6)),
                        tuple(Partition("t", p, tuple((p + i) % 3 + 1 for i in range(3)), p % 3 + 1, size=100)
                              for p in range(24)))


def test_batches_throttle_and_election():
    model = _model()
    proposal = plan(model, "add-brokers", [4, 5])
    fake = FakeCluster(model)
    seen_throttle = []
    original = fake.reassign

    def reassign(targets):
        seen_throttle.append(dict(fake.broker_configs.get(4, {})))
        return original(targets)
    fake.reassign = reassign
    progress = execute(fake, proposal, concurrency=3, throttle=1000, report=lambda line: None)
    data_moves = [m for m in proposal.moves if m.adding]
    assert progress.done == len(data_moves) and not progress.errors
    assert fake.max_running <= 3
    assert all(s.get("leader.replication.throttled.rate") == "1000" for s in seen_throttle)
    assert fake.broker_configs[4] == {} and all(c == {} for c in fake.topic_configs.values()), "throttle removed"
    assert fake.calls[-1][0] == "elect"
    for m in proposal.moves:
        assert fake.replicas[(m.topic, m.partition)] == m.after


def test_a_move_waits_for_its_partition_in_sync():
    model = _model()
    proposal = plan(model, "add-brokers", [4, 5])
    first = next(m for m in proposal.moves if m.adding)
    fake = FakeCluster(model, out_of_sync={(first.topic, first.partition)})
    lagging = (first.topic, first.partition)
    original_ongoing = fake.ongoing
    polls = [0]

    def ongoing():
        polls[0] += 1
        if polls[0] == 3:
            fake.out_of_sync.discard(lagging)
        return original_ongoing()
    fake.ongoing = ongoing
    execute(fake, proposal, concurrency=2, report=lambda line: None)
    started = [i for i, c in enumerate(fake.calls) if c[0] == "reassign" and lagging in c[1]]
    assert started and polls[0] >= 3


def test_throttled_replicas_as_kafka_lists_them():
    model = ClusterModel((Broker(1), Broker(2), Broker(3), Broker(4)), (Partition("t", 0, (1, 2), 1),))
    proposal = plan(model, "remove-brokers", [2])
    assert throttled_replicas(proposal.moves) == {"t": ("0:1,0:2", "0:" + str(proposal.moves[0].adding[0]))}


def test_stop_cancels_running_moves():
    model = _model()
    proposal = plan(model, "add-brokers", [4, 5])
    fake = FakeCluster(model, polls=10 ** 6)
    looks = [0]

    def should_stop():
        looks[0] += 1
        return looks[0] > 3
    with pytest.raises(StopRequested):
        execute(fake, proposal, concurrency=2, throttle=500, report=lambda line: None, should_stop=should_stop)
    assert not fake.running
    assert any(c[0] == "reassign" and all(v is None for v in c[1].values()) for c in fake.calls)
    assert fake.broker_configs[4] == {}
