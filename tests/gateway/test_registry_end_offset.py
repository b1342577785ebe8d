"""The registry log's end-offset query (``SchemasLog._end_offset``) past "Local: Unknown
partition": librdkafka answers a topic error it cached from that cache, without asking the
brokers again, so the query is retried with a new client (the old one closed). On stand-in
clients: the cached error cannot be provoked at will on a real cluster. No processes."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from odradek.gateway.registry import log as registry_log
from odradek.gateway.registry.log import LogSettings, SchemasLog


class StandIn:
    """A Consumer answering from a stale cache (the first ``stale`` made), else with ``end``."""
    made: list["StandIn"] = []
    stale, end, error = 1, 42, KafkaError._UNKNOWN_PARTITION

    def __init__(self, config: dict) -> None:
        self.config, self.closed, self.cached = config, False, len(StandIn.made) < StandIn.stale
        StandIn.made.append(self)

    def get_watermark_offsets(self, partition, timeout: float):
        if self.cached:
            raise KafkaException(KafkaError(StandIn.error))
        return 0, StandIn.end

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def schemas_log(monkeypatch):
    StandIn.made, StandIn.stale, StandIn.error = [], 1, KafkaError._UNKNOWN_PARTITION
    monkeypatch.setattr(registry_log, "Consumer", StandIn)
    for client in ("AdminClient", "Producer"):   # made by the log, unused here: no connections
        monkeypatch.setattr(registry_log, client, lambda config: None)
    monkeypatch.setattr(registry_log.time, "sleep", lambda s: None)
    return SchemasLog(LogSettings("127.0.0.1:1", {}, "http://127.0.0.1:1"))


def test_an_unknown_partition_is_asked_again_with_a_new_client(schemas_log):
    assert schemas_log._end_offset() == 42
    first, second = StandIn.made
    assert first.closed and not second.closed
    assert schemas_log._end_offset() == 42 and len(StandIn.made) == 2     # the good client is kept


def test_a_partition_unknown_to_every_new_client_fails_after_the_deadline(schemas_log, monkeypatch):
    StandIn.stale = 10 ** 6
    clock = iter(range(0, 1000, 3))
    monkeypatch.setattr(registry_log.time, "monotonic", lambda: next(clock))
    with pytest.raises(KafkaException) as failed:
        schemas_log._end_offset()
    assert failed.value.args[0].code() == KafkaError._UNKNOWN_PARTITION and 2 <= len(StandIn.made) <= 5


def test_other_errors_are_not_retried(schemas_log):
    StandIn.error = KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException):
        schemas_log._end_offset()
    assert len(StandIn.made) == 1
