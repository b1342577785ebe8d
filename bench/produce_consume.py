"""Produce and consume throughput of one broker, one partition, 1 KiB records, acks=1.

    .venv/bin/python -m bench.produce_consume [--records 1000000] [--raw-mb 1024] [--data-dir DIR]

Starts its own cluster (``odradek dev up --brokers 1 --kafka-port 0``), creates a 1-partition
topic and measures, in order:

1. ``produce/confluent``: librdkafka via confluent-kafka, ``produce()`` of one pre-built 1 KiB
   value in a tight loop, ~1 MB batches, acks=1; timed from the first produce() to the end
   of flush() (every record acknowledged).
2. ``produce/raw``: pre-built Produce v7 requests (one ~1 MB record batch v2 each, CRC-32C
   computed once) written back to back on one connection with up to 8 in flight; the client
   does no per-record work, so this is the broker's rate.
3. ``consume/confluent``: a confluent-kafka consumer reads everything from offset 0 with large
   fetches; per message only ``len(value)``.
4. ``consume/raw``: Fetch v10 requests (16 MiB per response) reading everything from offset 0;
   only batch headers are looked at, to find the next offset.

For each phase: MB/s (10^6 bytes of record *values*), records/s, the broker's CPU seconds
(/proc/<pid>/stat utime+stime) and the client's main-thread busy share (``time.thread_time``
over wall time: near 100% means the Python loop, not the broker, is the limit). At the end the
broker's peak RSS (VmHWM). Prints a table and writes ``bench/results/<date>.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import crc32c

from odradek.dev import processes
from odradek.dev.processes import ProcessRecord

TOPIC = "bench"
RECORD_SIZE = 1024
RESULTS = Path(__file__).resolve().parent / "results"
CLK_TCK = os.sysconf("SC_CLK_TCK")
TARGETS = {"produce_mb_s": 100, "consume_mb_s": 200, "broker_rss_mb": 300, "broker_anon_rss_mb": 300}


# -- the cluster --------------------------------------------------------------------------------

def odradek(data_dir: Path, *args: str, timeout: float = 180) -> str:
    argv = [sys.executable, "-m", "odradek.cli", "dev", *args, "--data-dir", str(data_dir)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stdout}{proc.stderr}")
    return proc.stdout


def recorded_processes(data_dir: Path) -> list[dict]:
    try:
        return list(json.loads((data_dir / "cluster.json").read_text())["processes"].values())
    except (OSError, ValueError, KeyError):
        return []


def stop_cluster(data_dir: Path, recorded: list[dict]) -> list[str]:
    """``dev down``, then SIGKILL by PID (start time checked) anything it left running."""
    try:
        odradek(data_dir, "down")
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"warning: {e}", file=sys.stderr)
    left = []
    unique = {(r["pid"], r["start_time"]): ProcessRecord.from_json(r) for r in recorded + recorded_processes(data_dir)}
    for rec in unique.values():
        if processes.alive(rec):  # same PID *and* start time, not a zombie
            try:
                os.kill(rec.pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            left.append(f"{rec.name} pid {rec.pid}")
    return left


def broker_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15)


def broker_memory_mb(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
            out[key] = int(value.split()[0]) / 1024
    return out


class MemorySampler(threading.Thread):
    """Peak anonymous RSS and peak RSS of the broker, sampled every 20 ms (VmHWM also counts
    file-backed pages: the broker mmaps segment files, so page cache it reads through the map
    shows up in RSS although the kernel can drop it at any time)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak_anon, self.peak_rss = pid, 0.0, 0.0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.02):
            try:
                m = broker_memory_mb(self.pid)
            except OSError:
                return
            self.peak_anon = max(self.peak_anon, m.get("RssAnon", 0))
            self.peak_rss = max(self.peak_rss, m.get("VmRSS", 0))


def create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1)])[TOPIC].result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        t = admin.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
        if t is not None and t.error is None and 0 in t.partitions and t.partitions[0].leader >= 0:
            return
        time.sleep(0.2)
    raise TimeoutError(f"no leader for {TOPIC}-0 after 60 s")


# -- measuring a phase --------------------------------------------------------------------------

class Phase:
    def __init__(self, name: str, broker_pid: int) -> None:
        self.name, self.pid = name, broker_pid

    def __enter__(self) -> "Phase":
        self.cpu0 = broker_cpu_s(self.pid)
        self.usage0 = resource.getrusage(resource.RUSAGE_SELF)
        self.thread0 = time.thread_time()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.elapsed = time.perf_counter() - self.t0
        self.thread = time.thread_time() - self.thread0
        usage = resource.getrusage(resource.RUSAGE_SELF)
        self.client_cpu = (usage.ru_utime - self.usage0.ru_utime) + (usage.ru_stime - self.usage0.ru_stime)
        self.broker_cpu = broker_cpu_s(self.pid) - self.cpu0

    def result(self, records: int, value_bytes: int, **extra) -> dict:
        return {"phase": self.name, "records": records, "value_bytes": value_bytes,
                "seconds": round(self.elapsed, 3), "mb_s": round(value_bytes / self.elapsed / 1e6, 1),
                "records_s": round(records / self.elapsed), "broker_cpu_s": round(self.broker_cpu, 2),
                "broker_cpu_share": round(self.broker_cpu / self.elapsed, 2),
                "client_cpu_s": round(self.client_cpu, 2),
                "client_main_thread_busy": round(self.thread / self.elapsed, 2), **extra}


# -- 1. confluent-kafka producer ----------------------------------------------------------------

def produce_confluent(bootstrap: str, records: int, pid: int, batch_bytes: int) -> dict:
    from confluent_kafka import Producer
    errors = []
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": 1, "enable.idempotence": False,
        "linger.ms": 20, "batch.size": batch_bytes, "batch.num.messages": 100_000,
        "queue.buffering.max.kbytes": 1024 * 1024, "queue.buffering.max.messages": 2_000_000,
        "message.max.bytes": 1_000_000, "delivery.report.only.error": True, "message.timeout.ms": 60_000,
        "on_delivery": lambda err, msg: errors.append(err)})
    value = os.urandom(RECORD_SIZE)
    produce, poll = producer.produce, producer.poll
    full = 0
    with Phase("produce/confluent", pid) as ph:
        for _ in range(records):
            try:
                produce(TOPIC, value)
            except BufferError:
                full += 1
                poll(0.001)
                produce(TOPIC, value)
        left = producer.flush(300)
    if left or errors:
        raise RuntimeError(f"confluent produce: {left} undelivered, {len(errors)} errors: {errors[:3]}")
    return ph.result(records, records * RECORD_SIZE, queue_full_waits=full, batch_bytes=batch_bytes)


# -- 2. raw pre-built Produce v7 requests -------------------------------------------------------

def _varint(n: int) -> bytes:
    """Kafka's zig-zag varint."""
    z = (n << 1) ^ (n >> 63)
    groups = max(1, (z.bit_length() + 6) // 7)
    return bytes(((z >> 7 * i) & 0x7F) | (0x80 if i < groups - 1 else 0) for i in range(groups))


def record_batch(count: int, value: bytes, timestamp_ms: int) -> bytes:
    """A record batch v2 (no compression, no key, no headers, producer id -1)."""
    body = bytearray()
    for i in range(count):
        rec = b"\x00" + _varint(0) + _varint(i) + _varint(-1) + _varint(len(value)) + value + _varint(0)
        body += _varint(len(rec)) + rec
    after_crc = (struct.pack(">hiqqqhii", 0, count - 1, timestamp_ms, timestamp_ms, -1, -1, -1, count)
                 + bytes(body))
    crc = crc32c.crc32c(after_crc)
    head = struct.pack(">qiibI", 0, 4 + 1 + 4 + len(after_crc), -1, 2, crc)
    return head + after_crc


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def produce_request_v7(batch: bytes) -> bytearray:
    body = (struct.pack(">hhi", -1, 1, 30_000)                      # transactional id null, acks=1, timeout
            + struct.pack(">i", 1) + _string(TOPIC)
            + struct.pack(">i", 1) + struct.pack(">ii", 0, len(batch)) + batch)
    header = struct.pack(">hhi", 0, 7, 0) + _string("bench-raw")
    return bytearray(struct.pack(">i", len(header) + len(body)) + header + body)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        r = sock.recv_into(view[got:])
        if not r:
            raise ConnectionError("closed by the broker")
        got += r
    return bytes(buf)


def produce_raw(address: str, total_bytes: int, pid: int, batch_bytes: int, in_flight: int = 8) -> dict:
    per_batch = max(1, (batch_bytes - 200) // (RECORD_SIZE + 16))
    frame = produce_request_v7(record_batch(per_batch, os.urandom(RECORD_SIZE), int(time.time() * 1000)))
    requests = max(1, total_bytes // (per_batch * RECORD_SIZE))
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    slots = threading.Semaphore(in_flight)
    problems: list[str] = []

    def read_responses():
        try:
            for _ in range(requests):
                frame_ = _recv_exact(sock, struct.unpack(">i", _recv_exact(sock, 4))[0])
                # correlation i32, [topic: i32 n, string, [i32 n, partition i32, error i16, ...]]
                name_len = struct.unpack_from(">h", frame_, 8)[0]
                error = struct.unpack_from(">h", frame_, 10 + name_len + 4 + 4)[0]
                if error:
                    problems.append(f"Produce v7 error {error}")
                slots.release()
        except Exception as e:  # noqa: BLE001
            problems.append(repr(e))
            for _ in range(in_flight):
                slots.release()

    reader = threading.Thread(target=read_responses, daemon=True)
    with Phase("produce/raw", pid) as ph:
        reader.start()
        for i in range(requests):
            slots.acquire()
            if problems:
                break
            struct.pack_into(">i", frame, 8, i)
            sock.sendall(frame)
        reader.join(300)
    sock.close()
    if problems or reader.is_alive():
        raise RuntimeError(f"raw produce: {problems[:3] or 'responses missing after 300 s'}")
    return ph.result(requests * per_batch, requests * per_batch * RECORD_SIZE,
                     request_bytes=len(frame), in_flight=in_flight)


# -- 3. confluent-kafka consumer ----------------------------------------------------------------

def consume_confluent(bootstrap: str, expected: int, pid: int) -> dict:
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "bench",  # required by librdkafka; never joined
        "enable.auto.commit": False, "enable.auto.offset.store": False,
        "fetch.max.bytes": 64 * 1024 * 1024, "max.partition.fetch.bytes": 16 * 1024 * 1024,
        "queued.max.messages.kbytes": 512 * 1024, "queued.min.messages": 1_000_000,
        "fetch.queue.backoff.ms": 0, "fetch.wait.max.ms": 100})
    n = nbytes = 0
    deadline = time.monotonic() + 600
    with Phase("consume/confluent", pid) as ph:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        consume = consumer.consume
        while n < expected and time.monotonic() < deadline:
            msgs = consume(100_000, 1.0)
            n += len(msgs)
            for m in msgs:
                nbytes += len(m)
    consumer.close()
    if n < expected:
        raise RuntimeError(f"confluent consume: {n}/{expected} records in 600 s")
    return ph.result(n, nbytes)


# -- 4. raw Fetch v10 ---------------------------------------------------------------------------

def fetch_request_v10(offset: int, correlation: int, max_bytes: int) -> bytes:
    body = (struct.pack(">iiiib", -1, 100, 1, max_bytes, 0) + struct.pack(">ii", 0, -1)
            + struct.pack(">i", 1) + _string(TOPIC)
            + struct.pack(">i", 1) + struct.pack(">iiqqi", 0, -1, offset, -1, max_bytes)
            + struct.pack(">i", 0))
    header = struct.pack(">hhi", 1, 10, correlation) + _string("bench-raw")
    return struct.pack(">i", len(header) + len(body)) + header + body


def consume_raw(address: str, expected: int, pid: int, max_bytes: int = 16 * 1024 * 1024) -> dict:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=60)
    offset = record_bytes = requests = 0
    deadline = time.monotonic() + 600
    with Phase("consume/raw", pid) as ph:
        while offset < expected and time.monotonic() < deadline:
            requests += 1
            sock.sendall(fetch_request_v10(offset, requests, max_bytes))
            frame = _recv_exact(sock, struct.unpack(">i", _recv_exact(sock, 4))[0])
            pos = 4 + 14
            pos += 2 + struct.unpack_from(">h", frame, pos)[0] + 4
            _p, error, _high, _lso, _ls, n_aborted = struct.unpack_from(">ihqqqi", frame, pos)
            if error:
                raise RuntimeError(f"Fetch v10 error {error} at offset {offset}")
            pos += 34 + max(n_aborted, 0) * 16
            size = struct.unpack_from(">i", frame, pos)[0]
            pos += 4
            end = pos + max(size, 0)
            while pos + 61 <= end:
                base, length = struct.unpack_from(">qi", frame, pos)
                if pos + 12 + length > end:
                    break
                last_delta = struct.unpack_from(">i", frame, pos + 23)[0]
                if base + last_delta >= offset:
                    record_bytes += 12 + length
                offset = max(offset, base + last_delta + 1)
                pos += 12 + length
    sock.close()
    if offset < expected:
        raise RuntimeError(f"raw consume: reached offset {offset}/{expected} in 600 s")
    # value bytes: the batches carry 1 KiB values plus a few bytes of framing per record
    return ph.result(offset, offset * RECORD_SIZE, batch_bytes=record_bytes, requests=requests)


# -- main ---------------------------------------------------------------------------------------

def environment() -> dict:
    import confluent_kafka
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).resolve().parent).stdout.strip()
    except OSError:
        commit = None
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), platform.processor())
    return {"cpus": os.cpu_count(), "cpu": cpu, "python": platform.python_version(),
            "confluent_kafka": confluent_kafka.version()[0], "librdkafka": confluent_kafka.libversion()[0],
            "commit": commit}


def print_table(results: list[dict], memory: dict) -> None:
    print(f"\n{'phase':20} {'records':>10} {'seconds':>8} {'MB/s':>8} {'records/s':>10} "
          f"{'broker CPU s':>12} {'broker CPU/wall':>15} {'client CPU s':>12} {'client thread busy':>18}")
    for r in results:
        print(f"{r['phase']:20} {r['records']:>10} {r['seconds']:>8.2f} {r['mb_s']:>8.1f} {r['records_s']:>10} "
              f"{r['broker_cpu_s']:>12.2f} {r['broker_cpu_share']:>15.2f} {r['client_cpu_s']:>12.2f} "
              f"{r['client_main_thread_busy']:>18.2f}")
    print(f"\nbroker peak RSS (VmHWM) {memory.get('VmHWM', 0):.0f} MB; now RSS {memory.get('VmRSS', 0):.0f} MB "
          f"= anonymous {memory.get('RssAnon', 0):.0f} MB + file-backed {memory.get('RssFile', 0):.0f} MB"
          + (f"; peak anonymous (sampled) {memory['peak_RssAnon_sampled']:.0f} MB"
             if "peak_RssAnon_sampled" in memory else ""))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.produce_consume", description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000, help="records for the confluent producer")
    ap.add_argument("--raw-mb", type=int, default=1024, help="MB of values for the raw producer (0: skip)")
    ap.add_argument("--batch-bytes", type=int, default=1_000_000,
                    help="record batch size: librdkafka batch.size and the raw requests' batch")
    ap.add_argument("--data-dir", type=Path, help="cluster directory (default: a fresh temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the data directory")
    ap.add_argument("--output", type=Path, help=f"JSON file (default: {RESULTS}/<date>.json)")
    args = ap.parse_args(argv)

    data_dir = (args.data_dir or Path(tempfile.mkdtemp(prefix="odradek-bench-"))).resolve()
    recorded: list[dict] = []
    results: list[dict] = []
    try:
        odradek(data_dir, "up", "--detach", "--brokers", "1", "--kafka-port", "0")
        recorded = recorded_processes(data_dir)
        status = json.loads(odradek(data_dir, "status", "--json"))
        bootstrap, pid = status["bootstrap_servers"], int(status["pids"]["broker-1"])
        address = status["brokers"]["1"]
        create_topic(bootstrap)
        idle = broker_memory_mb(pid)
        sampler = MemorySampler(pid)
        sampler.start()
        results.append(produce_confluent(bootstrap, args.records, pid, args.batch_bytes))
        print_table(results, broker_memory_mb(pid))
        total = args.records
        if args.raw_mb:
            results.append(produce_raw(address, args.raw_mb * 1_000_000, pid, args.batch_bytes))
            total += results[-1]["records"]
            print_table(results, broker_memory_mb(pid))
        results.append(consume_confluent(bootstrap, total, pid))
        results.append(consume_raw(address, total, pid))
        memory = broker_memory_mb(pid)
        sampler.done.set()
        memory["peak_RssAnon_sampled"] = sampler.peak_anon
    finally:
        leftovers = stop_cluster(data_dir, recorded)
        if not args.keep and not args.data_dir:
            shutil.rmtree(data_dir, ignore_errors=True)
    print_table(results, memory)
    if leftovers:
        print(f"warning: killed by PID after `dev down`: {', '.join(leftovers)}", file=sys.stderr)

    verdict = {
        "produce_mb_s": max(r["mb_s"] for r in results if r["phase"].startswith("produce")),
        "consume_mb_s": max(r["mb_s"] for r in results if r["phase"].startswith("consume")),
        "broker_rss_mb": round(memory["VmHWM"], 1),
        "broker_anon_rss_mb": round(memory["peak_RssAnon_sampled"], 1)}
    for key, target in TARGETS.items():
        upper = key.endswith("rss_mb")
        ok = verdict[key] <= target if upper else verdict[key] >= target
        print(f"{key:18} {verdict[key]:>8}  target {'<=' if upper else '>='} {target}: "
              f"{'met' if ok else 'NOT met'}")
    report = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
              "command": "python -m bench.produce_consume " + " ".join(argv if argv is not None else sys.argv[1:]),
              "setup": {"brokers": 1, "partitions": 1, "record_value_bytes": RECORD_SIZE, "acks": 1,
                        "batch_bytes": args.batch_bytes,
                        "mb": "10^6 bytes of record values"},
              "environment": environment(), "results": results,
              "broker_memory_mb": {"idle": idle, "end": memory}, "targets": TARGETS, "best": verdict,
              "leftover_processes_killed": leftovers}
    out = args.output
    if out is None:
        RESULTS.mkdir(parents=True, exist_ok=True)
        stem = datetime.date.today().isoformat()
        out = RESULTS / f"{stem}.json"
        n = 2
        while out.exists():
            out, n = RESULTS / f"{stem}-{n}.json", n + 1
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
