"""One group member as a process, for the integration tests: ``python -m tests.groups.consumer_proc
CLIENT BOOTSTRAP TOPIC GROUP`` subscribes with confluent-kafka, kafka-python or aiokafka and
prints JSON lines: ``{"assigned": [partitions]}`` whenever its assignment changes and
``{"p": partition, "o": offset}`` for each record it processed; it commits synchronously after
each processed batch. SIGTERM closes the consumer (it leaves the group); SIGKILL is a crash.
Optional ``INSTANCE`` (5th argument) sets group.instance.id (static membership).
``confluent-kafka-848`` is librdkafka's KIP-848 consumer (``group.protocol=consumer``: the
broker assigns, session and heartbeat are the broker's); it prints ``{"assigned": [...], "t":
wall time}`` from its rebalance callbacks, so that the tests can order ownership across members,
and a failed commit as ``{"commit_error": ...}`` (its records are then read again by the next owner).
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time

SESSION_MS = 6000
HEARTBEAT_MS = 1000

stopping = False


def _stop(*_):
    global stopping
    stopping = True


def emit(obj) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Assignment:
    def __init__(self) -> None:
        self.last = None

    def update(self, partitions) -> None:
        current = sorted(partitions)
        if current != self.last:
            self.last = current
            emit({"assigned": current})


def confluent(bootstrap, topic, group, instance):
    from confluent_kafka import Consumer
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS, "topic.metadata.refresh.interval.ms": 2000}
    if instance:
        conf["group.instance.id"] = instance
    c = Consumer(conf)
    seen = Assignment()
    c.subscribe([topic])
    while not stopping:
        msgs = c.consume(500, 0.2)
        seen.update(tp.partition for tp in c.assignment())
        good = [m for m in msgs if m.error() is None]
        for m in good:
            emit({"p": m.partition(), "o": m.offset()})
        if good:
            c.commit(asynchronous=False)
    c.close()


def confluent_848(bootstrap, topic, group, instance):
    from confluent_kafka import Consumer
    owned: set[int] = set()

    def changed(add, parts):
        (owned.update if add else owned.difference_update)(tp.partition for tp in parts)
        emit({"assigned": sorted(owned), "t": time.time()})
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 2000}
    if instance:
        conf["group.instance.id"] = instance
    c = Consumer(conf)
    c.subscribe([topic], on_assign=lambda _c, ps: changed(True, ps), on_revoke=lambda _c, ps: changed(False, ps),
                on_lost=lambda _c, ps: changed(False, ps))
    while not stopping:
        good = [m for m in c.consume(500, 0.2) if m.error() is None]
        for m in good:
            emit({"p": m.partition(), "o": m.offset()})
        if good:
            commit_848(c)
    c.close()


def commit_848(c, tries: int = 20) -> None:
    """A synchronous commit retried on STALE_MEMBER_EPOCH with the epoch the next heartbeat brings,
    as Kafka's Java consumer retries it (a member leaving the group moves the others' epochs on
    while their commits are in flight); another error, or the last try's, is reported."""
    from confluent_kafka import KafkaError, KafkaException
    for attempt in range(tries):
        try:
            c.commit(asynchronous=False)
            return
        except KafkaException as e:
            if e.args[0].code() != KafkaError.STALE_MEMBER_EPOCH or attempt == tries - 1:
                emit({"commit_error": str(e)})
                return
            time.sleep(0.1)


def kafka_python(bootstrap, topic, group, instance):
    from kafka import KafkaConsumer
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap.split(","), group_id=group, enable_auto_commit=False,
                      auto_offset_reset="earliest", session_timeout_ms=SESSION_MS,
                      heartbeat_interval_ms=HEARTBEAT_MS, metadata_max_age_ms=2000,
                      **({"group_instance_id": instance} if instance else {}))
    seen = Assignment()
    while not stopping:
        batches = c.poll(timeout_ms=200, max_records=500)
        seen.update(tp.partition for tp in c.assignment())
        for records in batches.values():
            for r in records:
                emit({"p": r.partition, "o": r.offset})
        if batches:
            c.commit()
    c.close()


def aiokafka(bootstrap, topic, group, instance):
    async def main():
        from aiokafka import AIOKafkaConsumer
        c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=SESSION_MS,
                             heartbeat_interval_ms=HEARTBEAT_MS, metadata_max_age_ms=2000)
        await c.start()
        seen = Assignment()
        try:
            while not stopping:
                batches = await c.getmany(timeout_ms=200, max_records=500)
                seen.update(tp.partition for tp in c.assignment())
                for records in batches.values():
                    for r in records:
                        emit({"p": r.partition, "o": r.offset})
                if batches:
                    await c.commit()
        finally:
            await c.stop()
    asyncio.run(main())


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _stop)
    client, bootstrap, topic, group = sys.argv[1:5]
    instance = sys.argv[5] if len(sys.argv) > 5 else None
    {"confluent-kafka": confluent, "confluent-kafka-848": confluent_848, "kafka-python": kafka_python,
     "aiokafka": aiokafka}[client](
        bootstrap, topic, group, instance)
    emit({"closed": True})
