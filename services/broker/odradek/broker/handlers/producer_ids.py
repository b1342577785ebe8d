"""InitProducerId (key 22, v0-4).

Ids come from the broker's ``ProducerIdManager`` (``odradek.broker.producer_id_manager``),
which reserves them from the active controller in blocks.

A transactional id goes to the transaction coordinator (``handlers.transactions``: epoch bump,
fencing, KIP-360 recovery). Without a transactional id Kafka's coordinator ignores the producer
id and epoch a v3+ request carries (epoch bumps are for transactional ids) and hands out a new
producer id at epoch 0: so does this.
"""

from __future__ import annotations

from odradek.broker.context import BrokerContext
from odradek.broker.handlers.answer import ZERO
from odradek.broker.handlers.transactions import init_transactional
from odradek.broker.security.acl import Operation, ResourceType
from odradek.broker.security.authorizer import allowed, allowed_any
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make



def _response(s, code: ErrorCode, producer_id: int = -1, epoch: int = -1):
    return make(s.InitProducerIdResponse, throttle_time=ZERO, error_code=code, producer_id=producer_id,
                producer_epoch=epoch)


async def init_producer_id(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.INIT_PRODUCER_ID, header.api_version)
    if req.transactional_id is not None:
        return _response(s, *await init_transactional(ctx, header, req))
    if ctx.authorizer is not None and not (
            allowed(ctx, Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, log_denied=False)
            or allowed_any(ctx, Operation.WRITE, ResourceType.TOPIC)):
        return _response(s, ErrorCode.cluster_authorization_failed)
    try:
        return _response(s, ErrorCode.none, await ctx.producer_ids.allocate(), 0)
    except KafkaError as e:  # no reachable active controller: retriable for the client
        return _response(s, e.code if e.retriable else ErrorCode.coordinator_not_available)
