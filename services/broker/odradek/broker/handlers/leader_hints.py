"""KIP-951's faster leader discovery: a Produce (v10+) or Fetch (v16+) partition answered
NOT_LEADER_OR_FOLLOWER (Fetch: FENCED_LEADER_EPOCH too) names the partition's current leader
and epoch, and the response lists that leader's endpoint on the request's listener, so the
client goes there without a Metadata round trip (Kafka's KafkaApis.getCurrentLeader).

The leader is the one of the broker's metadata snapshot (-1 and -1 for a partition it does not
know); an endpoint is listed only for a live leader with the request's listener, as Kafka's
getAliveBrokerNode.
"""

from __future__ import annotations

from odradek.broker.context import BrokerContext
from odradek.broker.handlers.metadata import live_endpoints
from odradek.errors import ErrorCode

PRODUCE_FROM, FETCH_FROM = 10, 16   # the first versions whose responses carry the hints
PRODUCE_ERRORS = frozenset({ErrorCode.not_leader_or_follower})
FETCH_ERRORS = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch})


def current_leader(ctx: BrokerContext, topic: str, partition: int) -> tuple[int, int]:
    """(leader id, leader epoch) of ``topic``-``partition``; (-1, -1) if unknown here."""
    meta = ctx.replicas.topic(topic)
    if meta is None or not 0 <= partition < len(meta.partitions):
        return -1, -1
    state = meta.partitions[partition]
    return state.leader, state.leader_epoch


class Hints:
    """The leaders named in one response: ``(leader id, epoch)`` per (topic key, partition) (the
    key is the name, or the topic id from Fetch v13), and their endpoints for NodeEndpoints.
    A leader the broker does not know (-1, -1) is Kafka's default, which the response omits."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.leaders: dict[tuple, tuple[int, int]] = {}

    def note(self, key, topic: str, partition: int) -> None:
        self.leaders[(key, partition)] = current_leader(self.ctx, topic, partition)

    def leader(self, key, partition: int) -> tuple[int, int] | None:
        found = self.leaders.get((key, partition))
        return None if found is None or found == (-1, -1) else found

    def node_endpoints(self) -> list[tuple[int, str, int, str | None]]:
        """(node id, host, port, rack) of each live leader named, on the request's listener."""
        named = {leader for leader, _ in self.leaders.values() if leader >= 0}
        if not named:
            return []
        return [(b.id, host, port, b.rack) for b, host, port in live_endpoints(self.ctx) if b.id in named]
