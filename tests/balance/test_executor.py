"""The rebalance executor's state machine over a fake port and clock: batches of at most
``concurrency`` moves, only on in-sync partitions, never below min.insync.replicas, Kafka's
throttle set before the first move and removed after the last, a preferred-leader election at
the end, a stop cancelling the running moves, a stale proposal refused, and a resume from the
saved state (what the next active controller does after a failover)."""

from __future__ import annotations

import asyncio

import pytest

from odradek.balance.executor import Execution, Executor, PartitionView, throttled_replicas
from odradek.cluster.control_plane_rebalance import ExecuteRequest, MoveView
from odradek.errors import ErrorCode, KafkaError


class FakePort:
    """Reassignments finish after ``polls`` looks at the running ones; ``saved`` is the last state."""

    def __init__(self, replicas: dict, polls: int = 2, out_of_sync: set = frozenset(), min_isr: int = 1) -> None:
        self.replicas = dict(replicas)
        self.running: dict = {}
        self.polls = polls
        self.out_of_sync = set(out_of_sync)
        self.min_isr = min_isr
        self.calls: list[tuple] = []
        self.max_running = 0
        self.broker_configs: dict[int, dict] = {}
        self.topic_configs: dict[str, dict] = {}
        self.saved: dict | None = None

    async def reassign(self, targets):
        self.calls.append(("reassign", dict(targets)))
        for key, target in targets.items():
            if target is None:
                self.running.pop(key, None)
            else:
                self.running[key] = [tuple(target), self.polls]
        self.max_running = max(self.max_running, len(self.running))
        return dict.fromkeys(targets)

    async def ongoing(self):
        for key in list(self.running):
            entry = self.running[key]
            entry[1] -= 1
            if entry[1] <= 0:
                self.replicas[key] = entry[0]
                del self.running[key]
        return set(self.running)

    async def partitions(self, keys):
        return {k: PartitionView(self.replicas[k], () if k in self.out_of_sync else self.replicas[k], self.min_isr)
                for k in keys if k in self.replicas}

    async def alter_broker_configs(self, broker, configs):
        self.calls.append(("broker", broker))
        _apply(self.broker_configs.setdefault(broker, {}), configs)

    async def alter_topic_configs(self, topic, configs):
        self.calls.append(("topic", topic))
        _apply(self.topic_configs.setdefault(topic, {}), configs)

    async def elect_preferred(self, keys):
        self.calls.append(("elect", sorted(keys)))

    async def save(self, execution):
        self.saved = execution


def _apply(config: dict, changes: dict) -> None:
    for k, v in changes.items():
        if v is None:
            config.pop(k, None)
        else:
            config[k] = v


def _moves(n: int) -> tuple[MoveView, ...]:
    return tuple(MoveView("t", p, (1, 2), (3, 2), 100) for p in range(n))


def _port(moves, **kw) -> FakePort:
    return FakePort({(m.topic, m.partition): m.before for m in moves}, **kw)


async def _run(executor: Executor, port: FakePort, limit: int = 200) -> int:
    steps = 0
    while await executor.step():
        steps += 1
        assert steps < limit, "the execution never ended"
    return steps


def _clock():
    t = [1000]

    def now() -> int:
        t[0] += 10
        return t[0]
    return now


def test_batches_under_throttle_then_elects_preferred_leaders():
    moves = _moves(7)
    port = _port(moves)
    executor = Executor(port, clock=_clock())

    async def go():
        status = await executor.start(ExecuteRequest("p1", moves, throttle_bytes_per_s=1000, concurrency=3))
        assert status.state == "executing" and status.moves_total == 7 and status.bytes_total == 700
        await _run(executor, port)
    asyncio.run(go())
    assert port.max_running == 3
    assert all(port.replicas[(m.topic, m.partition)] == (3, 2) for m in moves)
    kinds = [c[0] for c in port.calls]
    # the throttle goes on before the first move and off before the election, which comes last
    assert kinds.index("broker") < kinds.index("reassign")
    assert kinds[-1] == "elect" and port.calls[-1][1] == [("t", p) for p in range(7)]
    assert port.broker_configs == {1: {}, 2: {}, 3: {}} and port.topic_configs == {"t": {}}
    status = executor.status()
    assert (status.state, status.moves_done, status.bytes_moved, status.error) == ("completed", 7, 700, None)
    assert status.finished_ms > status.started_ms
    assert port.saved["state"] == "completed"


def test_throttled_replicas_are_kafkas_lists():
    assert throttled_replicas([MoveView("t", 0, (1, 2), (3, 2)), MoveView("t", 1, (2, 1), (2, 4))]) == \
        {"t": ("0:1,0:2,1:2,1:1", "0:3,1:4")}


def test_throttle_rates_set_on_every_involved_broker_while_moving():
    moves = _moves(1)
    port = _port(moves, polls=5)
    executor = Executor(port)

    async def go():
        await executor.start(ExecuteRequest("p", moves, throttle_bytes_per_s=500))
        await executor.step()
    asyncio.run(go())
    assert port.broker_configs[3] == {"leader.replication.throttled.rate": "500",
                                      "follower.replication.throttled.rate": "500"}
    assert port.topic_configs["t"] == {"leader.replication.throttled.replicas": "0:1,0:2",
                                       "follower.replication.throttled.replicas": "0:3"}


def test_an_under_replicated_partition_waits_until_its_isr_is_full():
    moves = _moves(2)
    port = _port(moves, out_of_sync={("t", 0)})
    executor = Executor(port)

    async def go():
        await executor.start(ExecuteRequest("p", moves))
        for _ in range(5):
            await executor.step()
        assert ("t", 0) not in {k for c in port.calls if c[0] == "reassign" for k in c[1]}
        port.out_of_sync.clear()
        await _run(executor, port)
    asyncio.run(go())
    assert executor.status().moves_done == 2


def test_a_move_below_min_insync_replicas_is_refused():
    moves = (MoveView("t", 0, (1, 2, 3), (1, 2)),)
    port = _port(moves, min_isr=3)
    executor = Executor(port)

    async def go():
        await executor.start(ExecuteRequest("p", moves))
        await _run(executor, port)
    asyncio.run(go())
    status = executor.status()
    assert status.state == "completed" and status.moves_done == 0 and "min.insync.replicas=3" in status.error
    assert not [c for c in port.calls if c[0] == "reassign"]


def test_stop_cancels_the_running_moves_and_removes_the_throttle():
    moves = _moves(4)
    port = _port(moves, polls=100)
    executor = Executor(port)

    async def go():
        await executor.start(ExecuteRequest("p", moves, throttle_bytes_per_s=10, concurrency=2))
        await executor.step()
        assert (await executor.stop()).state == "stopping"
        assert (await executor.stop()).state == "stopping"   # idempotent
        await _run(executor, port)
    asyncio.run(go())
    assert ("reassign", {("t", 0): None, ("t", 1): None}) in port.calls
    assert not port.running and port.broker_configs[3] == {} and port.topic_configs["t"] == {}
    assert executor.status().state == "stopped"


def test_a_stale_proposal_and_a_second_execution_are_refused():
    moves = _moves(2)
    port = _port(moves, polls=100)
    port.replicas[("t", 1)] = (2, 1)
    executor = Executor(port)
    with pytest.raises(KafkaError) as e:
        asyncio.run(executor.start(ExecuteRequest("p", moves)))
    assert e.value.code == ErrorCode.invalid_replica_assignment
    port.replicas[("t", 1)] = (1, 2)
    asyncio.run(executor.start(ExecuteRequest("p", moves)))
    with pytest.raises(KafkaError) as e:
        asyncio.run(executor.start(ExecuteRequest("q", moves)))
    assert e.value.code == ErrorCode.reassignment_in_progress


def test_the_saved_state_resumes_where_it_stopped():
    """A failover: a new executor over the saved JSON finishes the moves, never starting one twice."""
    moves = _moves(6)
    port = _port(moves, polls=3)
    first = Executor(port)

    async def go():
        await first.start(ExecuteRequest("p", moves, throttle_bytes_per_s=100, concurrency=2))
        for _ in range(4):
            await first.step()
        saved = Execution.from_json(port.saved)
        assert saved.running and saved.throttle_set
        started = [k for c in port.calls if c[0] == "reassign" for k in c[1]]
        second = Executor(port, saved)
        await _run(second, port)
        restarted = [k for c in port.calls if c[0] == "reassign" for k in c[1]]
        assert sorted(restarted) == sorted(set(restarted)) and set(started) <= set(restarted)
        return second
    second = asyncio.run(go())
    assert second.status().state == "completed" and second.status().moves_done == 6
    assert port.broker_configs[3] == {}


def test_a_move_changed_by_someone_else_fails_alone():
    moves = _moves(2)
    port = _port(moves)
    executor = Executor(port)

    async def go():
        await executor.start(ExecuteRequest("p", moves, concurrency=1))
        await executor.step()
        port.replicas[("t", 1)] = (4, 5)
        await _run(executor, port)
    asyncio.run(go())
    status = executor.status()
    assert status.state == "completed" and status.moves_done == 1 and "t-1: replicas changed" in status.error
