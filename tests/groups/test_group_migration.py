"""Classic and consumer-protocol members in one group (KIP-848's online upgrade and downgrade:
``migration``, ``consumer_classic``, ``embedded``), without processes: the conversion of a
classic group into a consumer group and back, classic members reconciled on their rejoins with
no partition ever owned by two members, Kafka's errors, and the records of both conversions
(written, then loaded by another coordinator)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import uuid

import pytest

from odradek.broker.group import consumer_records as cr
from odradek.broker.group import embedded
from odradek.broker.group.consumer import ConsumerGroups, ConsumerSettings, Heartbeat
from odradek.broker.group.consumer_classic import ClassicJoin, ClassicMembers
from odradek.broker.group.migration import to_classic, to_consumer, upgrade_refusal
from odradek.broker.group.model import Group, GroupState, Member
from odradek.broker.group.records import OffsetValue
from odradek.errors import ErrorCode as E
from odradek.errors import KafkaError
from tests.groups.fakes import FakeClock
from tests.groups.test_offsets import Replicas, _coordinator

TID = str(uuid.UUID(int=9))
TOPICS = {"t": (TID, 6)}
SUB = embedded.encode_subscription(["t"], version=1)


def lookup(names):
    return {n: TOPICS[n] for n in names if n in TOPICS}


def classic_group(assignments: dict[str, set[int]], generation: int = 3) -> Group:
    """A Stable classic group of consumers (range), each owning ``assignments[member]`` of t."""
    group = Group("g", generation=generation, protocol_name="range")
    for mid, parts in assignments.items():
        group.add(Member(mid, None, f"client-{mid}", "/10.0.0.1", 30_000, 10_000, "consumer",
                         (("range", SUB), ("cooperative-sticky", SUB)),
                         assignment=embedded.encode_assignment([("t", p) for p in parts])))
    group.transition(GroupState.STABLE, 0)
    return group


def owned_by(group) -> dict[str, set[int]]:
    return {mid: {p for _, p in m.assigned | m.revoking} for mid, m in group.members.items()}


def assert_exclusive(owned: dict[str, set[int]]) -> None:
    held = [p for ps in owned.values() for p in ps]
    assert len(held) == len(set(held)), f"a partition owned twice: {owned}"


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def groups(clock):
    downgraded: list = []  # the groups handed to on_downgrade
    settings = ConsumerSettings(session_timeout_ms=6000, heartbeat_interval_ms=500)
    groups = ConsumerGroups(settings, clock.call_later,
                            on_downgrade=lambda group, rebalance: downgraded.append((group, rebalance)))
    groups.downgraded = downgraded
    return groups


def join(classic: ClassicMembers, member_id: str, owned=(), version=1, **kw) -> object:
    sub = embedded.encode_subscription(["t"], [("t", p) for p in owned], version=version)
    args = dict(instance_id=None, client_id="c", client_host="/h", session_timeout_ms=10_000,
                rebalance_timeout_ms=30_000, protocol_type="consumer", protocols=(("range", sub),))
    args.update(kw)
    return classic.join(ClassicJoin("g", member_id, **args), lookup)


def beat(groups, member, epoch, owned):
    return groups.heartbeat(Heartbeat("g", member, epoch, owned=frozenset((TID, p) for p in owned)), lookup)


def test_the_embedded_protocol_round_trips_at_every_version():
    for version in range(4):
        sub = embedded.encode_subscription(["a", "b"], [("a", 1)], version=version, rack_id="r1")
        parsed = embedded.parse_subscription(sub)
        assert parsed.topics == ("a", "b") and parsed.version == version
        assert parsed.owned == (frozenset({("a", 1)}) if version >= 1 else frozenset())
        assert parsed.rack_id == ("r1" if version >= 3 else None)
    raw = embedded.encode_assignment([("t", 2), ("t", 0), ("u", 1)], version=7)
    assert raw[:2] == b"\x00\x03" and raw.endswith(b"\xff\xff\xff\xff")  # capped at v3, null user data
    assert embedded.parse_assignment(raw) == {("t", 0), ("t", 2), ("u", 1)}
    assert embedded.parse_assignment(b"") == frozenset()
    with pytest.raises(KafkaError) as bad:
        embedded.parse_subscription(b"\x00\x01\x00\x00\x00\x05")
    assert bad.value.code == E.inconsistent_group_protocol


def test_a_classic_members_metadata_is_the_tagged_field_kafka_writes():
    classic = cr.ClassicMetadata(45_000, (("range", b"\x00\x01"),))
    value = cr.member_metadata_value(cr.MemberMetadata(None, None, "c", "/h", ("t",), None, 30_000, None, classic))
    plain = cr.member_metadata_value(cr.MemberMetadata(None, None, "c", "/h", ("t",), None, 30_000, None))
    struct = b"\x00\x00\xaf\xc8" + b"\x02" + b"\x06range" + b"\x03\x00\x01" + b"\x00" + b"\x00"
    # one tagged field: tag 0, its size, Kafka's present byte for a nullable struct, the struct
    assert value == plain[:-1] + b"\x01" + b"\x00" + bytes([len(struct) + 1]) + b"\x01" + struct
    assert cr.decode_member_metadata(value).classic == classic
    assert cr.decode_member_metadata(plain).classic is None


def test_upgrade_keeps_the_classic_assignment_and_refuses_what_kafka_refuses():
    classic = classic_group({"a": {0, 1, 2}, "b": {3, 4, 5}})
    assert upgrade_refusal(classic, ConsumerSettings()) is None
    assert upgrade_refusal(classic, ConsumerSettings(migration_policy="downgrade")) == "the online upgrade is disabled"
    assert upgrade_refusal(classic, ConsumerSettings(max_size=1)) is not None
    other = Group("g", protocol_type="connect")
    assert upgrade_refusal(other, ConsumerSettings()) is not None
    group = to_consumer(classic, lookup)
    assert group.epoch == group.target_epoch == 3 and group.topics == TOPICS
    assert owned_by(group) == {"a": {0, 1, 2}, "b": {3, 4, 5}}
    assert all(m.epoch == 3 and m.classic.session_timeout_ms == 10_000 for m in group.members.values())
    assert group.state == "Stable"
    classic.members["a"].assignment = b"\x00"
    with pytest.raises(KafkaError) as refused:
        to_consumer(classic, lookup)
    assert refused.value.code == E.group_id_not_found


def test_consumer_members_join_classic_ones_rejoin_and_no_partition_is_ever_owned_twice(groups):
    groups.install(to_consumer(classic_group({"a": {0, 1, 2}, "b": {3, 4, 5}}), lookup))
    classic = ClassicMembers(groups)
    group = groups.groups["g"]
    consumer_owned: dict[str, set[int]] = {}
    for name in ("c", "d"):
        r = groups.heartbeat(Heartbeat("g", name, 0, rebalance_timeout_ms=30_000, subscribed=("t",),
                                       owned=frozenset()), lookup)
        consumer_owned[name] = {p for _, p in r.assignment}
        assert consumer_owned[name] == set()  # every partition is still the classic members'
    for _ in range(4):  # rounds of heartbeats until settled
        for mid in ("a", "b"):
            m = group.members[mid]
            if classic.heartbeat("g", m.epoch, mid, None) == E.rebalance_in_progress:
                r = join(classic, mid)  # an eager consumer rejoins owning nothing
                assert r.error == E.none and r.leader == "" and r.protocol_type == "consumer"
                s = classic.sync("g", r.generation, mid, None, "consumer", "range")
                assert {p for _, p in embedded.parse_assignment(s.assignment)} == owned_by(group)[mid]
        for name in ("c", "d"):
            m = group.members[name]
            r = beat(groups, name, m.epoch, consumer_owned[name])
            if r.assignment is not None:
                consumer_owned[name] = {p for _, p in r.assignment}
        assert_exclusive({**{k: owned_by(group)[k] for k in ("a", "b")}, **consumer_owned})
    assert sorted(len(ps) for ps in owned_by(group).values()) == [1, 1, 2, 2]
    assert {p for ps in owned_by(group).values() for p in ps} == set(range(6))
    assert group.state == "Stable"


def test_classic_requests_get_kafkas_errors(groups, clock):
    groups.install(to_consumer(classic_group({"a": {0, 1, 2}}), lookup))
    groups.heartbeat(Heartbeat("g", "c", 0, rebalance_timeout_ms=30_000, subscribed=("t",), owned=frozenset()),
                     lookup)
    classic = ClassicMembers(groups)

    def error(fn, *args):
        with pytest.raises(KafkaError) as refused:
            fn(*args)
        return refused.value.code
    assert error(classic.sync, "g", 2, "a", None, None, None) == E.illegal_generation
    assert error(classic.heartbeat, "g", 1, "c", None) == E.unknown_member_id  # uses the consumer protocol
    assert error(classic.heartbeat, "g", 3, "x", None) == E.unknown_member_id
    assert error(classic.sync, "g", 3, "a", None, "consumer", "roundrobin") == E.inconsistent_group_protocol
    assert error(classic.sync, "g", 3, "a", None, None, None) == E.rebalance_in_progress  # behind the group epoch
    assert error(lambda: join(classic, "", protocol_type="connect")) == E.inconsistent_group_protocol
    assert error(lambda: join(classic, "", protocols=(("roundrobin", SUB),))) == E.inconsistent_group_protocol
    new = join(classic, "")
    assert new.error == E.member_id_required and new.member_id not in groups.groups["g"].members
    assert groups.offset_error("g", "a", 2) == E.illegal_generation  # a classic member's commit
    assert groups.offset_error("g", "c", 0) == E.stale_member_epoch
    assert classic.leave("g", [("x", None), ("c", None)]) == [E.unknown_member_id, E.unknown_member_id]


def test_a_classic_member_that_does_not_rejoin_in_its_rebalance_timeout_is_fenced(groups, clock):
    groups.install(to_consumer(classic_group({"a": {0, 1, 2}, "b": {3, 4, 5}}), lookup))
    groups.heartbeat(Heartbeat("g", "c", 0, rebalance_timeout_ms=30_000, subscribed=("t",), owned=frozenset()),
                     lookup)
    classic = ClassicMembers(groups)
    for _ in range(5):  # it keeps heartbeating, told to rejoin, and never does
        assert classic.heartbeat("g", 3, "a", None) == E.rebalance_in_progress
        join(classic, "b")
        classic.sync("g", groups.groups["g"].members["b"].epoch, "b", None, None, None)
        asyncio.run(clock.advance(7))
        classic.heartbeat("g", groups.groups["g"].members["b"].epoch, "b", None)
    assert "a" not in groups.groups["g"].members and "b" in groups.groups["g"].members


def test_the_last_consumer_member_leaving_downgrades_to_a_classic_group_that_rebalances(groups):
    downgraded = groups.downgraded
    groups.install(to_consumer(classic_group({"a": {0, 1, 2}, "b": {3, 4, 5}}), lookup))
    classic = ClassicMembers(groups)
    groups.heartbeat(Heartbeat("g", "c", 0, rebalance_timeout_ms=30_000, subscribed=("t",), owned=frozenset()),
                     lookup)
    assert classic.leave("g", [("a", None)]) == [E.none]   # a classic member leaving: no conversion
    assert not downgraded
    groups.heartbeat(Heartbeat("g", "c", -1), lookup)
    assert [(g.group_id, rebalance) for g, rebalance in downgraded] == [("g", True)]
    group = downgraded[0][0]
    shell = Group("g", offsets={("t", 0): object()})
    back = to_classic(group, shell, 1234)
    assert back is shell and back.offsets and back.generation == group.epoch
    assert back.state == GroupState.STABLE and back.protocol_type == "consumer" and back.protocol_name == "range"
    assert set(back.members) == {"b"} and back.members["b"].session_timeout_ms == 10_000
    target = {p for _, p in group.target["b"]}
    assert {p for _, p in embedded.parse_assignment(back.members["b"].assignment)} == target


def test_both_conversions_are_written_and_loaded_by_the_next_coordinator(tmp_path):
    async def scenario():
        replicas = Replicas(tmp_path)
        c = await _coordinator(replicas)
        c.membership.install(classic_group({"a": {0, 1, 2}, "b": {3, 4, 5}}))
        c.upgrade("g", lookup)
        c.consumer.heartbeat(Heartbeat("g", "c", 0, rebalance_timeout_ms=30_000, subscribed=("t",),
                                       owned=frozenset()), lookup)
        await c.store_consumer("g")
        assert not c.membership.groups["g"].members and c.membership.groups["g"].state == GroupState.EMPTY
        c.close()
        c2 = await _coordinator(replicas)  # loads a consumer group with its classic members, no classic group
        group = c2.consumer.groups["g"]
        assert {mid for mid, m in group.members.items() if m.classic} == {"a", "b"}
        assert group.members["a"].classic.protocols[0][0] == "range"
        assert "g" not in c2.membership.groups or not c2.membership.groups["g"].members
        assert c2.classic.leave("g", [("a", None)]) == [E.none]
        c2.consumer.heartbeat(Heartbeat("g", "c", -1), lookup)  # the last consumer-protocol member leaves
        await c2.store_consumer("g")
        assert "g" not in c2.consumer.groups
        back = c2.membership.groups["g"]
        assert set(back.members) == {"b"} and back.state == GroupState.PREPARING_REBALANCE
        c2.close()
        c3 = await _coordinator(replicas)
        assert "g" not in c3.consumer.groups and set(c3.membership.groups["g"].members) == {"b"}
        c3.close()
    asyncio.run(scenario())


def test_the_handlers_route_classic_requests_and_describe_as_kafka_4(tmp_path):
    """JoinGroup/Heartbeat to a consumer group are its classic members'; ConsumerGroupHeartbeat
    joining a classic group converts it (refused with GROUP_ID_NOT_FOUND when the policy does not
    allow it); DescribeGroups v6 answers a consumer group and a missing one as Kafka 4.x."""
    from kio.index import load_request_schema

    from odradek.broker.config import BrokerConfig
    from odradek.broker.context import BrokerContext
    from odradek.broker.handlers import consumer_groups, groups
    from odradek.cluster.model import BrokerInfo
    from odradek.protocol.api_keys import ApiKey
    from odradek.protocol.codec import RequestHeader

    async def call(ctx, handler, api_key, version, **fields):
        schema = load_request_schema(api_key, version)
        return await handler(ctx, RequestHeader(api_key, version, 7, "client"), schema(**fields))

    async def scenario(policy: str):
        replicas = Replicas(tmp_path / policy)
        replicas.subscribe = lambda listener: None
        replicas.live_brokers = lambda: [BrokerInfo(1, "h", 1, "http://unused")]
        config = BrokerConfig(1, tmp_path / policy, "unused", group_settings={
            "group.consumer.migration.policy": policy, "group.min.session.timeout.ms": "10"})
        ctx = BrokerContext.create(config, replicas, controller=None)
        await asyncio.sleep(0.01)

        async def written(_partition, _batch):
            return None
        ctx.groups._append_batch = written  # the leader append of __consumer_offsets: not under test here
        ctx.groups.membership.install(classic_group({"a": {0, 1, 2}, "b": {3, 4, 5}}))
        hb = load_request_schema(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1)
        fields = {f.name: None for f in dataclasses.fields(hb) if not f.name.startswith("__")} | dict(
            group_id="g", member_id="c", member_epoch=0, topic_partitions=(), rebalance_timeout=hb.__dataclass_fields__[
                "rebalance_timeout"].type.parse(datetime.timedelta(seconds=30)))
        heartbeat = consumer_groups.consumer_group_heartbeat
        invalid = await call(ctx, heartbeat, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, **fields)  # no subscription
        assert invalid.error_code == E.invalid_request and ctx.groups.membership.groups["g"].members  # still classic
        joined = await call(ctx, heartbeat, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1,
                            **fields | dict(subscribed_topic_names=("t",)))
        described = await call(ctx, groups.describe_groups, ApiKey.DESCRIBE_GROUPS, 6, groups=("g", "nope"),
                               include_authorized_operations=False)
        from kio.schema.join_group.v5.request import JoinGroupRequestProtocol
        join = load_request_schema(ApiKey.JOIN_GROUP, 5)
        timeout = join.__dataclass_fields__["session_timeout"].type.parse(datetime.timedelta(seconds=10))
        classic_join = await call(ctx, groups.join_group, ApiKey.JOIN_GROUP, 5, group_id="g", member_id="e",
                                  session_timeout=timeout, rebalance_timeout=timeout, group_instance_id=None,
                                  protocol_type="consumer", protocols=(JoinGroupRequestProtocol(name="range",
                                                                                               metadata=SUB),))
        ctx.close()
        return joined, described.groups, classic_join
    joined, (g, nope), classic_join = asyncio.run(scenario("upgrade"))
    # a classic member joining the consumer group: answered at once by it, no leader, its epoch
    assert (classic_join.error_code, classic_join.leader, classic_join.protocol_name, classic_join.member_id,
            classic_join.members) == (E.none, "", "range", "e", ())  # v5 (protocol type: v7+)
    assert classic_join.generation_id > joined.member_epoch
    assert joined.error_code == E.none and joined.member_epoch == 4  # the classic generation 3, then c joined
    assert (g.error_code, g.error_message, g.group_state) == (E.group_id_not_found, "Group g is not a classic group.",
                                                              "Dead")
    assert (nope.error_code, nope.error_message) == (E.group_id_not_found, "Group nope not found.")
    joined, (g, _), _ = asyncio.run(scenario("downgrade"))
    assert joined.error_code == E.group_id_not_found and g.error_code == E.none and g.group_state == "Stable"


def test_transactional_commits_of_a_consumer_groups_members_are_checked_as_kafka_does(tmp_path):
    """TxnOffsetCommit (sendOffsetsToTransaction with the consumer's group metadata) to a
    consumer group: its member and epoch, a stale epoch ILLEGAL_GENERATION (Kafka's
    validateTransactionalOffsetCommit), a classic member's generation as its epoch."""
    async def scenario():
        c = await _coordinator(Replicas(tmp_path))
        c.membership.install(classic_group({"a": {0, 1, 2}}))
        c.upgrade("g", lookup)
        r = c.consumer.heartbeat(Heartbeat("g", "c", 0, rebalance_timeout_ms=30_000, subscribed=("t",),
                                           owned=frozenset()), lookup)
        offsets = {("t", 0): OffsetValue(5, -1, "", 0)}
        results = [await c.txn_commit("g", 9, 0, epoch, member, None, offsets)
                   for member, epoch in (("c", r.member_epoch), ("c", r.member_epoch - 1), ("x", 1), ("a", 3),
                                         ("a", 2), ("", -1))]
        c.close()
        return [list(r.values()) for r in results]
    assert asyncio.run(scenario()) == [[E.none], [E.illegal_generation], [E.unknown_member_id], [E.none],
                                       [E.illegal_generation], [E.none]]


def test_a_consumer_protocol_member_must_commit_with_offset_commit_v9(groups):
    """Kafka's validateOffsetCommit: UNSUPPORTED_VERSION for a consumer-protocol member's commit
    below v9; a classic member of the same group commits with any version."""
    groups.install(to_consumer(classic_group({"a": {0, 1, 2}}), lookup))
    r = groups.heartbeat(Heartbeat("g", "c", 0, rebalance_timeout_ms=30_000, subscribed=("t",), owned=frozenset()),
                         lookup)
    assert groups.offset_error("g", "c", r.member_epoch, commit_version=8) == E.unsupported_version
    assert groups.offset_error("g", "c", r.member_epoch, commit_version=9) == E.none
    assert groups.offset_error("g", "a", 3, commit_version=2) == E.none


def test_a_static_classic_member_replacing_the_last_consumer_member_downgrades_without_a_rebalance(tmp_path):
    """Kafka's downgrade by replacement: the classic group is Stable at once, the new member id
    with the assignment of the consumer-protocol member it replaced."""
    async def scenario():
        c = await _coordinator(Replicas(tmp_path))
        c.membership.install(classic_group({"a": {0, 1, 2, 3, 4, 5}}))
        c.upgrade("g", lookup)
        c.consumer.heartbeat(Heartbeat("g", "c", 0, instance_id="i", rebalance_timeout_ms=30_000, subscribed=("t",),
                                       owned=frozenset()), lookup)
        target = {p for _, p in c.consumer.groups["g"].target["c"]}
        r = join(c.classic, "", instance_id="i")
        await c.store_consumer("g")
        back = c.membership.groups["g"]
        assigned = {p for _, p in embedded.parse_assignment(back.members[r.member_id].assignment)}
        found = (back.state, set(back.members), dict(back.static), "g" in c.consumer.groups)
        c.close()
        return r, found, assigned, target
    r, found, assigned, target = asyncio.run(scenario())
    assert r.error == E.none and found == (GroupState.STABLE, {"a", r.member_id}, {"i": r.member_id}, False)
    assert assigned == target and target
