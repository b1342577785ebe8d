"""The transaction coordinator's Prometheus series, in the names Strimzi's JMX-exporter rules
give Apache Kafka 3.9's (docs/observability.md):

- ``kafka.server:type=transaction-coordinator-metrics`` ``partition-load-time-avg`` / ``-max``
  (Kafka's sensor on TransactionStateManager: ms to load a ``__transaction_state`` partition
  this broker came to lead, over Kafka's default metric window, two samples of 30 s; NaN
  without a load in it, as Kafka's Avg and Max);
- ``kafka.coordinator.transaction:type=TransactionMarkerChannelManager``
  ``UnknownDestinationQueueSize`` (transactions whose markers wait for a partition without a
  live leader) and ``LogAppendRetryQueueSize`` (transactions whose markers are written and
  whose CompleteCommit/CompleteAbort write is being retried);
- ``odradek_transaction_coordinator_unparseable_records_total`` (Odradek's own: records of
  ``__transaction_state`` skipped while loading because they could not be parsed).

Computed at scrape time from what the coordinator and its ``MarkerSender`` keep.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterator

from prometheus_client.core import Metric

from odradek.metrics_http import counter, gauge

WINDOW_S = 2 * 30.0   # Kafka's metrics.num.samples (2) x metrics.sample.window.ms (30 s)


class WindowedTimes:
    """Durations (ms) recorded over the last ``window_s`` seconds: their average and maximum."""

    def __init__(self, window_s: float = WINDOW_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s, self.clock = window_s, clock
        self._times: deque[tuple[float, float]] = deque()

    def record(self, ms: float) -> None:
        self._times.append((self.clock(), ms))

    def _recent(self) -> list[float]:
        horizon = self.clock() - self.window_s
        while self._times and self._times[0][0] < horizon:
            self._times.popleft()
        return [ms for _, ms in self._times]

    def avg(self) -> float:
        recent = self._recent()
        return sum(recent) / len(recent) if recent else math.nan

    def max(self) -> float:
        recent = self._recent()
        return max(recent) if recent else math.nan


@dataclass(eq=False)
class TxnCollector:
    coordinator: object   # TransactionCoordinator

    def collect(self) -> Iterator[Metric]:
        loads = self.coordinator.load_times
        prefix = "kafka_server_transaction_coordinator_metrics_partition_load_time_"
        yield gauge(prefix + "avg", "average ms to load a __transaction_state partition (last 30-60 s)", loads.avg())
        yield gauge(prefix + "max", "longest ms to load a __transaction_state partition (last 30-60 s)", loads.max())
        prefix = "kafka_coordinator_transaction_transactionmarkerchannelmanager_"
        yield gauge(prefix + "unknowndestinationqueuesize",
                    "transactions whose markers wait for a partition without a live leader",
                    len(self.coordinator.markers.unknown_destination))
        yield gauge(prefix + "logappendretryqueuesize",
                    "transactions whose markers are written and whose completion write is being retried",
                    len(self.coordinator.append_retries))
        yield counter("odradek_transaction_coordinator_unparseable_records",
                      "records of __transaction_state skipped while loading: they could not be parsed",
                      self.coordinator.unparseable_records)
