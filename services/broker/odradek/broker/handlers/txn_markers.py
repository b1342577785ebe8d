"""WriteTxnMarkers (key 27, v1): a transaction coordinator's commit/abort markers, written by the
partition leader (see ``odradek.broker.txn_markers`` for the write and its per-partition errors).

Kafka's checks first: without CLUSTER_ACTION on the cluster every partition answers
CLUSTER_AUTHORIZATION_FAILED (only brokers send this request). The markers of one request are
written concurrently; the response comes when each is replicated (acks=all) or timed out.
"""

from __future__ import annotations

import asyncio

from odradek.broker.context import BrokerContext
from odradek.broker.security.acl import Operation, ResourceType
from odradek.broker.security.authorizer import allowed
from odradek.broker.txn_markers import TxnMarker
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make



async def write_txn_markers(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.WRITE_TXN_MARKERS, header.api_version)
    markers = [TxnMarker(m.producer_id, m.producer_epoch, m.coordinator_epoch, m.transaction_result,
                         tuple((t.name, p) for t in m.topics for p in t.partition_indexes)) for m in req.markers]
    if allowed(ctx, Operation.CLUSTER_ACTION, ResourceType.CLUSTER):
        results = await asyncio.gather(*(ctx.txn_markers.write(m) for m in markers))
    else:
        results = [dict.fromkeys(m.partitions, ErrorCode.cluster_authorization_failed) for m in markers]
    return make(s.WriteTxnMarkersResponse, markers=tuple(
        make(s.WritableTxnMarkerResult, producer_id=m.producer_id, topics=_topics(s, m, codes))
        for m, codes in zip(markers, results)))


def _topics(s, marker: TxnMarker, codes: dict) -> tuple:
    by_topic: dict[str, list] = {}
    for topic, partition in marker.partitions:
        by_topic.setdefault(topic, []).append(
            make(s.WritableTxnMarkerPartitionResult, partition_index=partition, error_code=codes[(topic, partition)]))
    return tuple(make(s.WritableTxnMarkerTopicResult, name=name, partitions=tuple(parts))
                 for name, parts in by_topic.items())
