"""SCRAM credential admin APIs: DescribeUserScramCredentials (v0) and AlterUserScramCredentials (v0).

The credentials live in ``/config/users/<user>`` (``ctx.scram``, the SCRAM store); as Kafka's
ZooKeeper-mode brokers do, the broker receiving the request writes them itself. Altering
requires ALTER on the cluster, describing DESCRIBE (CLUSTER_AUTHORIZATION_FAILED per user
else); a user named twice in one request is DUPLICATE_RESOURCE.
"""

from __future__ import annotations

import asyncio
import datetime

from odradek.broker.context import BrokerContext
from odradek.broker.security.acl import Operation, ResourceType
from odradek.broker.security.authorizer import CLUSTER_DENIED, allowed
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make

ZERO = datetime.timedelta(0)


async def alter_user_scram_credentials(ctx: BrokerContext, header, request) -> object:
    s = Schemas(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, header.api_version)
    names = [d.name for d in request.deletions] + [u.name for u in request.upsertions]
    results = {}
    if not allowed(ctx, Operation.ALTER, ResourceType.CLUSTER):
        results = dict.fromkeys(names, (ErrorCode.cluster_authorization_failed, CLUSTER_DENIED))
    for name in {n for n in names if names.count(n) > 1 and n not in results}:
        results[name] = (ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request")
    store = ctx.scram
    for d in request.deletions:
        if d.name not in results:
            results[d.name] = await asyncio.to_thread(store.delete, d.name, d.mechanism)
    for u in request.upsertions:
        if u.name not in results:
            results[u.name] = await asyncio.to_thread(store.upsert, u.name, u.mechanism, u.salt, u.salted_password,
                                                      u.iterations)
    return make(s.AlterUserScramCredentialsResponse, throttle_time=ZERO, results=tuple(
        make(s.AlterUserScramCredentialsResult, user=name, error_code=code, error_message=message)
        for name, (code, message) in results.items()))


async def describe_user_scram_credentials(ctx: BrokerContext, header, request) -> object:
    s = Schemas(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, header.api_version)
    if not allowed(ctx, Operation.DESCRIBE, ResourceType.CLUSTER):
        return make(s.DescribeUserScramCredentialsResponse, throttle_time=ZERO,
                    error_code=ErrorCode.cluster_authorization_failed, error_message=CLUSTER_DENIED, results=())
    names = [u.name for u in request.users] if request.users else None
    described = await asyncio.to_thread(ctx.scram.describe, names)
    results = tuple(make(s.DescribeUserScramCredentialsResult, user=user, error_code=code, error_message=message,
                         credential_infos=tuple(make(s.CredentialInfo, mechanism=m, iterations=i) for m, i in infos))
                    for user, code, message, infos in described)
    return make(s.DescribeUserScramCredentialsResponse, throttle_time=ZERO, error_code=ErrorCode.none,
                error_message=None, results=results)
