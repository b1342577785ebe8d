"""Producers of the verify workload.

Each worker is a thread with its own client that sends unique values ``"<name>-<seq>"``
(``seq`` counts up from 0 in send order) to an explicit partition, round-robin over its
partition set, at a steady rate, and records every send in the history: ``invoke`` before the
client has it, ``ok`` with the acknowledged (partition, offset) from the delivery report,
``info`` when the delivery report is an error (the value may still have been written), and
``fail`` only when the client refused it before sending anything.

Both clients run with ``acks=all``, the idempotent producer off unless ``idempotent`` (then
duplicates are the broker's fault too) and their default retries, and with
``max.in.flight.requests.per.connection=1``. kafka-python then mutes a partition while its batch
is in flight (as Java's producer does) and cannot reorder it by retrying; librdkafka counts the
limit per connection, not per partition (librdkafka#1969), so a plain confluent-kafka producer
can have a batch in flight to the old leader and the next one to the new leader across a
leader change, and reorder them by itself. ``reorder_reason`` says so (the checker reports
such reorders as the client's); idempotent producers keep order in every client (Kafka's
guarantee of order under retries), so their reorders are the broker's.
"""

from __future__ import annotations

import logging
import threading
import time

from odradek.dev.access import KafkaAccess

from .history import History

log = logging.getLogger("odradek.verify")

CLIENTS = ("confluent", "kafka-python")
PLAIN_LIBRDKAFKA_REORDERS = (
    "plain (non-idempotent) librdkafka producer: max.in.flight.requests.per.connection is per connection, "
    "not per partition (librdkafka#1969), so across a leader change it can reorder by retrying; Kafka "
    "guarantees order under retries only with enable.idempotence")


class ProducerWorker(threading.Thread):
    client = "abstract"

    def __init__(self, name: str, kafka: KafkaAccess, topic: str, partitions: list[int], history: History,
                 stop: threading.Event, rate: float = 100.0, max_outstanding: int = 1000,
                 delivery_timeout_s: float = 60.0, client_debug: str = "", idempotent: bool = False) -> None:
        super().__init__(name=name, daemon=True)
        self.kafka, self.topic, self.partitions = kafka, topic, list(partitions)
        self.history, self.stop_event = history, stop
        self.rate, self.max_outstanding, self.delivery_timeout_s = rate, max_outstanding, delivery_timeout_s
        self.client_debug = client_debug  # librdkafka debug contexts, logged to odradek.verify.rdkafka.<name>
        self.idempotent = idempotent  # enable.idempotence: the broker must then drop retried batches
        self.seq = 0
        self.completed = 0
        self.error: BaseException | None = None
        self._lock = threading.Lock()

    # -- what a client provides -----------------------------------------------------------
    def reorder_reason(self) -> str | None:
        """Why this producer's client may reorder its own values by retrying; None: it keeps order."""
        return None

    def open(self) -> None: ...
    def send(self, value: str, partition: int) -> None: ...
    def poll(self, timeout: float) -> None: ...
    def flush(self, timeout: float) -> None: ...
    def close(self) -> None: ...

    # -- completions (any thread) ---------------------------------------------------------
    def acked(self, value: str, partition: int, offset: int) -> None:
        self.history.ok(self.name, "send", value, partition=partition, offset=offset)
        self._done()

    def errored(self, value: str, partition: int, error: str) -> None:
        self.history.info(self.name, "send", value, partition=partition, error=error)
        self._done()

    def _done(self) -> None:
        with self._lock:
            self.completed += 1

    @property
    def outstanding(self) -> int:
        with self._lock:
            return self.seq - self.completed

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> None:
        try:
            self.open()
            next_at = time.monotonic()
            while not self.stop_event.is_set():
                while self.outstanding >= self.max_outstanding and not self.stop_event.is_set():
                    self.poll(0.05)
                partition = self.partitions[self.seq % len(self.partitions)]
                value = f"{self.name}-{self.seq}"
                self.history.invoke(self.name, "send", value, partition=partition)
                try:
                    self.send(value, partition)
                except Exception as e:  # refused before sending: certainly not written
                    self.history.fail(self.name, "send", value, partition=partition, error=repr(e))
                    with self._lock:
                        self.completed += 1
                self.seq += 1
                self.poll(0)
                next_at += 1.0 / self.rate
                delay = next_at - time.monotonic()
                if delay > 0:
                    self.stop_event.wait(delay)
                elif delay < -1.0:
                    next_at = time.monotonic()  # fell behind (cluster unavailable): do not burst
            self.flush(self.delivery_timeout_s + 10)
        except BaseException as e:  # reported by the runner
            log.exception("%s failed", self.name)
            self.error = e
        finally:
            try:
                self.close()
            except Exception:
                log.exception("%s: close failed", self.name)


class ConfluentWorker(ProducerWorker):
    client = "confluent"

    def reorder_reason(self) -> str | None:
        return None if self.idempotent else PLAIN_LIBRDKAFKA_REORDERS

    def open(self) -> None:
        from confluent_kafka import Producer
        self.producer = Producer(self.kafka.confluent({
            "client.id": self.name, "acks": "all",
            "enable.idempotence": self.idempotent, "max.in.flight.requests.per.connection": 1,
            "linger.ms": 5, "message.timeout.ms": int(self.delivery_timeout_s * 1000),
            "topic.metadata.refresh.interval.ms": 5000,
            **({"debug": self.client_debug, "logger": logging.getLogger(f"odradek.verify.rdkafka.{self.name}")}
               if self.client_debug else {})}))

    def send(self, value: str, partition: int) -> None:
        def report(err, msg, value=value, partition=partition):
            if err is None:
                self.acked(value, msg.partition(), msg.offset())
            else:
                self.errored(value, partition, str(err))
        self.produce(value, partition, report)

    def produce(self, value: str, partition: int, report) -> None:
        """Hand ``value`` to the client, waiting while its queue is full."""
        while True:
            try:
                self.producer.produce(self.topic, value=value.encode(), key=self.name.encode(),
                                      partition=partition, on_delivery=report)
                return
            except BufferError:
                self.producer.poll(0.05)

    def poll(self, timeout: float) -> None:
        self.producer.poll(timeout)

    def flush(self, timeout: float) -> None:
        left = self.producer.flush(timeout)
        if left:
            log.warning("%s: %d sends unresolved after flushing for %.0fs", self.name, left, timeout)

    def close(self) -> None:
        self.producer = None


class KafkaPythonWorker(ProducerWorker):
    client = "kafka-python"

    def open(self) -> None:
        from kafka import KafkaProducer
        request_timeout_ms = min(15_000, int(self.delivery_timeout_s * 1000) // 2)
        self.producer = KafkaProducer(**self.kafka.kafka_python(
            client_id=self.name, acks="all",
            enable_idempotence=self.idempotent, max_in_flight_requests_per_connection=1, linger_ms=5,
            request_timeout_ms=request_timeout_ms,
            delivery_timeout_ms=int(self.delivery_timeout_s * 1000) + request_timeout_ms + 5,
            max_block_ms=10_000, metadata_max_age_ms=5000))

    def send(self, value: str, partition: int) -> None:
        future = self.producer.send(self.topic, value=value.encode(), key=self.name.encode(),
                                    partition=partition)
        future.add_callback(lambda md, value=value: self.acked(value, md.partition, md.offset))
        future.add_errback(lambda e, value=value, partition=partition: self.errored(value, partition, repr(e)))

    def poll(self, timeout: float) -> None:
        if timeout:
            time.sleep(timeout)

    def flush(self, timeout: float) -> None:
        try:
            self.producer.flush(timeout=timeout)
        except Exception as e:
            log.warning("%s: flush: %r", self.name, e)

    def close(self) -> None:
        if getattr(self, "producer", None) is not None:
            self.producer.close(timeout=10)


WORKERS = {"confluent": ConfluentWorker, "kafka-python": KafkaPythonWorker}


def make_producers(count: int, clients: tuple[str, ...], kafka: KafkaAccess, topic: str, partitions: list[int],
                   history: History, stop: threading.Event, *, partition_sets: list[list[int]] | None = None,
                   **options) -> list[ProducerWorker]:
    """``count`` workers, the i-th with client ``clients[i % len(clients)]``, named
    ``<client>-<i>``; each sends to every partition unless ``partition_sets[i]`` says otherwise.
    ``transactional=True``: confluent-kafka transactional producers (``transactional``) only.
    ``idempotent_last=N``: the last N workers idempotent beside plain ones (``idempotent`` makes all so)."""
    from .transactional import TransactionalWorker
    transactional = options.pop("transactional", False)
    idempotent_last = options.pop("idempotent_last", 0)
    workers = []
    for i in range(count):
        client = clients[i % len(clients)]
        cls = TransactionalWorker if transactional else WORKERS[client]
        parts = partition_sets[i % len(partition_sets)] if partition_sets else partitions
        if i >= count - idempotent_last:
            options = {**options, "idempotent": True}
        workers.append(cls(f"{client}-{i}", kafka, topic, parts, history, stop, **options))
    return workers
