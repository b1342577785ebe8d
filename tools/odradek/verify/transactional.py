"""The transactional producers of ``odradek verify --transactional``.

Each worker is a confluent-kafka producer with its own ``transactional.id``: it sends its
values in transactions of ``TXN_SIZE`` and aborts every ``ABORT_EVERY``-th one on purpose. A
value is recorded ``ok`` (with the offset its delivery report gave) only once its
transaction's commit returned, ``fail`` once its transaction's abort returned (read_committed
readers must then never see it: the checker counts such a value read as a phantom), and
``info`` when the outcome is unknown (a commit or abort that failed without saying; the
producer is then re-initialised, which aborts or completes what was open). Duplicates fail
the run, as with idempotence; the reads are read_committed.
"""

from __future__ import annotations

import logging
import time

from .workload import ConfluentWorker

log = logging.getLogger("odradek.verify")

TXN_SIZE = 20
ABORT_EVERY = 7
_RETRY_S = 0.5


def transactional_id(topic: str, worker: str) -> str:
    return f"odradek-verify-{topic}-{worker}"


class TransactionalWorker(ConfluentWorker):
    client = "confluent-transactional"

    def reorder_reason(self) -> None:  # transactional ids imply idempotence: order is the broker's
        return None

    def open(self) -> None:
        from confluent_kafka import Producer
        self.producer = Producer(self.kafka.confluent({
            "client.id": self.name, "acks": "all", "transactional.id": transactional_id(self.topic, self.name),
            "linger.ms": 5, "message.timeout.ms": int(self.delivery_timeout_s * 1000),
            "transaction.timeout.ms": int(self.delivery_timeout_s * 1000),
            "topic.metadata.refresh.interval.ms": 5000}))
        self.producer.init_transactions(self.delivery_timeout_s)
        self.open_txn: list[tuple[str, int]] = []
        self.delivered: dict[str, tuple[int, int]] = {}
        self.txns = 0

    def send(self, value: str, partition: int) -> None:
        if not self.open_txn:
            self.producer.begin_transaction()

        def report(err, msg, value=value):
            if err is None:
                self.delivered[value] = (msg.partition(), msg.offset())
        self.produce(value, partition, report)
        self.open_txn.append((value, partition))
        if len(self.open_txn) >= TXN_SIZE:
            self.end_transaction()

    def end_transaction(self) -> None:
        values, self.open_txn = self.open_txn, []
        self.txns += 1
        outcome, error = self._finish(commit=self.txns % ABORT_EVERY != 0)
        for value, partition in values:
            where = self.delivered.pop(value, None)
            if outcome == "commit" and where is not None:
                self.history.ok(self.name, "send", value, partition=where[0], offset=where[1])
            elif outcome == "abort":
                self.history.fail(self.name, "send", value, partition=partition, error="transaction aborted")
            else:
                self.history.info(self.name, "send", value, partition=partition, error=error or "no delivery report")
            self._done()
        if outcome is None:
            log.info("%s: transaction outcome unknown (%s); re-initialising", self.name, error)
            self._reopen()

    def _finish(self, commit: bool) -> tuple[str | None, str | None]:
        """("commit" | "abort" | None, the error when None)."""
        from confluent_kafka import KafkaException
        deadline = time.monotonic() + self.delivery_timeout_s
        while True:
            try:
                if commit:
                    self.producer.commit_transaction(max(1.0, deadline - time.monotonic()))
                    return "commit", None
                self.producer.abort_transaction(max(1.0, deadline - time.monotonic()))
                return "abort", None
            except KafkaException as e:
                err = e.args[0]
                if err.txn_requires_abort() and commit:
                    commit = False
                elif not err.retriable() or time.monotonic() > deadline:
                    return None, str(err)
                time.sleep(_RETRY_S)

    def _reopen(self) -> None:
        while not self.stop_event.is_set():
            try:
                self.producer = None
                self.open()
                return
            except Exception as e:  # the coordinator may be down: keep trying while the run lasts
                log.info("%s: init_transactions failed: %r", self.name, e)
                time.sleep(_RETRY_S)

    def flush(self, timeout: float) -> None:
        if self.open_txn:
            self.end_transaction()
