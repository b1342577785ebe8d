"""The broker's own ceiling, apart from the client: pre-built Produce requests and a light
Fetch client against one broker of each system (issue 33).

    .venv/bin/python -m bench.ceiling [--seconds 10] [--warm 5] [--rounds 2] [--cases produce-100,produce-1024,consume]

The side-by-side benchmark's clients are Kafka's Java producer and consumer, which take about a
core of the machine's two at full speed: its MB/s say as much about the client as about the
broker. Here the client is built to cost as little CPU as it can, so that the broker is what is
measured:

- **produce**: one Produce v9 request per partition, built once (kio's encoders, one record batch
  of ``--batch-bytes`` of ``--size``-byte values, acks=1, no compression), sent as they are
  (the broker stamps the offsets) over ``--connections`` connections with ``--window`` requests in
  flight on each, from one thread with non-blocking sockets; each response is framed and its
  error code checked at its fixed place, nothing else parsed. After each run the partitions' end
  offsets (ListOffsets) must equal the records acknowledged.
- **consume**: Fetch v11 requests (one partition, sessionless, ``fetch.max.bytes`` 64 MiB,
  8 MiB per partition: scenario 3's settings), built once with only the fetch offset patched;
  each response is read into one reused buffer and only its batch headers are walked to find the
  next offset (no record is parsed); at the end of the log it starts again at offset 0. It reads
  the topic the 1 KiB produce case filled.

Both systems (Kafka 3.9 KRaft through ``bench.apache_kafka``, Odradek through ``odradek dev up``
as ``bench.side_by_side`` starts them) run at once; a first pass of every case on both is not
recorded (Kafka's JIT: its first produce-100 ran at a fifth of its later rate), then each round
runs every case on both, in alternating order. Each run warms for ``--warm`` s (not counted),
then counts ``--seconds``. The client process (``python -m bench.ceiling client ...``) reads, at
the window's edges, the CPU of every thread of the broker's process (``/proc/<pid>/task/*/schedstat``,
to the nanosecond) and its own. Figures: MB/s of record values (10^6 bytes), broker CPU s per GB of
values and cores used, MB/s per broker core, client CPU s per GB; the ratio is Odradek / Kafka.
Results: ``bench/results/ceiling-<date>-<time>.json`` (or ``--json PATH``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import selectors
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
CASES = ("produce-100", "produce-1024", "consume")
PRODUCE_VERSION, FETCH_VERSION = 9, 11
FETCH_MAX_BYTES, PARTITION_MAX_BYTES = 64 << 20, 8 << 20
OFFSET_MARK = 0x0F1E2D3C4B5A6978   # a fetch offset no request holds: where to patch the real one
_SIZE, _I16, _I32, _I64 = struct.Struct(">i"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_BATCH = struct.Struct(">qi")       # a batch's baseOffset and batchLength
_LAST_DELTA = struct.Struct(">i")   # lastOffsetDelta, at 23
HEADER_SIZE, LOG_OVERHEAD = 61, 12


# -- requests, built once -----------------------------------------------------------------------

def produce_request(topic: str, partition: int, size: int, batch_bytes: int) -> tuple[bytes, int]:
    """(a Produce v9 request frame, records in it): one batch of ``size``-byte values, acks=1."""
    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
    from odradek.broker.replication.wire import encode_request
    from odradek.records import Record, build_batch
    value = (bytes(range(256)) * (size // 256 + 1))[:size]
    count = max(1, batch_bytes // (size + 10))   # a record's framing is 7-10 bytes for these sizes
    batch = build_batch([Record(value)] * count)
    body = ProduceRequest(transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=30), topic_data=(
        TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=partition, records=bytes(batch)),)),))
    return encode_request(0, PRODUCE_VERSION, 1, "ceiling", body), count


def produce_error_at(topic: str) -> int:
    """Where a one-partition Produce v9 response frame (size prefix included) holds its error code:
    size, correlation id, tagged fields, topics (compact: 1 byte), name (1 byte + name), partitions
    (1 byte), index."""
    return 4 + 4 + 1 + 1 + 1 + len(topic.encode()) + 1 + 4


def fetch_request(topic: str, partition: int) -> tuple[bytearray, int]:
    """(a Fetch v11 request frame, where its fetch offset is): sessionless, read_uncommitted."""
    from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
    from odradek.broker.replication.wire import encode_request
    body = FetchRequest(replica_id=-1, max_wait=datetime.timedelta(milliseconds=500), min_bytes=1,
                        max_bytes=FETCH_MAX_BYTES, isolation_level=0, session_id=0, session_epoch=-1, topics=(
                            FetchTopic(topic=topic, partitions=(FetchPartition(
                                partition=partition, current_leader_epoch=-1, fetch_offset=OFFSET_MARK,
                                log_start_offset=-1, partition_max_bytes=PARTITION_MAX_BYTES),)),),
                        forgotten_topics_data=(), rack_id="")
    frame = bytearray(encode_request(1, FETCH_VERSION, 1, "ceiling", body))
    return frame, bytes(frame).index(_I64.pack(OFFSET_MARK))


# -- the client (a process of its own: its CPU is its own) ---------------------------------------

def thread_cpu_s(pids: list[int]) -> float:
    from bench.profile_broker import run_time_s
    return run_time_s(pids)


def user_system_faults(pids: list[int]) -> tuple[float, float, int]:
    """User and system CPU seconds (10 ms ticks) and minor page faults of the processes (/proc/<pid>/stat)."""
    user = system = faults = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        faults, user, system = faults + int(fields[7]), user + int(fields[11]), system + int(fields[12])
    ticks = os.sysconf("SC_CLK_TCK")
    return user / ticks, system / ticks, faults


class Window:
    """The measured window: the broker's and this process's CPU at its edges."""

    def __init__(self, broker_pids: list[int]) -> None:
        self.pids = broker_pids
        self.start = self.end = 0.0
        self.broker = self.client = 0.0
        self.split = (0.0, 0.0, 0)

    def open(self) -> None:
        self.start = time.monotonic()
        self.broker, self.client = thread_cpu_s(self.pids), thread_cpu_s([os.getpid()])
        self.split = user_system_faults(self.pids)

    def close(self) -> None:
        self.end = time.monotonic()
        self.broker = thread_cpu_s(self.pids) - self.broker
        self.client = thread_cpu_s([os.getpid()]) - self.client
        self.split = tuple(b - a for a, b in zip(self.split, user_system_faults(self.pids)))

    def figures(self, value_bytes: int, wire_bytes: int) -> dict:
        seconds, gb = self.end - self.start, value_bytes / 1e9
        return {"seconds": round(seconds, 2), "mb_s": round(value_bytes / 1e6 / seconds, 1),
                "wire_mb_s": round(wire_bytes / 1e6 / seconds, 1),
                "broker_cpu_s": round(self.broker, 3), "broker_cores": round(self.broker / seconds, 2),
                "broker_cpu_s_per_gb": round(self.broker / gb, 3) if gb else None,
                "broker_user_s": round(self.split[0], 2), "broker_system_s": round(self.split[1], 2),
                "broker_page_faults_per_gb": round(self.split[2] / gb) if gb else None,
                "mb_s_per_broker_core": round(value_bytes / 1e6 / self.broker, 1) if self.broker else None,
                "client_cpu_s": round(self.client, 3), "client_cores": round(self.client / seconds, 2),
                "client_cpu_s_per_gb": round(self.client / gb, 3) if gb else None}


class ProduceConnection:
    """One connection's pipeline: ``window`` copies of its request in flight, refilled per answer."""

    def __init__(self, address: tuple[str, int], request: bytes, window: int, error_at: int) -> None:
        self.sock = socket.create_connection(address)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.request, self.window, self.error_at = memoryview(request), window, error_at
        self.queued = 0          # whole requests still to write
        self.sent = 0            # bytes of the current request written
        self.in_flight = 0
        self.writing = True       # registered for EVENT_WRITE
        self.buf, self.filled = bytearray(1 << 16), 0

    def send(self) -> None:
        while self.queued:
            self.sent += self.sock.send(self.request[self.sent:])
            if self.sent < len(self.request):
                return
            self.queued, self.sent = self.queued - 1, 0

    def receive(self) -> int:
        """Read what is there; return how many answers it completed (each checked for error 0)."""
        n = self.sock.recv_into(memoryview(self.buf)[self.filled:])
        if n == 0:
            raise ConnectionError("the broker closed the connection")
        self.filled += n
        done, at = 0, 0
        while self.filled - at >= 4:
            end = at + 4 + _SIZE.unpack_from(self.buf, at)[0]
            if end > self.filled:
                break
            code = _I16.unpack_from(self.buf, at + self.error_at)[0]
            if code != 0:
                raise RuntimeError(f"Produce answered error code {code}")
            done, at = done + 1, end
        if at:
            self.buf[:self.filled - at] = self.buf[at:self.filled]
            self.filled -= at
        self.in_flight -= done
        return done


def run_produce(args: argparse.Namespace) -> dict:
    host, port = args.bootstrap.rsplit(":", 1)
    requests = [produce_request(args.topic, p, args.size, args.batch_bytes) for p in range(args.partitions)]
    records_per_request = requests[0][1]
    conns = [ProduceConnection((host, int(port)), requests[i % args.partitions][0], args.window,
                               produce_error_at(args.topic)) for i in range(args.connections)]
    sel = selectors.DefaultSelector()
    for c in conns:
        sel.register(c.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, c)
    window = Window(args.broker_pid)
    opens, closes = time.monotonic() + args.warm, time.monotonic() + args.warm + args.seconds
    acked = counted = 0          # answers in all; answers inside the window
    stopping = False
    for c in conns:
        c.queued = c.in_flight = c.window
    while True:
        now = time.monotonic()
        if not window.start and now >= opens:
            window.open()
        if not stopping and now >= closes:
            window.close()
            stopping = True   # what is in flight is drained (and checked), not counted
        if stopping and not any(c.in_flight for c in conns):
            break
        for key, events in sel.select(0.5):
            c = key.data
            if events & selectors.EVENT_READ:
                done = c.receive()
                acked += done
                if window.start and not stopping:
                    counted += done
                if not stopping:
                    c.queued, c.in_flight = c.queued + done, c.in_flight + done
            if c.queued:
                c.send()
            if c.writing != bool(c.queued):   # epoll_ctl only when the interest changes
                c.writing = bool(c.queued)
                sel.modify(c.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if c.writing else 0), c)
    for c in conns:
        c.sock.close()
    result = window.figures(counted * records_per_request * args.size, counted * len(requests[0][0]))
    result.update({"records_acked": acked * records_per_request, "records_per_request": records_per_request,
                   "request_bytes": len(requests[0][0])})
    return result


class FetchConnection:
    """One connection reading one partition with sequential fetches into one reused buffer."""

    def __init__(self, address: tuple[str, int], topic: str, partition: int) -> None:
        self.sock = socket.create_connection(address)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.request, self.offset_at = fetch_request(topic, partition)
        self.records_at = 4 + 4 + 4 + 2 + 4 + 4 + 2 + len(topic.encode()) + 4 + 4 + 2   # to high watermark
        self.buf = bytearray(FETCH_MAX_BYTES + (1 << 20))
        self.view = memoryview(self.buf)

    def fetch(self, offset: int) -> tuple[int, int, int, int]:
        """(next offset, records, bytes of whole batches, bytes on the wire) of one fetch at ``offset``."""
        _I64.pack_into(self.request, self.offset_at, offset)
        self.sock.sendall(self.request)
        got = self._read_at_least(4, 0)
        size = 4 + _SIZE.unpack_from(self.buf, 0)[0]
        self._read_at_least(size, got)
        at = self.records_at
        code = _I16.unpack_from(self.buf, at - 2)[0]
        if code != 0:
            raise RuntimeError(f"Fetch answered error code {code} at offset {offset}")
        high_watermark = _I64.unpack_from(self.buf, at)[0]
        at += 8 + 8 + 8
        aborted = _I32.unpack_from(self.buf, at)[0]
        at += 4 + 16 * max(aborted, 0) + 4   # the aborted transactions, the preferred read replica
        length = _I32.unpack_from(self.buf, at)[0]
        next_offset, records, whole = self._walk(at + 4, at + 4 + max(length, 0), offset)
        if next_offset >= high_watermark:
            next_offset = 0   # the end of the log: from the start again (a fetch there waits max_wait)
        return next_offset, records, whole, size

    def _walk(self, start: int, end: int, offset: int) -> tuple[int, int, int]:
        """Walk the batch headers of ``buf[start:end]`` (a partial last batch is left out)."""
        position, records, buf = start, 0, self.buf
        while end - position >= HEADER_SIZE:
            base, length = _BATCH.unpack_from(buf, position)
            if position + LOG_OVERHEAD + length > end:
                break
            delta = _LAST_DELTA.unpack_from(buf, position + 23)[0]
            if base + delta >= offset:
                records += base + delta + 1 - max(base, offset)
            offset = max(offset, base + delta + 1)
            position += LOG_OVERHEAD + length
        return offset, records, position - start

    def _read_at_least(self, want: int, got: int) -> int:
        while got < want:
            n = self.sock.recv_into(self.view[got:])
            if n == 0:
                raise ConnectionError("the broker closed the connection")
            got += n
        return got


def run_consume(args: argparse.Namespace) -> dict:
    host, port = args.bootstrap.rsplit(":", 1)
    conn = FetchConnection((host, int(port)), args.topic, 0)
    window = Window(args.broker_pid)
    opens, closes = time.monotonic() + args.warm, time.monotonic() + args.warm + args.seconds
    offset, records, wire, fetches = 0, 0, 0, 0
    while True:
        now = time.monotonic()
        if not window.start and now >= opens:
            window.open()
            records = wire = fetches = 0
        if now >= closes:
            window.close()
            break
        offset, got, _, size = conn.fetch(offset)
        records, wire, fetches = records + got, wire + size, fetches + 1
    conn.sock.close()
    result = window.figures(records * args.size, wire)
    result.update({"records": records, "fetches": fetches})
    return result


def client_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ceiling client")
    ap.add_argument("mode", choices=["produce", "consume"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--broker-pid", type=int, action="append", required=True)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--window", type=int, default=2)
    ap.add_argument("--batch-bytes", type=int, default=262144)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--warm", type=float, default=5)
    args = ap.parse_args(argv)
    result = run_produce(args) if args.mode == "produce" else run_consume(args)
    print(json.dumps(result), flush=True)
    return 0


# -- the harness ---------------------------------------------------------------------------------

def client(system, mode: str, topic: str, args: argparse.Namespace, size: int) -> dict:
    argv = [sys.executable, "-m", "bench.ceiling", "client", mode, "--bootstrap", system.bootstrap.split(",")[0],
            "--topic", topic, "--size", str(size), "--partitions", str(args.partitions),
            "--connections", str(args.connections), "--window", str(args.window),
            "--batch-bytes", str(args.batch_bytes), "--seconds", str(args.seconds), "--warm", str(args.warm),
            *(a for pid in system.broker_pids() for a in ("--broker-pid", str(pid)))]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=args.warm + args.seconds + 120)
    line = next((l for l in reversed(proc.stdout.splitlines()) if l.startswith("{")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"ceiling client {mode} exited {proc.returncode}: {proc.stderr[-1500:]}")
    return json.loads(line)


def end_offsets(system, topic: str, partitions: int) -> int:
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": system.bootstrap, "group.id": "ceiling-check"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions))
    finally:
        consumer.close()


def run_case(system, case: str, args: argparse.Namespace, state: dict) -> dict:
    """One case on one system; the 1 KiB produce keeps its topic for ``consume`` (in ``state``)."""
    if case == "consume":
        topic = state.pop(system.name, None)
        if topic is None:
            raise RuntimeError("consume reads the topic produce-1024 filled: run that case first")
        try:
            return client(system, "consume", topic, args, 1024)
        finally:
            system.delete_topic(topic)
    size = int(case.split("-")[1])
    topic = f"ceiling-{case}-{time.time_ns() % 10**9}"
    system.create_topic(topic, args.partitions, 1)
    keep = False
    try:
        result = client(system, "produce", topic, args, size)
        stored = end_offsets(system, topic, args.partitions)
        if stored != result["records_acked"]:
            raise RuntimeError(f"{result['records_acked']} records acknowledged, the log holds {stored}")
        keep = size == 1024 and "consume" in args.cases
        if keep:
            state[system.name] = topic
        return result
    finally:
        if not keep:
            system.delete_topic(topic)


def summarize(runs: list[dict]) -> list[dict]:
    figures = ("mb_s", "broker_cpu_s_per_gb", "broker_cores", "mb_s_per_broker_core", "client_cpu_s_per_gb",
               "client_cores", "broker_page_faults_per_gb")
    rows = []
    for case in dict.fromkeys(r["case"] for r in runs):
        row = {"case": case}
        for system in ("kafka", "odradek"):
            ok = [r for r in runs if r["case"] == case and r["system"] == system and "error" not in r]
            row[system] = {f: round(statistics.median(r[f] for r in ok), 3)
                           if ok and all(r.get(f) is not None for r in ok) else None for f in figures}
        row["ratio"] = {f: round(row["odradek"][f] / row["kafka"][f], 2)
                        if row["kafka"][f] and row["odradek"][f] is not None else None for f in figures}
        rows.append(row)
    return rows


def markdown(summary: list[dict]) -> str:
    lines = ["| case | figure | Kafka | Odradek | Odradek/Kafka |", "| --- | --- | ---: | ---: | ---: |"]
    names = {"mb_s": "MB/s", "broker_cpu_s_per_gb": "broker CPU s/GB", "mb_s_per_broker_core": "MB/s per broker core",
             "client_cpu_s_per_gb": "client CPU s/GB"}
    for row in summary:
        for f, name in names.items():
            k, o, r = row["kafka"][f], row["odradek"][f], row["ratio"][f]
            lines.append(f"| {row['case']} | {name} | {k if k is not None else '—'} | "
                         f"{o if o is not None else '—'} | {r if r is not None else '—'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["client"]:
        return client_main(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m bench.ceiling", description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=10, help="measured seconds per case")
    ap.add_argument("--warm", type=float, default=5, help="unmeasured seconds of the same load first")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cases", default=",".join(CASES), type=lambda s: s.split(","))
    ap.add_argument("--systems", default="kafka,odradek", type=lambda s: s.split(","))
    ap.add_argument("--partitions", type=int, default=1, help="produce: partitions of the topic")
    ap.add_argument("--connections", type=int, default=4, help="produce: connections")
    ap.add_argument("--window", type=int, default=2, help="produce: requests in flight per connection")
    ap.add_argument("--batch-bytes", type=int, default=262144, help="produce: bytes of the one batch per request")
    ap.add_argument("--no-warm-pass", dest="warm_pass", action="store_false",
                    help="skip the unrecorded first pass of every case on every system (a fresh JVM ran Kafka's "
                         "produce at a fifth of its later rate after 5 s of warm-up alone)")
    ap.add_argument("--json", type=Path, help="default bench/results/ceiling-<date>-<time>.json")
    args = ap.parse_args(argv)
    from bench import apache_kafka
    from bench.side_by_side import KafkaSystem, OdradekSystem, environment
    apache_kafka.resolve()
    root = Path(tempfile.mkdtemp(prefix="ceiling-"))
    systems, runs, leftovers, state = [], [], [], {}
    try:
        if "kafka" in args.systems:
            systems.append(KafkaSystem(root, 1))
        if "odradek" in args.systems:
            systems.append(OdradekSystem(root, 1))
        for rnd in range(-1 if args.warm_pass else 0, args.rounds):   # round -1: the warm-up pass
            order = systems if rnd % 2 == 0 else systems[::-1]
            for s in order:
                for case in args.cases:
                    entry = {"case": case, "system": s.name, "round": rnd, "load": round(os.getloadavg()[0], 1)}
                    try:
                        entry.update(run_case(s, case, args, state))
                    except Exception as e:  # noqa: BLE001 - reported, the other runs go on
                        entry["error"] = str(e)[-1500:]
                    print(json.dumps(entry), flush=True)
                    if rnd >= 0:
                        runs.append(entry)
    finally:
        for s in systems:
            leftovers += s.stop()
        shutil.rmtree(root, ignore_errors=True)
    summary = summarize(runs)
    report = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
              "command": "python -m bench.ceiling " + " ".join(argv), "settings": vars(args) | {"json": None},
              "kafka_version": apache_kafka.KAFKA_VERSION,
              "environment": environment() | {"pythonpath": os.environ.get("PYTHONPATH")},   # a tree put first
              "summary": summary, "runs": runs, "leftover_processes_killed": leftovers}
    out = args.json or RESULTS / f"ceiling-{datetime.datetime.now():%Y-%m-%d-%H%M}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print("\n" + markdown(summary) + f"\n\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
