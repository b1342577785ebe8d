"""Offset queries through stale metadata: librdkafka answers NOT_LEADER_FOR_PARTITION for a leader
that moved (a broker pod restarted, a preferred-leader election) and does not retry; the gateway
refreshes metadata and asks again (found by the e2e rolling restart: 500s to Spark's planner)."""

import pytest
from confluent_kafka import KafkaError, KafkaException

from odradek.gateway import kafka


class Reader:
    """A RangeReader whose consumer only counts metadata refreshes (unit test of the retry logic)."""

    def __init__(self):
        self.refreshes = 0
        self.position, self.ahead = ("t", 0, 5), ["fetched ahead"]
        self.consumer = self

    def list_topics(self, timeout):
        self.refreshes += 1


def failing(times: int, code: int):
    calls = []

    def fn(reader):
        calls.append(reader.refreshes)
        if len(calls) <= times:
            raise KafkaException(KafkaError(code))
        return (0, 42)
    return fn, calls


def test_leader_moved_is_retried_after_a_refresh(monkeypatch):
    monkeypatch.setattr(kafka, "STALE_METADATA_RETRIES", (0, 0, 0, 0))
    reader = Reader()
    fn, calls = failing(2, KafkaError.NOT_LEADER_FOR_PARTITION)
    assert kafka._with_fresh_metadata(fn, reader) == (0, 42)
    assert calls == [0, 1, 2]          # each retry after one more metadata refresh
    assert reader.position is None and reader.ahead == []


def test_other_errors_are_not_retried(monkeypatch):
    monkeypatch.setattr(kafka, "STALE_METADATA_RETRIES", (0, 0, 0, 0))
    reader = Reader()
    fn, calls = failing(1, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException) as raised:
        kafka._with_fresh_metadata(fn, reader)
    assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert calls == [0] and reader.refreshes == 0


def test_gives_up_after_the_last_retry(monkeypatch):
    monkeypatch.setattr(kafka, "STALE_METADATA_RETRIES", (0, 0))
    fn, calls = failing(10, KafkaError.LEADER_NOT_AVAILABLE)
    with pytest.raises(KafkaException) as raised:
        kafka._with_fresh_metadata(fn, Reader())
    assert raised.value.args[0].code() == KafkaError.LEADER_NOT_AVAILABLE
    assert len(calls) == 3
