"""The one partition-state write path (``PartitionStateWriter``) and the leader-election count it
keeps, driven through the controller's parts over an in-memory store: a broker's death moving
leadership counts (Kafka's LeaderElectionRateAndTimeMs), as a controlled shutdown's and a
reassignment's do; an ISR-only change does not; a lost race writes nothing, counts nothing and reloads the cache.
No ZooKeeper, no processes."""

from __future__ import annotations

import asyncio

from odradek.cluster import control_plane as cp
from odradek.cluster.model import BrokerInfo, PartitionState
from odradek.controller import decisions
from odradek.controller.config import Settings
from odradek.controller.decisions import PartitionChange
from odradek.controller.metrics import ControllerCollector
from odradek.controller.service import Controller
from odradek.controller.store import ControllerRecord, StoreSnapshot, TopicRecord

ME = ControllerRecord("c1", 3, "http://c1")
ELECTION_COUNT = "kafka_controller_controllerstats_leaderelectionrateandtimems_count"


def broker(i: int) -> BrokerInfo:
    return BrokerInfo(i, "127.0.0.1", 9090 + i, f"http://127.0.0.1:{8000 + i}", None, 100 + i)


def snapshot(brokers: tuple[int, ...], leader: int = 1, isr=(1, 2, 3)) -> StoreSnapshot:
    state = PartitionState(0, (1, 2, 3), leader, 4, tuple(isr), 2, 7)
    topic = TopicRecord("t", "id-t", {0: state.replicas}, 0, {0: state}, {0: 7})
    return StoreSnapshot("cid", ME, tuple(broker(i) for i in brokers), {"t": topic}, frozenset())


class MemoryStore:
    """The store calls these parts make: states compare-and-set on their version; ``lose``
    names partitions whose next write loses a race (another writer moved them)."""

    def __init__(self, held: StoreSnapshot) -> None:
        self.held = held
        self.lose: set[tuple[str, int]] = set()
        self.loads = 0

    def load(self) -> StoreSnapshot:
        self.loads += 1
        return self.held

    def write_reassignments(self, writes, requests, requests_version) -> bool:
        self.reassigned = writes
        return True

    def update_partition_states(self, writes) -> list[bool]:
        out = []
        for topic, state, version in writes:
            ok = (topic, state.partition) not in self.lose and self.held.topics[topic].state_versions[state.partition] == version
            self.lose.discard((topic, state.partition))
            if ok:
                self.held = decisions.with_changes(self.held, [PartitionChange(topic, state, version, "")])
            out.append(ok)
        return out


def active_controller(held: StoreSnapshot) -> tuple[Controller, MemoryStore]:
    store = MemoryStore(held)
    c = Controller(store, Settings("c1", "http://c1"))
    c.ctx.record, c.ctx.connected, c.ctx.snapshot = ME, True, held
    c.ctx.publish = lambda: None  # no brokers to push to here
    return c, store


def elections_metric(c: Controller) -> float:
    samples = {s.name: s.value for m in ControllerCollector(c).collect() for s in m.samples}
    return samples[ELECTION_COUNT]


def leader(c: Controller) -> int:
    return c.ctx.snapshot.topics["t"].states[0].leader


def test_a_brokers_death_moving_leadership_counts_as_an_election():
    c, store = active_controller(snapshot((1, 2, 3)))
    store.held = snapshot((2, 3))  # broker 1, the leader, died: its registration is gone

    async def reconcile_after_the_watch_event():
        async with c.ctx.lock:
            await c._reconcile()
    asyncio.run(reconcile_after_the_watch_event())
    assert leader(c) == 2 and store.held.topics["t"].states[0].leader == 2
    assert c.leader_elections == 1 and elections_metric(c) == 1


def test_a_controlled_shutdown_moving_leadership_counts_too():
    c, _ = active_controller(snapshot((1, 2, 3)))
    remaining = asyncio.run(c.elections.controlled_shutdown(1, -1))
    assert remaining == [] and leader(c) == 2
    assert elections_metric(c) == 1


def test_an_isr_only_change_is_written_but_is_no_election():
    c, store = active_controller(snapshot((1, 2, 3)))
    c.ctx.snapshot = store.held = snapshot((1, 2))  # follower 3 died: the ISR shrinks, the leader stays
    assert asyncio.run(c.elections.on_broker_changes(ME.epoch))
    assert c.ctx.snapshot.topics["t"].states[0].isr == (1, 2) and leader(c) == 1
    assert c.leader_elections == 0


def test_a_lost_race_writes_nothing_counts_nothing_and_reloads():
    c, store = active_controller(snapshot((2, 3)))
    store.lose.add(("t", 0))
    failed = asyncio.run(c.states.write(decisions.partition_changes(c.ctx.snapshot, ME.epoch)))
    assert [(f.topic, f.state.partition) for f in failed] == [("t", 0)]
    assert c.leader_elections == 0 and store.loads == 1 and leader(c) == 1
    assert c.ctx.dirty.is_set()  # the loop reconciles again


def test_a_reassignment_moving_leadership_counts_once():
    c, store = active_controller(snapshot((1, 2, 3)))
    results = asyncio.run(c.reassigner.reassign([cp.Reassignment("t", 0, (2, 3))]))
    assert [r.error for r in results] == [0]
    [write] = store.reassigned
    assert write.states[0][0].leader == 2  # the target is in the ISR already: done at once, 2 leads
    assert elections_metric(c) == 1
