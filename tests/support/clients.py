"""Produce and consume ``Sent``/``Got`` records with each Kafka client the tests use:
librdkafka (confluent-kafka), kafka-python and aiokafka.

Each ``*_produce`` returns ``{index: partition}`` from the delivery reports; each
``*_consume`` assigns every partition from the beginning (no group) and returns the records in
consumption order with the sum of the high watermarks.
"""

from __future__ import annotations

import asyncio
import time

from tests.support.records import Got, Sent

PRODUCE_TIMEOUT_S = 120
CONSUME_TIMEOUT_S = 120


def confluent_produce(bootstrap: str, topic: str, records: list[Sent], **conf) -> dict[int, int]:
    """Produce with librdkafka (retries off); {index: partition} from the delivery reports."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, "retries": 0,
                         "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 2 * len(records) + 10,
                         "message.timeout.ms": PRODUCE_TIMEOUT_S * 1000, **conf})
    delivered: dict[int, int] = {}
    errors: list = []

    for s in records:
        def cb(err, msg, index=s.index):
            if err is not None:
                errors.append((index, err))
            else:
                delivered[index] = msg.partition()
        while True:
            try:
                producer.produce(topic, key=s.key, value=s.value, headers=list(s.headers) or None,
                                 timestamp=s.timestamp, on_delivery=cb)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(PRODUCE_TIMEOUT_S) == 0, "records still queued after the flush deadline"
    assert not errors, f"{len(errors)} delivery errors, first: {errors[0]}"
    assert len(delivered) == len(records)
    return delivered


def confluent_consume(bootstrap: str, topic: str, partitions: int, expected: int) -> tuple[list[Got], int]:
    """assign() every partition at OFFSET_BEGINNING and read until ``expected`` records (plus a
    last look for extras); returns (records in consumption order, sum of high watermarks)."""
    from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, Consumer, KafkaError, TopicPartition
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"{topic}-reader",  # required by librdkafka, never joined
        "enable.auto.commit": False, "enable.auto.offset.store": False, "auto.offset.reset": "error",
        "fetch.max.bytes": 50 * 1024 * 1024, "max.partition.fetch.bytes": 8 * 1024 * 1024})
    got: list[Got] = []
    errors = []

    def consume(timeout):
        for m in consumer.consume(num_messages=10_000, timeout=timeout):
            if m.error() is not None:
                if m.error().code() != KafkaError._PARTITION_EOF:
                    errors.append(m.error())
                continue
            ts_type, ts = m.timestamp()
            got.append(Got(m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ()), ts,
                           ts_type == TIMESTAMP_CREATE_TIME))
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while len(got) < expected and time.monotonic() < deadline and not errors:
            consume(0.5)
        consume(1.0)  # anything beyond the expected count (there must be nothing)
        high = sum(high_watermark(consumer, topic, p) for p in range(partitions))
    finally:
        consumer.close()
    assert not errors, f"consumer errors: {errors[:5]}"
    return got, high


def high_watermark(consumer, topic: str, partition: int, timeout: float = 30.0) -> int:
    """librdkafka does not retry an offset query that meets a leader move (a preferred-leader
    election, a restart): a Kafka client would refresh its metadata and ask again, so this does."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition
    deadline = time.monotonic() + timeout
    while True:
        try:
            return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
        except KafkaException as e:
            moved = e.args[0].code() in (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE)
            if not moved or time.monotonic() > deadline:
                raise
            consumer.list_topics(topic, timeout=10)
            time.sleep(0.2)


def kafka_python_produce(bootstrap: str, topic: str, records: list[Sent], **conf) -> dict[int, int]:
    from kafka import KafkaProducer
    producer = KafkaProducer(**{"bootstrap_servers": bootstrap.split(","), "enable_idempotence": False,
                                "retries": 0, "linger_ms": 20, "batch_size": 512 * 1024,
                                "max_request_size": 4 * 1024 * 1024, "request_timeout_ms": 60_000, **conf})
    try:
        futures = [producer.send(topic, key=s.key, value=s.value, headers=list(s.headers),
                                 timestamp_ms=s.timestamp) for s in records]
        producer.flush(timeout=PRODUCE_TIMEOUT_S)
    finally:
        producer.close(timeout=30)
    failed = [(i, f.exception) for i, f in enumerate(futures) if not f.is_done or f.failed()]
    assert not failed, f"{len(failed)} sends failed or unfinished, first: {failed[0]}"
    return {s.index: f.value.partition for s, f in zip(records, futures)}


def kafka_python_consume(bootstrap: str, topic: str, partitions: int, expected: int) -> tuple[list[Got], int]:
    """assign + seek_to_beginning (no group); CRCs checked by the client."""
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=None, enable_auto_commit=False,
                             auto_offset_reset="none", fetch_max_bytes=50 * 1024 * 1024,
                             max_partition_fetch_bytes=8 * 1024 * 1024, check_crcs=True)
    got: list[Got] = []

    def poll(timeout_ms):
        for batch in consumer.poll(timeout_ms=timeout_ms, max_records=20_000).values():
            got.extend(Got(r.partition, r.offset, r.key, r.value, tuple((k, v) for k, v in r.headers),
                           r.timestamp, r.timestamp_type == 0) for r in batch)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while len(got) < expected and time.monotonic() < deadline:
            poll(500)
        poll(1000)  # anything beyond the expected count (there must be nothing)
        high = sum(consumer.end_offsets(tps).values())
    finally:
        consumer.close()
    return got, high


def aiokafka_produce(bootstrap: str, topic: str, records: list[Sent], **conf) -> dict[int, int]:
    return asyncio.run(asyncio.wait_for(_aiokafka_send(bootstrap, topic, records, conf), PRODUCE_TIMEOUT_S))


def aiokafka_consume(bootstrap: str, topic: str, partitions: int, expected: int) -> tuple[list[Got], int]:
    return asyncio.run(asyncio.wait_for(_aiokafka_read(bootstrap, topic, partitions, expected),
                                        CONSUME_TIMEOUT_S + 30))


async def _aiokafka_send(bootstrap, topic, records, conf):
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(**{"bootstrap_servers": bootstrap, "enable_idempotence": False,
                                   "linger_ms": 20, "max_batch_size": 512 * 1024,
                                   "max_request_size": 4 * 1024 * 1024, "request_timeout_ms": 60_000, **conf})
    await producer.start()
    try:
        futures = [await producer.send(topic, key=s.key, value=s.value, headers=list(s.headers),
                                       timestamp_ms=s.timestamp) for s in records]
        await producer.flush()
        results = await asyncio.gather(*futures, return_exceptions=True)
    finally:
        await producer.stop()
    failed = [(i, r) for i, r in enumerate(results) if isinstance(r, BaseException)]
    assert not failed, f"{len(failed)} sends failed, first: {failed[0]!r}"
    # with acks=0 aiokafka resolves each send to None: no partition to compare with
    return {s.index: r.partition for s, r in zip(records, results) if r is not None}


async def _aiokafka_read(bootstrap, topic, partitions, expected):
    """assign + seek_to_beginning (no group); CRCs checked by the client."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="none", fetch_max_bytes=50 * 1024 * 1024,
                                max_partition_fetch_bytes=8 * 1024 * 1024, check_crcs=True)
    await consumer.start()
    got: list[Got] = []

    async def poll(timeout_ms):
        for batch in (await consumer.getmany(timeout_ms=timeout_ms, max_records=20_000)).values():
            got.extend(Got(r.partition, r.offset, r.key, r.value, tuple((k, v) for k, v in r.headers),
                       r.timestamp, r.timestamp_type == 0) for r in batch)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while len(got) < expected and time.monotonic() < deadline:
            await poll(500)
        await poll(1000)  # anything beyond the expected count (there must be nothing)
        high = sum((await consumer.end_offsets(tps)).values())
    finally:
        await consumer.stop()
    return got, high
