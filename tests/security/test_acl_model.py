"""The authorizer's decisions and the ACL znode/notification formats, without a cluster:
super users, default deny, allow.everyone.if.no.acl.found, DENY wins, implied operations,
wildcards, PREFIXED patterns, host matching, filters, and Kafka's JSON."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

from kio.static.constants import EntityType

from odradek.broker.handlers import acls
from odradek.broker.security.acl import (Entry, Filter, Operation, Pattern, PatternType, Permission, ResourceType,
                                         creation_problem, decode_entries, encode_entries)
from odradek.broker.security.acl_store import AclSnapshot, AclStore, change_payload, parse_change, znode_path
from odradek.broker.zk.znodes import Znodes
from odradek.broker.security.authorizer import Authorizer
from odradek.broker.security.session import RequestContext
from odradek.errors import ErrorCode
from odradek.protocol.codec import Schemas, make

R, O, P = ResourceType, Operation, Permission
TOPIC = R.TOPIC


def _authorizer(bindings: dict, super_users: str = "User:admin", allow_if_none: bool = False) -> Authorizer:
    a = Authorizer(super_users, allow_if_none, AclStore(Znodes(lambda: None)))
    a.store.snapshot = AclSnapshot({p: frozenset(es) for p, es in bindings.items()})
    return a


def _who(principal: str, address: str = "10.0.0.7:5000") -> RequestContext:
    return RequestContext("SECURE", "SASL_SSL", address, principal)


def _lit(name: str, rtype: ResourceType = TOPIC) -> Pattern:
    return Pattern(rtype, name, PatternType.LITERAL)


def allow(principal: str, op: Operation, host: str = "*") -> Entry:
    return Entry(principal, host, op, P.ALLOW)


def deny(principal: str, op: Operation, host: str = "*") -> Entry:
    return Entry(principal, host, op, P.DENY)


def test_super_user_default_deny_and_allow_everyone():
    a = _authorizer({})
    assert a.authorize(_who("User:admin"), O.WRITE, TOPIC, "t")
    assert not a.authorize(_who("User:alice"), O.WRITE, TOPIC, "t")
    assert _authorizer({}, allow_if_none=True).authorize(_who("User:alice"), O.WRITE, TOPIC, "t")
    # a resource with ACLs (for someone else) is no longer "no ACL found"
    other = _authorizer({_lit("t"): [allow("User:bob", O.READ)]}, allow_if_none=True)
    assert not other.authorize(_who("User:alice"), O.WRITE, TOPIC, "t")


def test_deny_wins_all_and_implied_operations():
    a = _authorizer({_lit("t"): [allow("User:alice", O.ALL), deny("User:alice", O.WRITE)],
                     _lit("r"): [allow("User:alice", O.READ)],
                     _lit("c"): [allow("User:alice", O.ALTER_CONFIGS)]})
    alice = _who("User:alice")
    assert a.authorize(alice, O.READ, TOPIC, "t") and not a.authorize(alice, O.WRITE, TOPIC, "t")
    assert a.authorize(alice, O.DESCRIBE, TOPIC, "r")          # READ implies DESCRIBE
    assert not a.authorize(alice, O.WRITE, TOPIC, "r")
    assert a.authorize(alice, O.DESCRIBE_CONFIGS, TOPIC, "c")  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    assert not a.authorize(alice, O.DESCRIBE, TOPIC, "c")


def test_wildcards_prefixed_and_hosts():
    a = _authorizer({_lit("*"): [allow("User:*", O.DESCRIBE)],
                     Pattern(TOPIC, "team-", PatternType.PREFIXED): [allow("User:alice", O.WRITE, "10.0.0.7")],
                     _lit("team-secret"): [deny("User:*", O.ALL)]})
    assert a.authorize(_who("User:bob"), O.DESCRIBE, TOPIC, "anything")
    assert a.authorize(_who("User:alice"), O.WRITE, TOPIC, "team-a")
    assert not a.authorize(_who("User:alice", "10.0.0.8:1"), O.WRITE, TOPIC, "team-a")
    assert not a.authorize(_who("User:alice"), O.WRITE, TOPIC, "other")
    assert not a.authorize(_who("User:alice"), O.WRITE, TOPIC, "team-secret")
    assert not a.authorize(_who("User:alice"), O.DESCRIBE, R.GROUP, "team-a")  # other resource type


def test_write_on_any_topic_for_idempotent_producers():
    a = _authorizer({Pattern(TOPIC, "logs-", PatternType.PREFIXED): [allow("User:alice", O.WRITE)],
                     _lit("x"): [allow("User:carol", O.WRITE), deny("User:carol", O.WRITE)]})
    assert a.authorize_any(_who("User:alice"), O.WRITE, TOPIC)
    assert not a.authorize_any(_who("User:bob"), O.WRITE, TOPIC)
    assert not a.authorize_any(_who("User:carol"), O.WRITE, TOPIC)


def test_kafka_znode_and_change_formats():
    entries = [allow("User:alice", O.DESCRIBE_CONFIGS), deny("User:*", O.IDEMPOTENT_WRITE, "1.2.3.4")]
    body = json.loads(encode_entries(entries))
    assert body == {"version": 1, "acls": [
        {"principal": "User:*", "permissionType": "Deny", "operation": "IdempotentWrite", "host": "1.2.3.4"},
        {"principal": "User:alice", "permissionType": "Allow", "operation": "DescribeConfigs", "host": "*"}]}
    assert decode_entries(encode_entries(entries)) == frozenset(entries)
    literal, prefixed = _lit("tx-1", R.TRANSACTIONAL_ID), Pattern(R.GROUP, "g-", PatternType.PREFIXED)
    assert znode_path(literal) == "/kafka-acl/TransactionalId/tx-1"
    assert znode_path(prefixed) == "/kafka-acl-extended/prefixed/Group/g-"
    assert change_payload(literal) == ("/kafka-acl-changes", b"TRANSACTIONAL_ID:tx-1")
    path, payload = change_payload(prefixed)
    assert path == "/kafka-acl-extended-changes"
    assert json.loads(payload) == {"version": 1, "resourceType": "GROUP", "name": "g-", "patternType": "PREFIXED"}
    assert parse_change(path, payload) == prefixed and parse_change(*change_payload(literal)) == literal


def test_filters_any_and_match():
    lit, star, pre = _lit("team-a"), _lit("*"), Pattern(TOPIC, "team-", PatternType.PREFIXED)
    match = Filter(R.TOPIC, "team-a", PatternType.MATCH, None, None, O.ANY, P.ANY)
    assert [p for p in (lit, star, pre) if match.matches_pattern(p)] == [lit, star, pre]
    exact = Filter(R.ANY, "team-a", PatternType.ANY, None, None, O.ANY, P.ANY)
    assert [p for p in (lit, star, pre) if exact.matches_pattern(p)] == [lit]
    prefixed_only = Filter(R.TOPIC, None, PatternType.PREFIXED, "User:alice", None, O.WRITE, P.ALLOW)
    assert prefixed_only.matches_pattern(pre) and not prefixed_only.matches_pattern(lit)
    assert prefixed_only.matches_entry(allow("User:alice", O.WRITE))
    assert not prefixed_only.matches_entry(allow("User:alice", O.READ))


def test_creation_checks():
    assert creation_problem(_lit("other", R.CLUSTER), allow("User:a", O.ALTER))
    assert creation_problem(_lit("t"), allow("alice", O.READ))
    assert creation_problem(_lit("t"), allow("User:a", O.ANY))
    assert creation_problem(Pattern(TOPIC, "t", PatternType.MATCH), allow("User:a", O.READ))
    assert creation_problem(_lit("kafka-cluster", R.CLUSTER), allow("User:a", O.ALTER)) is None


def test_acl_requests_without_an_authorizer_are_security_disabled():
    ctx, header = SimpleNamespace(authorizer=None), SimpleNamespace(api_version=1)
    s = Schemas(29, 1, EntityType.request)
    request = make(s.DescribeAclsRequest, resource_type_filter=R.ANY, resource_name_filter=None,
                   pattern_type_filter=PatternType.ANY, principal_filter=None, host_filter=None, operation=O.ANY,
                   permission_type=P.ANY)
    answer = asyncio.run(acls.describe_acls(ctx, header, request))
    assert (answer.error_code, answer.error_message) == (ErrorCode.security_disabled,
                                                         "No Authorizer is configured on the broker")
    s = Schemas(30, 1, EntityType.request)
    creation = make(s.AclCreation, resource_type=R.TOPIC, resource_name="t", resource_pattern_type=PatternType.LITERAL,
                    principal="User:a", host="*", operation=O.READ, permission_type=P.ALLOW)
    answer = asyncio.run(acls.create_acls(ctx, header, make(s.CreateAclsRequest, creations=(creation,))))
    assert [r.error_code for r in answer.results] == [ErrorCode.security_disabled]


def test_anonymous_is_a_super_user_only_when_named_and_then_a_warning(caplog):
    anonymous = _who("User:ANONYMOUS")
    assert not _authorizer({}).authorize(anonymous, O.ALTER, R.CLUSTER, "kafka-cluster")
    assert "super.users names User:ANONYMOUS" not in caplog.text
    assert _authorizer({}, super_users="User:admin;User:ANONYMOUS").authorize(anonymous, O.ALTER, R.CLUSTER,
                                                                               "kafka-cluster")
    assert "super.users names User:ANONYMOUS" in caplog.text
