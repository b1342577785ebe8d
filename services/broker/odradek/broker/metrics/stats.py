"""The broker's hot-path counters: plain ints and lists updated once per request or per
partition of a request, read by the collector at scrape time (``collector``).

prometheus-client's ``Counter.inc`` takes a lock and, with labels, looks the child up per
call; these do neither: the broker updates them from its one event-loop thread only, and a
scrape (on the same loop: the metrics endpoint is an aiohttp handler there) reads them.

- ``TopicStats``: Kafka's BrokerTopicMetrics per topic (bytes and records in on the leader,
  bytes out to consumers, produce/fetch request counts; with tiered storage, KIP-405's remote
  copy, fetch and delete meters, counted where those happen), one small list per topic.
- ``RequestStats``: Kafka's RequestMetrics per API: request count per version, and the
  request-time split (queue, local, remote, response queue, response send, total) as counts
  per log-spaced bucket in two rotating windows, from which a scrape reads quantiles (Kafka's
  histograms are also recent-biased) and lifetime counts and sums.
- ``remote_time``: what a handler spent parked (acks=all replication, a Fetch long poll),
  added to the request being served in this task (a context variable, set once per
  connection task), so that local = handled - started - remote.
"""

from __future__ import annotations

import bisect
import contextvars
import time

from kio.schema.index import api_key_map

# BrokerTopicMetrics slots
BYTES_IN, MESSAGES_IN, BYTES_OUT, PRODUCE_REQUESTS, FETCH_REQUESTS, FAILED_PRODUCE, FAILED_FETCH = range(7)
# ... and KIP-405's (Kafka's RemoteStorageMetrics), exported by metrics.remote
(REMOTE_COPY_BYTES, REMOTE_COPY_REQUESTS, REMOTE_COPY_ERRORS, REMOTE_FETCH_BYTES, REMOTE_FETCH_REQUESTS,
 REMOTE_FETCH_ERRORS, REMOTE_DELETE_REQUESTS, REMOTE_DELETE_ERRORS, BUILD_AUX_REQUESTS, BUILD_AUX_ERRORS) = range(7, 17)
_SLOTS = 17

# RequestMetrics phases, in Kafka's names
PHASES = ("requestqueuetimems", "localtimems", "remotetimems", "responsequeuetimems", "responsesendtimems",
          "totaltimems")
QUEUE, LOCAL, REMOTE, RESPONSE_QUEUE, RESPONSE_SEND, TOTAL = range(6)
# bucket upper bounds in ms: 0.05 ms .. ~100 s, 4 per doubling
BOUNDS_MS = tuple(0.05 * 2 ** (i / 4) for i in range(84))
QUANTILES = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)
WINDOW_S = 60.0


class TopicStats:
    """topic -> [bytes in, messages in, bytes out, produce requests, fetch requests, failed
    produce, failed fetch]; the totals are the sums (summed at scrape time)."""

    def __init__(self) -> None:
        self.topics: dict[str, list[int]] = {}
        self.no_key_compacted_records = 0   # broker-wide only, as Kafka's NoKeyCompactedTopicRecordsPerSec

    def slot(self, topic: str) -> list[int]:
        row = self.topics.get(topic)
        if row is None:
            row = self.topics[topic] = [0] * _SLOTS
        return row

    def produced(self, topic: str, size: int, records: int) -> None:
        row = self.slot(topic)
        row[BYTES_IN] += size
        row[MESSAGES_IN] += records
        row[PRODUCE_REQUESTS] += 1

    def fetched(self, topic: str, size: int) -> None:
        row = self.slot(topic)
        row[BYTES_OUT] += size
        row[FETCH_REQUESTS] += 1

    def failed(self, topic: str, slot: int) -> None:
        self.slot(topic)[slot] += 1

    def count(self, topic: str, slot: int, n: int = 1) -> None:
        self.slot(topic)[slot] += n

    def forget(self, topic: str) -> None:
        """A deleted topic's series go away, as Kafka removes its topic metrics."""
        self.topics.pop(topic, None)


class _Window:
    __slots__ = ("started", "buckets")

    def __init__(self, started: float) -> None:
        self.started = started
        self.buckets = [[0] * (len(BOUNDS_MS) + 1) for _ in PHASES]


class ApiTimes:
    """One API's request-time buckets (current and previous window), lifetime counts and sums."""
    __slots__ = ("count", "sums_ms", "current", "previous", "versions")

    def __init__(self, now: float) -> None:
        self.count = 0
        self.sums_ms = [0.0] * len(PHASES)
        self.current = _Window(now)
        self.previous = _Window(now)
        self.versions: dict[int, int] = {}

    def rotate(self, now: float) -> None:
        if now - self.current.started >= WINDOW_S:
            self.previous, self.current = self.current, _Window(now)

    def quantiles(self, phase: int) -> list[tuple[float, float]]:
        """(quantile, upper bound in ms) over the last one to two windows: one pass over the
        buckets for all quantiles (a scrape computes this per API and phase)."""
        current, previous = self.current.buckets[phase], self.previous.buckets[phase]
        total = sum(current) + sum(previous)
        if total == 0:
            return [(q, 0.0) for q in QUANTILES]
        out, ranks, seen = [], iter(QUANTILES), 0
        q = next(ranks)
        last = len(BOUNDS_MS) - 1
        for i, (a, b) in enumerate(zip(current, previous)):
            seen += a + b
            while q is not None and seen >= q * total:
                out.append((q, BOUNDS_MS[min(i, last)]))
                q = next(ranks, None)
            if q is None:
                break
        return out


def _kafka_name(snake: str) -> str:
    return "".join(word.capitalize() for word in snake.split("_"))


# api key -> Kafka's request name (the ``request`` label: Produce, Fetch, ListOffsets...)
API_NAMES = {key: _kafka_name(name) for key, name in api_key_map.items()}


class RequestStats:
    """api name -> ApiTimes. ``on_request`` (the Kafka connections' observer) is called once per
    request, after its response is written."""

    def __init__(self) -> None:
        self.apis: dict[str, ApiTimes] = {}

    def on_request(self, api_key: int, version: int, received: float, started: float, handled: float,
                   written: float) -> None:
        api = API_NAMES.get(api_key)
        if api is None:  # a bare SASL token (after SaslHandshake v0) is not a request
            take_remote_time()
            return
        remote = take_remote_time()
        self.observe(api, version, ((started - received) * 1000, (handled - started - remote) * 1000,
                                    remote * 1000, 0.0, (written - handled) * 1000, (written - received) * 1000))

    def observe(self, api: str, version: int, times_ms: tuple[float, ...]) -> None:
        entry = self.apis.get(api)
        if entry is None:
            entry = self.apis[api] = ApiTimes(time.monotonic())
        entry.count += 1
        entry.versions[version] = entry.versions.get(version, 0) + 1
        buckets, sums = entry.current.buckets, entry.sums_ms
        for phase, ms in enumerate(times_ms):
            sums[phase] += ms
            buckets[phase][bisect.bisect_left(BOUNDS_MS, ms)] += 1

    def rotate(self) -> None:
        now = time.monotonic()
        for entry in self.apis.values():
            entry.rotate(now)


class _Remote:
    __slots__ = ("seconds",)

    def __init__(self) -> None:
        self.seconds = 0.0


_REMOTE: contextvars.ContextVar[_Remote] = contextvars.ContextVar("odradek_remote_time")


def remote_time(seconds: float) -> None:
    """Add time the current request spent parked waiting on others (Kafka's remote time)."""
    holder = _REMOTE.get(None)
    if holder is None:
        holder = _Remote()
        _REMOTE.set(holder)
    holder.seconds += seconds


def take_remote_time() -> float:
    """The current request's remote time, reset for the next request of this connection."""
    holder = _REMOTE.get(None)
    if holder is None:
        return 0.0
    seconds, holder.seconds = holder.seconds, 0.0
    return seconds
