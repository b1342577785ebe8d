"""Kafka's RackAwareReplicaSelector rules (KIP-392), on a leader's view of its followers."""

from odradek.broker.replication.partition import FollowerState
from odradek.broker.replication.replica_selector import preferred_read_replica
from odradek.cluster.model import PartitionState

RACKS = {1: "a", 2: "b", 3: "b", 4: "c"}


class _Leader:
    """The parts of a leading Partition the selector reads."""

    def __init__(self, isr, followers) -> None:
        self.broker_id = 1
        self.state = PartitionState(0, (1, 2, 3, 4), 1, 0, isr, 0)
        self.isr = isr
        self.followers = followers


def choose(part, rack, offset=10, live=(1, 2, 3, 4)):
    return preferred_read_replica(part, rack, offset, 100_000, RACKS.get, lambda b: b in live)


def test_the_most_caught_up_in_sync_replica_of_the_clients_rack():
    part = _Leader((1, 2, 3, 4), {2: FollowerState(leo=20, last_caught_up_ms=99_000),
                                  3: FollowerState(leo=20, last_caught_up_ms=99_900),
                                  4: FollowerState(leo=20, last_caught_up_ms=99_900)})
    assert choose(part, "b") == 3          # same end offset: the most recently caught up
    part.followers[2].leo = 25
    assert choose(part, "b") == 2          # the larger log end offset first
    assert choose(part, "c") == 4


def test_the_leader_when_it_is_in_the_rack_or_nothing_fits():
    part = _Leader((1, 2), {2: FollowerState(leo=20), 3: FollowerState(leo=20), 4: FollowerState(leo=5)})
    assert choose(part, "a") is None       # the leader's own rack
    assert choose(part, "") is None        # no client.rack
    assert choose(part, "c") is None       # 4 is not in the ISR (and behind the fetch offset)
    assert choose(part, "b") == 2          # 3 is out of the ISR
    assert choose(part, "b", live=(1, 3)) is None   # 2 is not registered
    assert choose(part, "b", offset=30) is None     # nobody has reached the fetch offset
