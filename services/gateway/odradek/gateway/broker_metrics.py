"""The brokers' Prometheus endpoints as the gateway reads them: the throughput counters of the
console's overview and the partitions' log sizes of its topic view (on the disk and, with tiered
storage, in the object store).

Kafka's protocol has both only in pieces (DescribeLogDirs, which librdkafka's Python client does
not expose, and no throughput at all), while every broker already exports them
(docs/observability.md): ``kafka_server_brokertopicmetrics_{bytesin,bytesout,messagesin}_total``
(the all-topics series, without a ``topic`` label), ``kafka_log_log_size{topic,partition}`` and, from
a leader with tiered storage, ``odradek_log_remote_size_bytes``, ``odradek_log_remote_segments`` and
``odradek_log_local_log_start_offset`` (per partition).

Where the endpoints are (``--broker-metrics-urls``): ``1=http://b1:9404/metrics,2=...``, or a
template formatted per broker of the cluster's Metadata, ``http://{host}:9404/metrics``
(``{host}``, ``{id}``). Empty: not configured, the answers say so.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import httpx
from prometheus_client.parser import text_string_to_metric_families

SCRAPE_TIMEOUT_S = 3.0
# a scrape serves the requests of the next second too: consoles poll every few seconds, each view
# asks for throughput and sizes, and a broker's page holds a series per partition
SCRAPE_REUSE_S = 1.0
COUNTERS = {"kafka_server_brokertopicmetrics_bytesin_total": "bytes_in_total",
            "kafka_server_brokertopicmetrics_bytesout_total": "bytes_out_total",
            "kafka_server_brokertopicmetrics_messagesin_total": "messages_in_total"}
LOG_SIZE = "kafka_log_log_size"
# per partition, from the leader, with tiered storage (docs/observability.md)
REMOTE = {"odradek_log_remote_size_bytes": "remote_size_bytes", "odradek_log_remote_segments": "remote_segments",
          "odradek_log_local_log_start_offset": "local_log_start_offset"}


@dataclass
class Scrape:
    """One broker's answer: its all-topics counters and log sizes, or why there is none."""
    broker_id: int
    counters: dict[str, int] = field(default_factory=dict)
    log_sizes: dict[tuple[str, int], int] = field(default_factory=dict)
    remote: dict[tuple[str, int], dict[str, int]] = field(default_factory=dict)   # REMOTE's fields
    error: str | None = None
    sampled_at_ms: int = field(default_factory=lambda: int(time.time() * 1000))   # when it was asked for


def parse(broker_id: int, text: str, sampled_at_ms: int) -> Scrape:
    out = Scrape(broker_id, sampled_at_ms=sampled_at_ms)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in COUNTERS and "topic" not in sample.labels:
                out.counters[COUNTERS[sample.name]] = int(sample.value)
            elif sample.name == LOG_SIZE and "partition" in sample.labels:
                out.log_sizes[(sample.labels["topic"], int(sample.labels["partition"]))] = int(sample.value)
            elif sample.name in REMOTE and "partition" in sample.labels:
                key = (sample.labels["topic"], int(sample.labels["partition"]))
                out.remote.setdefault(key, {})[REMOTE[sample.name]] = int(sample.value)
    return out


class BrokerMetrics:
    def __init__(self, spec: str):
        self.spec = spec.strip()
        self.fixed: dict[int, str] = {}
        self._last: tuple[float, dict[int, str], list[Scrape]] | None = None
        self._scraping = asyncio.Lock()   # concurrent requests share one scrape
        if self.spec and "{" not in self.spec:
            for entry in filter(None, (e.strip() for e in self.spec.split(","))):
                broker, sep, url = entry.partition("=")
                if not sep or not broker.strip().isdigit():
                    raise ValueError(f"--broker-metrics-urls: {entry!r} is not BROKER_ID=URL")
                self.fixed[int(broker)] = url.strip()

    @property
    def configured(self) -> bool:
        return bool(self.spec)

    def urls(self, brokers: dict) -> dict[int, str]:
        """Each live broker's endpoint (``brokers``: Metadata's id to BrokerMetadata)."""
        if self.fixed:
            return {b: url for b, url in self.fixed.items() if b in brokers}
        if not self.spec:
            return {}
        return {b: self.spec.format(host=m.host, id=b) for b, m in brokers.items()}

    async def scrape(self, brokers: dict) -> list[Scrape]:
        """Every live broker's metrics, at once (or those of a scrape less than SCRAPE_REUSE_S
        old); one that does not answer carries its error."""
        urls = self.urls(brokers)
        async with self._scraping:
            last = self._last
            if last is not None and last[1] == urls and time.monotonic() - last[0] < SCRAPE_REUSE_S:
                return last[2]
            async with httpx.AsyncClient(timeout=SCRAPE_TIMEOUT_S) as client:
                scrapes = list(await asyncio.gather(*(self._one(client, b, url) for b, url in sorted(urls.items()))))
            self._last = (time.monotonic(), urls, scrapes)
            return scrapes

    @staticmethod
    async def _one(client: httpx.AsyncClient, broker_id: int, url: str) -> Scrape:
        sampled_at_ms = int(time.time() * 1000)
        try:
            response = await client.get(url)
            response.raise_for_status()
        except httpx.HTTPError as e:
            return Scrape(broker_id, error=f"{url}: {type(e).__name__}: {e}")
        # parsing a broker with many partitions takes a while: off the event loop
        return await asyncio.to_thread(parse, broker_id, response.text, sampled_at_ms)
