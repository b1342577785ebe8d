"""The registry's rights without processes: which decider a token gets (``access.brokers_decide``),
the token rights' table, and ``KafkaRights``' cache of the brokers' answers (bounded, expiring,
a hidden or missing topic counted as no operations, other failures raised). The brokers' side
runs in tests/security/test_schema_registry_acls.py."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AclOperation

from odradek.gateway.auth import KafkaLogin, Principal
from odradek.gateway.errors import GatewayError
from odradek.gateway.registry import access
from odradek.gateway.registry.kafka_rights import KafkaRights

PAULA = KafkaLogin("paula", "secret")


def test_the_brokers_decide_only_for_a_mapped_token_without_rights_of_its_own():
    assert access.brokers_decide(Principal("paula", {"*": "rw"}, True, PAULA))
    assert not access.brokers_decide(Principal("etl", {"orders": "rw"}, False, PAULA))   # topics of its own
    assert not access.brokers_decide(Principal("ops", {"*": "rw"}, True))                # the gateway's principal


@pytest.mark.parametrize("subject, op, allowed", [
    ("orders-value", access.SUBJECT_READ, True), ("orders-key", access.SUBJECT_WRITE, False),
    ("orders-value", access.COMPATIBILITY_CHECK, True), ("payments-value", access.SUBJECT_READ, False),
    ("com.example.Thing", access.SUBJECT_READ, True), ("com.example.Thing", access.SUBJECT_WRITE, False),
    ("orders-value", access.SUBJECT_CONFIG_WRITE, False)])
def test_token_rights_are_kept_for_tokens_with_topics(subject, op, allowed):
    reader = Principal("reader", {"orders": "r"})
    assert access._token_may(reader, subject, op) is allowed


class FakeAdmin:
    """An AdminClient answering what ``ops`` says (a topic's operations, or a KafkaError)."""

    def __init__(self, ops: dict):
        self.ops, self.asked = ops, []

    def describe_topics(self, topics, include_authorized_operations, request_timeout):
        assert include_authorized_operations
        self.asked.append(sorted(topics.topic_names))
        return {t: self._future(self.ops[t]) for t in topics.topic_names}

    def describe_cluster(self, include_authorized_operations, request_timeout):
        self.asked.append("cluster")
        return self._future(self.ops["cluster"])

    @staticmethod
    def _future(answer) -> Future:
        f = Future()
        if isinstance(answer, KafkaError):
            f.set_exception(KafkaException(answer))
        else:
            f.set_result(SimpleNamespace(authorized_operations=answer))
        return f


def test_answers_are_cached_until_they_expire_and_hidden_topics_have_no_operations():
    now = [0.0]
    admin = FakeAdmin({"a": [AclOperation.READ, AclOperation.DESCRIBE],
                       "hidden": KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED),
                       "missing": KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART), "cluster": [AclOperation.DESCRIBE]})
    rights, bridge = KafkaRights(ttl_s=5, clock=lambda: now[0]), SimpleNamespace(admin=admin)
    login = PAULA.cache_key()
    got = asyncio.run(rights.on_topics(login, bridge, ["a", "hidden", "missing"]))
    assert got == {"a": {AclOperation.READ, AclOperation.DESCRIBE}, "hidden": frozenset(), "missing": frozenset()}
    assert asyncio.run(rights.on_cluster(login, bridge)) == {AclOperation.DESCRIBE}
    asyncio.run(rights.on_topics(login, bridge, ["a"]))
    assert admin.asked == [["a", "hidden", "missing"], "cluster"]          # the second ask: from the cache
    admin.ops["a"] = [AclOperation.DESCRIBE]                               # READ revoked
    now[0] = 5.1
    assert asyncio.run(rights.on_topics(login, bridge, ["a"])) == {"a": {AclOperation.DESCRIBE}}


def test_the_cache_is_bounded_and_a_failure_to_ask_is_raised():
    admin = FakeAdmin({f"t{i}": [AclOperation.READ] for i in range(5)})
    rights, bridge = KafkaRights(max_entries=3), SimpleNamespace(admin=admin)
    asyncio.run(rights.on_topics(PAULA.cache_key(), bridge, [f"t{i}" for i in range(5)]))
    assert len(rights._cache) == 3
    admin.ops["down"] = KafkaError(KafkaError._TRANSPORT)
    with pytest.raises(GatewayError):
        asyncio.run(rights.on_topics(PAULA.cache_key(), bridge, ["down"]))
