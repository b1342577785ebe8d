"""Reading every partition of the topic from offset 0, or its tail (assign + seek, confluent-kafka).

``read_all`` asks each partition's leader for its high watermark, then reads from offset 0
until it has reached it (consumers only ever see offsets below the high watermark). A
partition whose watermark cannot be had (no leader) or that is not read to the end before the
deadline is left out of ``complete``; what was read of it is kept (a partial read still
constrains what each offset means).
"""

from __future__ import annotations

import time

from odradek.dev.access import KafkaAccess


def read_all(kafka: KafkaAccess, topic: str, partitions: list[int], timeout: float = 30.0, tail: int = 0,
             committed: bool = False) -> tuple[dict[int, list[tuple[int, str]]], set[int], list[str]]:
    """({partition: [(offset, value)]}, partitions read to their high watermark, errors).

    ``tail`` > 0 reads only each partition's last ``tail`` offsets below the high watermark
    (where a truncation would strike), so that repeated snapshots of a long run stay small.
    ``committed``: read_committed, up to the last stable offset; the last offsets below it may
    be markers or aborted records, never delivered, so the end of a partition is its EOF."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
    deadline = time.monotonic() + timeout
    consumer = Consumer(kafka.confluent({"group.id": "odradek-verify-reader",
                         "enable.auto.commit": False, "enable.auto.offset.store": False,
                         "auto.offset.reset": "error", "fetch.wait.max.ms": 100,
                         "topic.metadata.refresh.interval.ms": 1000,
                         "isolation.level": "read_committed" if committed else "read_uncommitted",
                         "enable.partition.eof": committed}))
    records: dict[int, list[tuple[int, str]]] = {p: [] for p in partitions}
    complete: set[int] = set()
    errors: list[str] = []
    try:
        ends: dict[int, int] = {}
        starts: dict[int, int] = {}
        for p in partitions:
            while p not in ends and time.monotonic() < deadline:
                try:
                    low, high = consumer.get_watermark_offsets(
                        TopicPartition(topic, p), timeout=max(0.5, min(5.0, deadline - time.monotonic())))
                except KafkaException as e:
                    errors.append(f"p{p} watermarks: {e}")
                    time.sleep(0.2)
                    continue
                if low > 0:
                    errors.append(f"p{p}: log start offset {low} > 0")
                ends[p] = high
                starts[p] = max(low, high - tail) if tail > 0 else 0
        pending = {p for p, end in ends.items() if end > starts[p]}
        complete |= set(ends) - pending
        if pending:
            consumer.assign([TopicPartition(topic, p, starts[p]) for p in sorted(pending)])
        while pending and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=5000, timeout=0.2):
                err = m.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        errors.append(f"p{m.partition()}: {err}")
                    elif m.partition() in pending and m.offset() >= ends[m.partition()]:
                        pending.discard(m.partition())
                        complete.add(m.partition())
                    continue
                p, o = m.partition(), m.offset()
                records[p].append((o, (m.value() or b"").decode("utf-8", "replace")))
                if p in pending and o >= ends[p] - 1:
                    pending.discard(p)
                    complete.add(p)
    finally:
        consumer.close()
    return records, complete, errors[:50]
