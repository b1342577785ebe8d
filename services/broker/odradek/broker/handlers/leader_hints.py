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
from odradek.protocol.codec import make

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
    """Collects the leaders named in one response, for its NodeEndpoints."""

    def __init__(self, ctx: BrokerContext, s) -> None:
        self.ctx, self.s = ctx, s
        self.leaders: set[int] = set()

    def leader(self, topic: str, partition: int):
        """The partition's ``current_leader`` field (a LeaderIdAndEpoch), its leader noted."""
        leader_id, epoch = current_leader(self.ctx, topic, partition)
        if leader_id >= 0:
            self.leaders.add(leader_id)
        return make(self.s.LeaderIdAndEpoch, leader_id=leader_id, leader_epoch=epoch)

    def node_endpoints(self) -> tuple:
        if not self.leaders:
            return ()
        return tuple(make(self.s.NodeEndpoint, node_id=b.id, host=host, port=port, rack=b.rack)
                     for b, host, port in live_endpoints(self.ctx) if b.id in self.leaders)
