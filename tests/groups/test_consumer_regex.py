"""KIP-848 regex subscriptions (SubscribedTopicRegex; ``odradek.broker.group.topic_regex``),
without processes: RE2's syntax and whole-name matches, INVALID_REGULAR_EXPRESSION, a topic
created or deleted entering or leaving the assignment, names and a regex together, and the
regex in the member's ``__consumer_offsets`` record."""

from __future__ import annotations

import uuid

import pytest

from odradek.broker.group import records as rec
from odradek.broker.group.consumer import ConsumerGroups, ConsumerSettings, Heartbeat
from odradek.broker.group.consumer_state import image, restore
from odradek.broker.group.topic_regex import resolve
from odradek.errors import ErrorCode as E
from odradek.errors import KafkaError
from tests.groups.fakes import FakeClock

def tid(i: int) -> str:
    return str(uuid.UUID(int=i))


TOPICS = {"orders": (tid(1), 2), "orders-eu": (tid(2), 2), "audit": (tid(3), 1), "x-orders": (tid(4), 1)}


def lookup(names):
    return {n: TOPICS[n] for n in names if n in TOPICS}


def catalog():
    return tuple(sorted(TOPICS))


@pytest.fixture
def groups():
    yield ConsumerGroups(ConsumerSettings(session_timeout_ms=6000, heartbeat_interval_ms=500), FakeClock().call_later)
    TOPICS.pop("orders-us", None)
    TOPICS["orders-eu"] = (tid(2), 2)


def join(groups, member, **kw):
    return groups.heartbeat(Heartbeat("g", member, 0, rebalance_timeout_ms=30000, owned=frozenset(), **kw),
                            lookup, catalog)


def beat(groups, member, epoch, owned, **kw):
    return groups.heartbeat(Heartbeat("g", member, epoch, owned=frozenset(owned), **kw), lookup, catalog)


def test_re2_syntax_whole_name_matches_and_kafkas_error_for_a_bad_regex(groups):
    assert resolve("orders.*", TOPICS) == {"orders", "orders-eu"}  # whole names: not x-orders
    assert resolve("^(orders|audit)$", TOPICS) == {"orders", "audit"}
    for bad in ("orders(", "(?=orders).*", "(a)\\1", "o{1001}"):  # Python's re takes the last three; RE2/J does not
        with pytest.raises(KafkaError) as e:
            join(groups, "a", regex=bad)
        assert e.value.code == E.invalid_regular_expression == 128
        assert e.value.message.startswith(f"SubscribedTopicRegex `{bad}` is not a valid regular expression")
    assert "g" not in groups.groups


def test_a_topic_created_after_the_subscription_enters_the_assignment_and_a_deleted_one_leaves(groups):
    r = join(groups, "a", regex="orders.*")
    assert r.member_epoch == 1 and r.assignment == {(tid(1), 0), (tid(1), 1), (tid(2), 0), (tid(2), 1)}
    TOPICS["orders-us"] = (tid(5), 1)
    r = beat(groups, "a", 1, r.assignment)
    assert r.member_epoch == 2 and (tid(5), 0) in r.assignment and len(r.assignment) == 5
    del TOPICS["orders-eu"]
    r = beat(groups, "a", 2, r.assignment)
    assert r.member_epoch == 2 and r.assignment == {(tid(1), 0), (tid(1), 1), (tid(5), 0)}  # revokes first
    r = beat(groups, "a", 2, r.assignment)
    assert r.member_epoch == 3
    r = beat(groups, "a", 3, {(tid(1), 0), (tid(1), 1), (tid(5), 0)})
    assert r.member_epoch == 3 and r.assignment is None  # nothing changed: no new epoch, no assignment sent


def test_names_and_a_regex_together_and_an_empty_regex_drops_it(groups):
    r = join(groups, "a", subscribed=("audit",), regex="orders")
    assert {tid for tid, _ in r.assignment} == {tid(1), tid(3)}
    r = beat(groups, "a", r.member_epoch, r.assignment, regex="")
    assert {tid for tid, _ in r.assignment} == {tid(3)} and groups.groups["g"].resolved == {}


def test_the_regex_is_in_the_member_record_and_resolved_again_after_a_load(groups):
    r = join(groups, "a", regex="orders.*")
    written = image(groups.groups["g"])
    loaded = restore("g", {rec.decode_key(k): v for k, v in written.items()})
    assert loaded.members["a"].regex == "orders.*" and image(loaded) == written
    groups.install(loaded)
    again = beat(groups, "a", r.member_epoch, r.assignment)
    assert groups.groups["g"].resolved == {"orders.*": {"orders", "orders-eu"}}
    assert (again.member_epoch, again.assignment, loaded.epoch) == (r.member_epoch, None, 1)  # no rebalance
