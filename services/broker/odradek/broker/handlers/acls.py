"""CreateAcls, DescribeAcls, DeleteAcls (v1-3: what librdkafka, kafka-python and Java's
AdminClient 3.9 send).

As Kafka: SECURITY_DISABLED when no authorizer is configured; creating and deleting need ALTER
on the cluster, describing needs DESCRIBE on it (CLUSTER_AUTHORIZATION_FAILED otherwise). The
receiving broker writes ZooKeeper itself (``AclStore.update``); ZooKeeper calls run in a thread.
"""

from __future__ import annotations

import asyncio

from odradek.broker.context import BrokerContext
from odradek.broker.handlers.answer import ZERO
from odradek.broker.security.acl import Entry, Filter, Operation, Pattern, PatternType, Permission, ResourceType, \
    creation_problem
from odradek.broker.security.authorizer import CLUSTER_DENIED, allowed
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make

_DISABLED = "No Authorizer is configured on the broker"


def _refusal(ctx: BrokerContext, op: Operation) -> tuple[ErrorCode, str] | None:
    if ctx.authorizer is None:
        return ErrorCode.security_disabled, _DISABLED
    if not allowed(ctx, op, ResourceType.CLUSTER):
        return ErrorCode.cluster_authorization_failed, CLUSTER_DENIED
    return None


# -- CreateAcls --------------------------------------------------------------------------------
async def create_acls(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.CREATE_ACLS, header.api_version)
    refused = _refusal(ctx, Operation.ALTER)
    if refused is not None:
        results = [refused] * len(req.creations)
    else:
        results = [await asyncio.to_thread(_create_one, ctx, c) for c in req.creations]
    return make(s.CreateAclsResponse, throttle_time=ZERO, results=tuple(
        make(s.AclCreationResult, error_code=code, error_message=message) for code, message in results))


def _create_one(ctx: BrokerContext, c) -> tuple[ErrorCode, str | None]:
    try:
        pattern = Pattern(ResourceType(c.resource_type), c.resource_name,
                          PatternType(getattr(c, "resource_pattern_type", PatternType.LITERAL)))
        entry = Entry(c.principal, c.host, Operation(c.operation), Permission(c.permission_type))
    except ValueError as e:
        return ErrorCode.invalid_request, str(e)
    problem = creation_problem(pattern, entry)
    if problem is not None:
        return ErrorCode.invalid_request, problem
    ctx.authorizer.store.update(pattern, lambda entries: entries | {entry})
    return ErrorCode.none, None


# -- DescribeAcls ------------------------------------------------------------------------------
async def describe_acls(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.DESCRIBE_ACLS, header.api_version)
    refused = _refusal(ctx, Operation.DESCRIBE)
    try:
        wanted = Filter.of(req)
    except ValueError as e:
        refused = refused or (ErrorCode.invalid_request, str(e))
    if refused is None and wanted.invalid():
        refused = ErrorCode.invalid_request, wanted.invalid()
    if refused is not None:
        return make(s.DescribeAclsResponse, throttle_time=ZERO, error_code=refused[0], error_message=refused[1],
                    resources=())
    resources = []
    for pattern, entries in sorted(ctx.authorizer.store.snapshot.bindings.items(),
                                   key=lambda item: (item[0].type, item[0].pattern, item[0].name)):
        found = [e for e in entries if wanted.matches_pattern(pattern) and wanted.matches_entry(e)]
        if found:
            resources.append(make(s.DescribeAclsResource, resource_type=pattern.type, resource_name=pattern.name,
                                  pattern_type=pattern.pattern, acls=tuple(_description(s, e) for e in found)))
    return make(s.DescribeAclsResponse, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None,
                resources=tuple(resources))


def _description(s, e: Entry):
    return make(s.AclDescription, principal=e.principal, host=e.host, operation=e.operation,
                permission_type=e.permission)


# -- DeleteAcls --------------------------------------------------------------------------------
async def delete_acls(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.DELETE_ACLS, header.api_version)
    refused = _refusal(ctx, Operation.ALTER)
    results = []
    for f in req.filters:
        if refused is not None:
            results.append(make(s.DeleteAclsFilterResult, error_code=refused[0], error_message=refused[1],
                                matching_acls=()))
            continue
        code, message, deleted = await asyncio.to_thread(_delete_matching, ctx, f)
        results.append(make(s.DeleteAclsFilterResult, error_code=code, error_message=message, matching_acls=tuple(
            make(s.DeleteAclsMatchingAcl, error_code=ErrorCode.none, error_message=None, resource_type=p.type,
                 resource_name=p.name, pattern_type=p.pattern, principal=e.principal, host=e.host,
                 operation=e.operation, permission_type=e.permission) for p, e in deleted)))
    return make(s.DeleteAclsResponse, throttle_time=ZERO, filter_results=tuple(results))


def _delete_matching(ctx: BrokerContext, request) -> tuple[ErrorCode, str | None, list[tuple[Pattern, Entry]]]:
    try:
        wanted = Filter.of(request)
    except ValueError as e:
        return ErrorCode.invalid_request, str(e), []
    if wanted.invalid():
        return ErrorCode.invalid_request, wanted.invalid(), []
    store = ctx.authorizer.store
    deleted = []
    for pattern in [p for p in store.snapshot.bindings if wanted.matches_pattern(p)]:
        before = store.update(pattern, lambda entries: frozenset(e for e in entries if not wanted.matches_entry(e)))
        deleted.extend((pattern, e) for e in sorted(before, key=lambda e: (e.principal, e.host, e.operation))
                       if wanted.matches_entry(e))
    return ErrorCode.none, None, deleted


TABLE = {
    ApiKey.DESCRIBE_ACLS: (1, 3, describe_acls),
    ApiKey.CREATE_ACLS: (1, 3, create_acls),
    ApiKey.DELETE_ACLS: (1, 3, delete_acls),
}
