"""The "odradek" Python data source: batch and streaming reads as Arrow from the gateway's
range endpoint, batch and streaming writes through its NDJSON produce endpoint; keys and values
in a schema registry's wire format as typed columns (``formats``)."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Iterator

import httpx
import pyarrow as pa
from pyspark.sql.datasource import (DataSource, DataSourceReader, DataSourceStreamReader, DataSourceStreamWriter,
                                    DataSourceWriter, InputPartition, WriterCommitMessage)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from odradek.client import GatewayClient, GatewayError
from odradek.spark import formats as fmt
from odradek.spark import options as opts

BASE_SCHEMA = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
               "timestampType int")
HEADERS = "headers array<struct<key: string, value: binary>>"
DEFAULT_MAX_BYTES = 8 << 20
WRITE_BATCH = 2000
OFFSET_BELOW_LOG_START = 41601  # the gateway's 416 answer
STALL_TIMEOUT_S = 60


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    gateway: str
    token: str | None
    topic: str
    partition: int
    start: int
    end: int
    max_bytes: int
    headers: bool
    fail_on_loss: bool
    client_id: str | None = None
    isolation_level: str = "read_uncommitted"
    ca_file: str | None = None
    formats: fmt.Formats | None = None   # keyFormat/valueFormat: how to decode the framed columns


def _client(options: dict) -> GatewayClient:
    if not options.get("gateway"):
        raise opts.OptionError("the option 'gateway' (the gateway's URL, e.g. http://gw:8080) is required")
    opts.check_kafka_options(options)
    return GatewayClient(options["gateway"], options.get("token"), ca_file=options.get("caFile"),
                         client_id=opts.client_id(options), isolation_level=opts.isolation_level(options))


def _fetching_offsets(options: dict, fetch):
    """Spark's fetchOffset.numRetries (default 3) and fetchOffset.retryIntervalMs (1000): the
    driver's offset look-ups are retried when the gateway is unreachable or answers 5xx (a
    leader election under way); a 4xx (unknown topic, bad option) fails at once."""
    retries = int(options.get("fetchOffset.numRetries", 3))
    interval_s = int(options.get("fetchOffset.retryIntervalMs", 1000)) / 1000
    for attempt in range(retries + 1):
        try:
            return fetch()
        except (GatewayError, httpx.TransportError) as e:
            if attempt == retries or (isinstance(e, GatewayError) and e.status < 500):
                raise
            time.sleep(interval_s)


def _flag(options: dict, key: str, default: bool) -> bool:
    return str(options.get(key, default)).lower() == "true"


class OdradekDataSource(DataSource):
    """Options are Spark's case-insensitive map: pass ``self.options`` itself along (a plain
    dict of it has lower-cased keys)."""

    @classmethod
    def name(cls) -> str:
        return "odradek"

    def schema(self) -> str | StructType:
        headers = _flag(self.options, "includeHeaders", False)
        typed = fmt.read_columns(self.options)   # asks the registry (keyFormat/valueFormat only)
        if typed:
            return fmt.base_schema(headers, typed)
        return BASE_SCHEMA + (", " + HEADERS if headers else "")

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(self.options, fmt.read_formats(self.options, schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(self.options, fmt.read_formats(self.options, schema))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        _check_write(self.options, overwrite)
        return Writer(self.options, fmt.write_formats(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        _check_write(self.options, overwrite)
        return StreamWriter(self.options, fmt.write_formats(self.options, schema))


def _check_write(options, overwrite: bool) -> None:
    """In the driver, before any task runs. A topic is appended to, never replaced: Spark's Kafka
    sink refuses Overwrite too. (Spark itself refuses its default ErrorIfExists for every Python
    data source before we are asked.)"""
    opts.check_kafka_options(options)
    if overwrite:
        raise opts.OptionError('Save mode Overwrite not allowed for odradek topics: records are appended; '
                               'use .mode("append")')


# -- reading ----------------------------------------------------------------------------------------
def _partitions(gw: GatewayClient, options: dict) -> list[tuple[str, int]]:
    chosen = opts.select_topics(options, gw.topics() if options.get("subscribePattern") else [])
    return [(t, p) for t, ps in sorted(chosen.items()) for p in (ps if ps is not None else gw.partitions(t))]


def _plan(gw: GatewayClient, options: dict, partitions: list[tuple[str, int]],
          start_spec, end_spec) -> list[opts.Range]:
    fail_on_loss = _flag(options, "failOnDataLoss", True)
    no_match = options.get("startingOffsetsByTimestampStrategy", "error").lower()
    ranges = []
    for topic, p in partitions:
        low, high = gw.offsets(topic, p)
        start = opts.resolve(start_spec, topic, p, low, high, gw.offset_for_time, no_match)
        end = opts.resolve(end_spec, topic, p, low, high, gw.offset_for_time)
        start = _check_loss(topic, p, start, low, fail_on_loss)
        ranges.append(opts.Range(topic, p, start, min(end, high)))
    return ranges


def _check_loss(topic: str, p: int, start: int, low: int, fail_on_loss: bool) -> int:
    if start >= low:
        return start
    if fail_on_loss:
        raise RuntimeError(f"Offsets of {topic}-{p} from {start} to {low - 1} are gone (retention or deletion "
                           f"removed them). Some data may have been lost; set failOnDataLoss=false to continue "
                           f"from the earliest available offset {low}.")
    return low


def _input_partitions(options: dict, ranges: list[opts.Range], formats: fmt.Formats | None) -> list[OffsetRange]:
    max_bytes = int(options.get("maxBytesPerRequest", DEFAULT_MAX_BYTES))
    headers = _flag(options, "includeHeaders", False)
    fail_on_loss = _flag(options, "failOnDataLoss", True)
    return [OffsetRange(options["gateway"], options.get("token"), r.topic, r.partition, r.start, r.end,
                        max_bytes, headers, fail_on_loss, opts.client_id(options), opts.isolation_level(options),
                        options.get("caFile"), formats)
            for r in ranges]


def read_range(part: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Executors: the range as Arrow record batches, one per gateway request."""
    with GatewayClient(part.gateway, part.token, ca_file=part.ca_file, client_id=part.client_id,
                       isolation_level=part.isolation_level) as gw, _registry(part.formats) as registry:
        offset, stalled_since = part.start, None
        while offset < part.end:
            try:
                body, next_offset = gw.read_arrow(part.topic, part.partition, offset, part.end, part.max_bytes)
            except GatewayError as e:
                if e.error_code != OFFSET_BELOW_LOG_START:
                    raise
                # retention removed the range after the driver planned it
                offset = _check_loss(part.topic, part.partition, offset, gw.offsets(part.topic, part.partition)[0],
                                     part.fail_on_loss)
                continue
            if next_offset <= offset:
                # the range was below the high watermark when planned: an empty answer is a
                # leader change or a slow fetch, so ask again for a while before failing the task
                stalled_since = stalled_since or time.monotonic()
                if time.monotonic() - stalled_since > STALL_TIMEOUT_S:
                    raise RuntimeError(f"{part.topic}-{part.partition}: no progress at offset {offset} for "
                                       f"{STALL_TIMEOUT_S} s (is the partition's leader available?)")
                time.sleep(0.2)
                continue
            stalled_since = None
            for batch in pa.ipc.open_stream(body):
                if batch.num_rows:
                    columns = _spark_columns(batch, part.headers)
                    yield fmt.decode_batch(columns, part.formats, registry) if registry else columns
            offset = next_offset


def _spark_columns(batch: pa.RecordBatch, headers: bool) -> pa.RecordBatch:
    names = batch.schema.names if headers else [n for n in batch.schema.names if n != "headers"]
    columns = [batch.column(n) if n != "timestamp" else batch.column(n).cast(pa.timestamp("us", tz="UTC"))
               for n in names]
    return pa.RecordBatch.from_arrays(columns, names=names)


class BatchReader(DataSourceReader):
    def __init__(self, options: dict, formats: fmt.Formats | None = None):
        self.options = options
        self.formats = formats

    def partitions(self) -> list[OffsetRange]:
        start_spec = opts.offset_spec(self.options, "starting", "earliest")
        end_spec = opts.offset_spec(self.options, "ending", "latest")
        opts.check_batch_ends(start_spec, end_spec)
        def plan():
            with _client(self.options) as gw:
                return _plan(gw, self.options, _partitions(gw, self.options), start_spec, end_spec)
        ranges = _fetching_offsets(self.options, plan)
        min_parts = self.options.get("minPartitions")
        return _input_partitions(self.options, opts.split(ranges, int(min_parts) if min_parts else None),
                                 self.formats)

    def read(self, partition: OffsetRange) -> Iterator[pa.RecordBatch]:
        yield from read_range(partition)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are {"topic/partition": next offset}; new partitions start at their earliest.
    ``maxOffsetsPerTrigger`` is Spark's ReadMaxRows limit, spread over partitions by backlog."""

    def __init__(self, options, formats: fmt.Formats | None = None):
        self.options = options
        self.formats = formats
        self.target: dict | None = None   # Trigger.AvailableNow: never read past this
        self.delay = opts.trigger_delay(options)
        self.latest: dict | None = None   # what the last latestOffset call saw, for the query's progress

    def _positions(self, spec) -> dict[str, int]:
        def fetch():
            with _client(self.options) as gw:
                out = {}
                for topic, p in _partitions(gw, self.options):
                    low, high = gw.offsets(topic, p)
                    out[f"{topic}/{p}"] = opts.resolve(spec, topic, p, low, high, gw.offset_for_time)
                return out
        return _fetching_offsets(self.options, fetch)

    def initialOffset(self) -> dict:
        return self._positions(opts.offset_spec(self.options, "starting", "latest"))

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.get("maxOffsetsPerTrigger")
        return ReadMaxRows(int(limit)) if limit else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._positions(("offsets", "latest"))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        latest = self.target if self.target is not None else self._positions(("offsets", "latest"))
        latest = {**{k: v for k, v in start.items() if k not in latest}, **latest}
        self.latest = latest
        # minOffsetsPerTrigger holds a batch back, except under AvailableNow (as Spark's Kafka source)
        new = sum(max(0, v - start.get(k, v)) for k, v in latest.items())
        if self.delay is not None and self.target is None and self.delay.delays(new, time.time() * 1000):
            return start
        if isinstance(limit, ReadMaxRows):
            return _admit(start, latest, limit.max_rows)
        return latest

    def reportLatestOffset(self) -> dict | None:
        """The query's progress shows it as the source's ``latestOffset`` beside ``endOffset``:
        their difference per partition is how far the query is behind."""
        return self.latest

    def partitions(self, start: dict, end: dict) -> list[OffsetRange]:
        fail_on_loss = _flag(self.options, "failOnDataLoss", True)

        def plan():
            ranges = []
            with _client(self.options) as gw:
                for key, stop in sorted(end.items()):
                    topic, p = key.rsplit("/", 1)
                    low, _ = gw.offsets(topic, int(p))
                    begin = _check_loss(topic, int(p), start.get(key, low), low, fail_on_loss)
                    ranges.append(opts.Range(topic, int(p), begin, max(begin, stop)))
            return ranges
        return _input_partitions(self.options, [r for r in _fetching_offsets(self.options, plan) if r.size > 0],
                                 self.formats)

    def read(self, partition: OffsetRange) -> Iterator[pa.RecordBatch]:
        yield from read_range(partition)

    def commit(self, end: dict) -> None:
        pass  # offsets live in Spark's checkpoint; nothing to tell the cluster


def _admit(start: dict, latest: dict, budget: int) -> dict:
    """Spread the budget over partitions in proportion to their backlog (as Kafka's source)."""
    backlog = {k: max(0, v - start.get(k, v)) for k, v in latest.items()}
    total = sum(backlog.values())
    if total <= budget:
        return latest
    admitted = {k: start.get(k, latest[k]) + (backlog[k] * budget) // total for k in latest}
    if admitted == {k: start.get(k, latest[k]) for k in latest}:  # budget smaller than the partitions
        first = next(k for k, b in backlog.items() if b)
        admitted[first] += 1
    return admitted


# -- writing ----------------------------------------------------------------------------------------
@dataclass
class Written(WriterCommitMessage):
    records: int


def _as_bytes(v) -> bytes | None:
    if v is None:
        return None
    return v.encode() if isinstance(v, str) else bytes(v)


def write_rows(options: dict, rows, formats: fmt.Formats | None = None) -> Written:
    """At least once: every row is acknowledged by the cluster or the task fails."""
    topic_option = options.get("topic")
    written = 0
    with _client(options) as gw, _registry(formats) as registry:
        encode = _encoder(formats, registry)
        pending: dict[str, list[dict]] = {}
        for row in rows:
            d = row.asDict()
            topic = topic_option or d.get("topic")
            if not topic:
                raise ValueError("no topic: set the option 'topic' or give a 'topic' column")
            if "value" not in d:
                raise ValueError("the 'value' column is required")
            pending.setdefault(topic, []).append({
                "value": encode("value", d["value"]), "key": encode("key", d.get("key")), "partition": d.get("partition"),
                "headers": [(h["key"], _as_bytes(h["value"])) for h in d.get("headers") or []]})
            if len(pending[topic]) >= WRITE_BATCH:
                written += _flush(gw, topic, pending.pop(topic))
        for topic, batch in pending.items():
            written += _flush(gw, topic, batch)
    return Written(written)


def _registry(formats: fmt.Formats | None):
    return formats.client() if formats else contextlib.nullcontext()


def _encoder(formats: fmt.Formats | None, registry):
    """column, value -> bytes: a framed column's value encoded with its schema, the others as bytes."""
    sides = {s.column: s for s in formats.sides} if formats else {}

    def encode(column: str, value) -> bytes | None:
        side = sides.get(column)
        return _as_bytes(value) if side is None else fmt.encode(value, side, registry)
    return encode


def _flush(gw: GatewayClient, topic: str, batch: list[dict]) -> int:
    results = gw.produce(topic, batch)
    failed = [r for r in results if r.error_code is not None]
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(batch)} records to {topic} were not written: {failed[0].message}")
    return len(batch)


class Writer(DataSourceWriter):
    def __init__(self, options: dict, formats: fmt.Formats | None = None):
        self.options = options
        self.formats = formats

    def write(self, iterator) -> Written:
        return write_rows(self.options, iterator, self.formats)


class StreamWriter(DataSourceStreamWriter):
    def __init__(self, options: dict, formats: fmt.Formats | None = None):
        self.options = options
        self.formats = formats

    def write(self, iterator) -> Written:
        return write_rows(self.options, iterator, self.formats)

    def commit(self, messages, batchId: int) -> None:
        pass

    def abort(self, messages, batchId: int) -> None:
        pass
