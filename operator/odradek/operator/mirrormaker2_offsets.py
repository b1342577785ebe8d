"""MirrorMaker 2's offsets read over Kafka's protocol, for its lag (``mirrormaker2_lag``): the only
module of the operator that speaks Kafka (confluent-kafka, librdkafka; the operator image has the
``gateway`` extra).

Every call takes a ``deadline`` (``time.monotonic()``) that bounds it all, client start and
stop included: the lag check runs in kopf's thread pool and must not hold it. What fails is
``LagUnavailable`` with the client's own words (librdkafka's error callback: an unresolvable
host, a refused login), never an exception of the client. librdkafka's log stays quiet (the
status condition says it once, the log would say it every check).

- ``copied_offsets``: the target's offsets topic read from its start to its end, as MirrorMaker's
  user, by assignment (no group joined: ``group.id`` is the herder's ``<source>-mm2``, on which
  that user has Describe, because librdkafka looks its coordinator up all the same).
- ``source_offsets``: the source's mirrored partitions with their log start and end offsets, by
  one metadata request and two ListOffsets (an admin client).
Read the target first: an offset MirrorMaker copied before the source's end was read lies below it.
"""

from __future__ import annotations

import time
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Callable, Iterator

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition as Partition
from confluent_kafka.admin import AdminClient, OffsetSpec

from odradek.operator.mirrormaker2_lag import LagUnavailable, SourcePartition, TopicPartition, copied_offsets as parse

QUIET = {"log_level": 0}
BOUNDED_FETCH = {"queued.max.messages.kbytes": 1024, "fetch.max.bytes": 1 << 20, "fetch.wait.max.ms": 100}


def _remaining(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.05)


class _Errors:
    """librdkafka's error callback, kept for the message."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, error: Any) -> None:
        self.seen.append(error.str())

    def message(self, what: str, error: Exception | str) -> str:
        detail = self.seen[-1] if self.seen else str(error)
        return f"{what}: {detail}"


def _client(kind: Callable[[dict], Any], settings: dict[str, Any], deadline: float, errors: _Errors) -> Any:
    """A ``Consumer`` or ``AdminClient`` whose connections give up by ``deadline``."""
    ms = int(_remaining(deadline) * 1000)
    try:
        return kind({**settings, **QUIET, "error_cb": errors, "socket.timeout.ms": max(ms, 100),
                     "socket.connection.setup.timeout.ms": max(ms, 1000)})
    except KafkaException as e:
        raise LagUnavailable("Unsupported", f"librdkafka refuses the settings: {e.args[0].str()}") from None


def _records(consumer: Any, partitions: set[int], deadline: float, topic: str,
             fail: Callable[[str], LagUnavailable]) -> Iterator[tuple[bytes | None, bytes | None]]:
    pending = set(partitions)
    while pending:
        if time.monotonic() >= deadline:
            raise fail(f"{topic} not read to its end in time ({len(pending)} partitions left)")
        for message in consumer.consume(500, min(_remaining(deadline), 0.5)):
            error = message.error()
            if error is None:
                yield message.key(), message.value()
            elif error.code() == KafkaError._PARTITION_EOF:
                pending.discard(message.partition())
            else:
                raise fail(f"reading {topic}: {error.str()}")


def copied_offsets(settings: dict[str, str], topic: str, group: str, alias: str,
                   deadline: float) -> dict[TopicPartition, int]:
    """What MirrorMaker committed for ``alias``'s partitions in ``topic`` (none: no such topic yet)."""
    errors = _Errors()
    where = f"target {settings['bootstrap.servers']}"
    consumer = _client(Consumer, {**settings, **BOUNDED_FETCH, "group.id": group, "enable.auto.commit": False,
                                  "enable.auto.offset.store": False, "enable.partition.eof": True,
                                  "auto.offset.reset": "earliest", "allow.auto.create.topics": False},
                       deadline, errors)
    try:
        try:
            metadata = consumer.list_topics(topic, timeout=_remaining(deadline)).topics.get(topic)
        except KafkaException as e:
            consumer.poll(0)   # serves the error callback
            raise LagUnavailable("TargetUnreachable", errors.message(where, e)) from None
        if metadata is None or (metadata.error is not None
                                and metadata.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            return {}   # MirrorMaker has committed nothing yet
        if metadata.error is not None:
            raise LagUnavailable("TargetUnreachable", f"{where}: {topic}: {metadata.error.str()}")
        consumer.assign([Partition(topic, p, -2) for p in metadata.partitions])   # -2: the log start
        fail = lambda message: LagUnavailable("TargetUnreachable", f"{where}: {message}")   # noqa: E731
        return parse(_records(consumer, set(metadata.partitions), deadline, topic, fail), alias)
    finally:
        consumer.close()


def source_offsets(settings: dict[str, str], mirrored: Callable[[str], bool],
                   deadline: float) -> dict[TopicPartition, SourcePartition]:
    """The log start and end offsets of the source's partitions of the topics ``mirrored`` picks."""
    errors = _Errors()
    where = f"source {settings['bootstrap.servers']}"
    admin = _client(AdminClient, settings, deadline, errors)
    try:
        topics = admin.list_topics(timeout=_remaining(deadline)).topics
        partitions = [Partition(name, p) for name, t in topics.items() if mirrored(name) for p in t.partitions]
        if not partitions:
            return {}
        start, end = (admin.list_offsets({tp: spec for tp in partitions}, request_timeout=_remaining(deadline))
                      for spec in (OffsetSpec.earliest(), OffsetSpec.latest()))
        return {(tp.topic, tp.partition): SourcePartition(start[tp].result(_remaining(deadline)).offset,
                                                          end[tp].result(_remaining(deadline)).offset)
                for tp in partitions}
    except (KafkaException, FutureTimeout) as e:
        admin.poll(0)   # serves the error callback
        raise LagUnavailable("SourceUnreachable", errors.message(where, e)) from None
