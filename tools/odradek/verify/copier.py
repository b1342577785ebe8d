"""The consume-transform-produce stage of ``odradek verify --transactional``, and its check.

``Copier`` reads the verify topic read_committed (consumer group ``<topic>-copier``, its
partitions assigned, no auto commit) and writes each record it reads to ``<topic>-out``, same
partition, value ``"<partition>:<offset>"`` of the input, in transactions of ``COPY_SIZE``
with the consumer's positions sent to the transaction (``send_offsets_to_transaction``, the
consumer's group metadata), committing them and aborting every ``ABORT_EVERY``-th on purpose.
After an abort it rewinds to the positions of its last commit; after an outcome it cannot
know (a commit or abort that failed without saying) it re-initialises (which completes or
aborts what was open) and rewinds to the group's committed offsets.

``check_copy`` holds the run to exactly-once: for each input partition, with ``c`` the group's
committed offset, every committed output's input is below ``c``, no input record below ``c``
lacks its output, no output is there twice, and an output's input is a committed input
record: the committed offset then counts exactly the input records whose outputs are
committed. ``c`` must also have reached the input's last record once the copier drained.
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback
import time
from collections import Counter

from odradek.dev.access import KafkaAccess

log = logging.getLogger("odradek.verify")

COPY_SIZE = 50
ABORT_EVERY = 5
_RETRY_S = 0.5


def output_topic(topic: str) -> str:
    return f"{topic}-out"


def copier_group(topic: str) -> str:
    return f"{topic}-copier"


def copier_transactional_id(topic: str) -> str:
    return f"odradek-verify-{topic}-copier"


class StuckClient(Exception):
    """A client call that did not return within its own timeout."""


class Copier(threading.Thread):
    def __init__(self, kafka: KafkaAccess, topic: str, partitions: list[int], stop: threading.Event,
                 timeout_s: float = 60.0) -> None:
        super().__init__(name="copier", daemon=True)
        self.kafka, self.topic, self.partitions, self.stop_event = kafka, topic, list(partitions), stop
        self.timeout_s = timeout_s
        self.committed: dict[int, int] = {}    # positions of the last commit that returned
        self.txns = self.commits = self.aborts = self.unknown = 0
        self.error: BaseException | None = None
        self.producer = self.consumer = None

    # -- clients ----------------------------------------------------------------------------
    def _open_producer(self) -> None:
        from confluent_kafka import Producer
        while not self.stop_event.is_set():
            try:
                self.producer = Producer(self.kafka.confluent({
                    "client.id": "copier", "acks": "all", "linger.ms": 5,
                    "transactional.id": copier_transactional_id(self.topic),
                    "transaction.timeout.ms": int(self.timeout_s * 1000),
                    "topic.metadata.refresh.interval.ms": 5000}))
                self.producer.init_transactions(self.timeout_s)
                return
            except Exception as e:  # the coordinator may be down: keep trying while the run lasts
                log.info("copier: init_transactions failed: %r", e)
                time.sleep(_RETRY_S)

    def _open_consumer(self) -> None:
        from confluent_kafka import Consumer
        self.consumer = Consumer(self.kafka.confluent({
            "group.id": copier_group(self.topic), "enable.auto.commit": False,
            "isolation.level": "read_committed", "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100, "topic.metadata.refresh.interval.ms": 5000}))

    def _rewind(self, positions: dict[int, int]) -> None:
        """Read again from ``positions`` (the start where a partition has none)."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition
        self.consumer.assign([TopicPartition(self.topic, p, positions.get(p, OFFSET_BEGINNING))
                              for p in self.partitions])

    def _group_offsets(self) -> dict[int, int]:
        """The group's committed offsets (retried until the coordinator answers)."""
        from confluent_kafka import TopicPartition
        while True:
            try:
                tps = self.consumer.committed([TopicPartition(self.topic, p) for p in self.partitions], timeout=10)
                return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}
            except Exception as e:
                if self.stop_event.is_set():
                    raise
                log.info("copier: committed offsets: %r", e)
                time.sleep(_RETRY_S)

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> None:
        try:
            self._open_consumer()
            self._open_producer()
            self.committed = self._group_offsets()
            self._rewind(self.committed)
            while not self.stop_event.is_set():
                self.copy_once()
        except BaseException as e:
            if not self.stop_event.is_set():
                log.exception("copier failed")
                self.error = e
        finally:
            if self.consumer is not None:
                self.consumer.close()

    def copy_once(self) -> None:
        from confluent_kafka import KafkaError, TopicPartition
        messages = []
        for m in self.consumer.consume(num_messages=COPY_SIZE, timeout=0.5):
            if m.error() is None:
                messages.append(m)
            elif m.error().code() != KafkaError._PARTITION_EOF:
                log.info("copier: consuming partition %s: %s", m.partition(), m.error())
        if not messages:
            return
        self.txns += 1
        commit = self.txns % ABORT_EVERY != 0
        positions = dict(self.committed)
        for m in messages:
            positions[m.partition()] = m.offset() + 1
        try:
            self.producer.begin_transaction()
            for m in messages:
                self._produce(m.partition(), f"{m.partition()}:{m.offset()}")
            self._send_offsets([TopicPartition(self.topic, p, o) for p, o in sorted(positions.items())])
        except StuckClient as e:
            log.info("copier: transaction %d: %s; a new producer fences it", self.txns, e)
            outcome = None
        except Exception as e:
            log.info("copier: transaction %d failed before its end: %r; aborting it", self.txns, e)
            outcome = self._finish(False)
        else:
            outcome = self._finish(commit)
        if outcome == "commit":   # the consumer is already at these positions
            self.commits += 1
            self.committed = positions
            return
        if outcome == "abort":
            self.aborts += 1
        else:
            self.unknown += 1
            self._open_producer()
            self.committed = self._group_offsets()
        self._rewind(self.committed)

    def _send_offsets(self, offsets) -> None:
        """send_offsets_to_transaction, given up on past its timeout: librdkafka can block in it
        for ever while the group coordinator is down (librdkafka issues 5456 and 5511: its
        coordinator requests' timeout is never checked). The call is left in its thread."""
        outcome: list[BaseException | None] = []

        def call() -> None:
            try:
                self.producer.send_offsets_to_transaction(offsets, self.consumer.consumer_group_metadata(),
                                                          self.timeout_s)
                outcome.append(None)
            except BaseException as e:
                outcome.append(e)
        worker = threading.Thread(target=call, name="copier-send-offsets", daemon=True)
        worker.start()
        worker.join(self.timeout_s + 10)
        if worker.is_alive():
            raise StuckClient(f"send_offsets_to_transaction still blocked 10 s past its {self.timeout_s:.0f} s "
                              "timeout (librdkafka issue 5456)")
        if outcome[0] is not None:
            raise outcome[0]

    def _produce(self, partition: int, value: str) -> None:
        while True:
            try:
                self.producer.produce(output_topic(self.topic), value=value.encode(), partition=partition)
                return
            except BufferError:
                self.producer.poll(0.05)

    def _finish(self, commit: bool) -> str | None:
        """"commit", "abort", or None when the outcome is unknown."""
        from confluent_kafka import KafkaException
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            try:
                if commit:
                    self.producer.commit_transaction(max(1.0, deadline - time.monotonic()))
                    return "commit"
                self.producer.abort_transaction(max(1.0, deadline - time.monotonic()))
                return "abort"
            except KafkaException as e:
                err = e.args[0]
                if err.txn_requires_abort() and commit:
                    commit = False
                elif not err.retriable():
                    log.info("copier: transaction %d: %s", self.txns, err)
                    return None
                time.sleep(_RETRY_S)
        return None

    def drain(self, ends: dict[int, int], timeout: float) -> bool:
        """Copy until the last commit covers every offset below ``ends`` (each input
        partition's last record + 1), then stop; False if it did not within ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.is_alive():
            if all(self.committed.get(p, 0) >= end for p, end in ends.items()):
                break
            time.sleep(0.2)
        else:
            if self.is_alive():  # where it is stuck, for the report's reader
                frame = sys._current_frames().get(self.ident)
                log.info("copier: not drained in %.0f s; committed %s; its stack:\n%s", timeout, self.committed,
                         "".join(traceback.format_stack(frame)) if frame else "?")
        self.stop_event.set()
        self.join(self.timeout_s + 30)
        return all(self.committed.get(p, 0) >= end for p, end in ends.items())

    def summary(self) -> dict:
        return {"transactions": self.txns, "committed": self.commits, "aborted": self.aborts,
                "unknown": self.unknown}


def group_offsets(kafka: KafkaAccess, topic: str, partitions: list[int], timeout: float = 30.0) -> dict[int, int]:
    """The copier group's committed offsets, read by a fresh read_committed consumer."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer(kafka.confluent({"group.id": copier_group(topic), "enable.auto.commit": False,
                                         "isolation.level": "read_committed"}))
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=timeout)
        return {tp.partition: max(tp.offset, 0) for tp in tps}
    finally:
        consumer.close()


def check_copy(inputs: dict[int, list[tuple[int, str]]], outputs: dict[int, list[tuple[int, str]]],
               committed: dict[int, int]) -> list[dict]:
    """The anomalies of the copy (empty: offsets were committed atomically with the output)."""
    anomalies: list[dict] = []
    for p, records in sorted(inputs.items()):
        c = committed.get(p, 0)
        copied = Counter(value for _, value in outputs.get(p, []))
        present = {o for o, _ in records}
        for value, n in sorted(copied.items()):
            o = int(value.split(":")[1])
            if n > 1:
                anomalies.append({"what": "output duplicated", "input": value, "times": n})
            if o >= c:
                anomalies.append({"what": "output of an input at or past the committed offset",
                                  "input": value, "committed": c})
            elif o not in present:
                anomalies.append({"what": "output of no committed input record", "input": value})
        for o, _ in records:
            if o < c and f"{p}:{o}" not in copied:
                anomalies.append({"what": "input below the committed offset without output", "input": f"{p}:{o}",
                                  "committed": c})
        if records and c <= records[-1][0]:
            anomalies.append({"what": "committed offset short of the input's last record",
                              "partition": p, "committed": c, "last": records[-1][0]})
        below = sum(1 for o, _ in records if o < c)
        if below != sum(copied.values()):
            anomalies.append({"what": "committed offset does not count the committed outputs", "partition": p,
                              "inputs_below": below, "outputs": sum(copied.values())})
    return anomalies


def check_copier(copier: Copier, kafka: KafkaAccess, inputs: dict[int, list[tuple[int, str]]], report,
                 timeout: float) -> None:
    """Drain the copier up to the final read's last records, read its output and the group's
    offsets, and put the verdict in ``report`` (``copied``, ``copy``, ``copier``)."""
    from .reader import read_all
    ends = {p: records[-1][0] + 1 for p, records in inputs.items() if records}
    caught_up = copier.drain(ends, timeout)
    partitions = sorted(inputs)
    outputs, complete, errors = read_all(kafka, output_topic(copier.topic), partitions, timeout=timeout,
                                         committed=True)
    committed = group_offsets(kafka, copier.topic, partitions)
    report.copied = sum(len(v) for v in outputs.values())
    report.copy = check_copy(inputs, outputs, committed)
    if copier.error is not None:
        report.copy.append({"what": "copier failed", "error": repr(copier.error)})
    if set(partitions) - complete:
        report.copy.append({"what": "output read incomplete", "partitions": sorted(set(partitions) - complete),
                            "errors": errors[:5]})
    report.copier = {**copier.summary(), "caught_up": caught_up, "committed_offsets": committed}
