"""Which Kafka client should the gateway use? A quick side by side of aiokafka and
confluent-kafka doing the gateway's two hot paths on one topic of a running cluster:
produce N records of 1 KiB (acks=all, batched) and read them back from offset 0 (group-less).

    .venv/bin/python -m bench.gateway_clients --bootstrap HOST:PORT [--records 100000]

Prints one JSON line per (client, path) with records/s and MB/s.
The gateway's own figures come from ``python -m bench.gateway``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition as AioTP
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

VALUE = b"x" * 1024


def create_topic(bootstrap: str) -> str:
    name = f"bench-clients-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic exists
    admin.create_topics([NewTopic(name, 1, 3)])[name].result(30)
    return name


def confluent_produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2, "batch.size": 1 << 20,
                  "enable.idempotence": False})
    for _ in range(n):
        while True:
            try:
                p.produce(topic, VALUE, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(60) == 0


def confluent_read(bootstrap: str, topic: str, n: int) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "enable.partition.eof": True, "fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 8 << 20})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    while got < n:
        for m in c.consume(10_000, 1.0):
            if m.error() is None:
                got += 1
            elif m.error().code() != KafkaError._PARTITION_EOF:
                raise RuntimeError(m.error())
    c.close()


async def aiokafka_produce(bootstrap: str, topic: str, n: int) -> None:
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2, max_batch_size=1 << 20)
    await p.start()
    try:
        futures = [await p.send(topic, VALUE, partition=0) for _ in range(n)]
        await asyncio.gather(*futures)
    finally:
        await p.stop()


async def aiokafka_read(bootstrap: str, topic: str, n: int) -> None:
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_bytes=64 << 20,
                         max_partition_fetch_bytes=8 << 20)
    await c.start()
    try:
        tp = AioTP(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        got = 0
        while got < n:
            batches = await c.getmany(tp, timeout_ms=1000, max_records=10_000)
            got += sum(len(v) for v in batches.values())
    finally:
        await c.stop()


def timed(label: str, fn, n: int) -> None:
    started = time.perf_counter()
    fn()
    s = time.perf_counter() - started
    print(json.dumps({"run": label, "records": n, "seconds": round(s, 2), "records_s": round(n / s),
                      "mb_s": round(n * 1024 / s / 1e6, 1)}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--records", type=int, default=100_000)
    a = ap.parse_args()
    n = a.records
    t1, t2 = create_topic(a.bootstrap), create_topic(a.bootstrap)
    timed("confluent-kafka produce", lambda: confluent_produce(a.bootstrap, t1, n), n)
    timed("aiokafka produce", lambda: asyncio.run(aiokafka_produce(a.bootstrap, t2, n)), n)
    timed("confluent-kafka read", lambda: confluent_read(a.bootstrap, t1, n), n)
    timed("aiokafka read", lambda: asyncio.run(aiokafka_read(a.bootstrap, t2, n)), n)


if __name__ == "__main__":
    main()
