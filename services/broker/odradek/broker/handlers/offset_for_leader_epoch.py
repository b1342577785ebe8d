"""OffsetForLeaderEpoch (API 23, v2-v4): where a leader epoch ends in the leader's log (KIP-101).

Followers ask it after becoming followers, to truncate exactly where their log diverged;
clients (librdkafka, the Java client) ask it after a leader change to detect truncation
(KIP-320). The answer for epoch E is (the largest epoch <= E that the leader knows, the start
offset of the first epoch after it), or the log end offset when E is the latest epoch, from
the leader-epoch cache. Only the leader answers (NOT_LEADER_OR_FOLLOWER otherwise);
``current_leader_epoch`` is fenced (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH).
"""

from __future__ import annotations

from odradek.broker.context import BrokerContext
from odradek.broker.handlers.answer import ZERO
from odradek.broker.security.acl import Operation, ResourceType
from odradek.broker.security.authorizer import allowed
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make



async def offset_for_leader_epoch(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.OFFSET_FOR_LEADER_EPOCH, header.api_version)
    topics = []
    follower = getattr(req, "replica_id", -1) >= 0
    for t in req.topics:
        denied = _denial(ctx, t.topic, follower)
        if denied is not None:
            parts = tuple(make(s.EpochEndOffset, error_code=denied, partition=p.partition, leader_epoch=-1,
                               end_offset=-1) for p in t.partitions)
        else:
            parts = tuple(_end_offset(ctx, s, t.topic, p) for p in t.partitions)
        topics.append(make(s.OffsetForLeaderTopicResult, topic=t.topic, partitions=parts))
    return make(s.OffsetForLeaderEpochResponse, throttle_time=ZERO, topics=tuple(topics))


def _denial(ctx: BrokerContext, topic: str, follower: bool) -> ErrorCode | None:
    """A follower needs CLUSTER_ACTION on the cluster, a client DESCRIBE on the topic (as Kafka)."""
    if ctx.authorizer is None:
        return None
    if follower:
        return None if allowed(ctx, Operation.CLUSTER_ACTION, ResourceType.CLUSTER) \
            else ErrorCode.cluster_authorization_failed
    return None if allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, topic) else ErrorCode.topic_authorization_failed


def _end_offset(ctx: BrokerContext, s, topic: str, p):
    try:
        lp = ctx.replicas.leader(topic, p.partition, p.current_leader_epoch)
        epoch, end_offset = lp.log.end_offset_for_epoch(p.leader_epoch)
        return make(s.EpochEndOffset, error_code=ErrorCode.none, partition=p.partition,
                    leader_epoch=epoch, end_offset=end_offset)
    except KafkaError as e:
        return make(s.EpochEndOffset, error_code=e.code, partition=p.partition, leader_epoch=-1, end_offset=-1)
