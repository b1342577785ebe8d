"""Log compaction (issue 5): the cleaner's speed, and what it costs the produce path.

    .venv/bin/python -m bench.compaction [--records 2000000] [--keys 10000] [--seconds 20]
                                         [--priorities idle,nice10] [--rounds 1]

(a) cleaner: a log built in-process (batches of 100 records of ~100 bytes over ``--keys``
    keys in turn, or at random with ``--shuffled-keys``; 1 MiB segments), then one cleaning of every closed segment (key map + rewrite +
    swap), timed: MB of log per second. Goal >= 50 MB/s.
(b) produce p99: a 1-broker dev cluster; a compacted topic filled with ``--records`` updates
    while ``min.cleanable.dirty.ratio=1.0`` (the cleaner never starts); then a closed-loop
    producer (one 1 KiB record per request, acks=1, librdkafka) to another topic for
    ``--seconds``, first with the cleaner idle, then right after the ratio is set to 0.01
    (the cleaner rewrites the whole topic meanwhile). p50/p99 of the request latency. Goal:
    p99 with the cleaner <= 1.2 x without. ``--priorities`` runs (b) once per cleaner process
    priority (``idle``: SCHED_IDLE + idle I/O class, the default; ``nice10``: the old setting),
    alternating for ``--rounds``, each on a fresh cluster: an A/B in the same run.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from odradek.broker.storage.cleaner import CleanerSettings, LogCleaner
from odradek.dev.harness import start_cluster, stop_cluster
from odradek.records import Record, build_batch

VALUE = b"x" * 90
NOW = int(time.time() * 1000)


def cleaner_speed(records: int, keys: int, shuffled: bool = False) -> dict:
    from odradek.broker.storage import Log, LogConfig
    rng = random.Random(5)
    with tempfile.TemporaryDirectory() as tmp:
        log = Log.open(Path(tmp) / "t-0", LogConfig.from_overrides({"segment.bytes": str(1 << 20)}),
                       topic="t", partition=0, clean_shutdown=True)
        for start in range(0, records, 100):
            batch = [Record(VALUE, key=b"key-%06d" % (rng.randrange(keys) if shuffled else i % keys), timestamp=NOW)
                     for i in range(start, start + 100)]
            log.append(build_batch(batch, now_ms=NOW), leader_epoch=0)
        log.roll()
        log.high_watermark = log.log_end_offset
        size = log.size
        settings = CleanerSettings.of({"cleanup.policy": "compact"})
        started = time.perf_counter()
        cleaned = LogCleaner(Path(tmp)).clean_now(log, settings, NOW + 1, force=True)
        seconds = time.perf_counter() - started
        log.close()
    return {"log_mb": size / 1e6, "seconds": seconds, "mb_per_s": size / 1e6 / seconds,
            "written_mb": cleaned.bytes_written / 1e6}


def fill(bootstrap: str, topic: str, records: int, keys: int) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 512 * 1024,
                  "enable.idempotence": False, "queue.buffering.max.messages": 1_000_000})
    for i in range(records):
        while True:
            try:
                p.produce(topic, key=b"key-%06d" % (i % keys), value=VALUE)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(300) == 0


def latencies(bootstrap: str, topic: str, seconds: float) -> list[float]:
    """Closed loop: one record, wait for its acknowledgement, repeat; ms per request."""
    return [ms for _, ms in timed_latencies(bootstrap, topic, seconds)]


def timed_latencies(bootstrap: str, topic: str, seconds: float) -> list[tuple[float, float]]:
    """(monotonic start, ms) of each request of a closed loop."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1, "enable.idempotence": False})
    out, value = [], b"y" * 1024
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started, t = time.monotonic(), time.perf_counter()
        p.produce(topic, value=value)
        assert p.flush(30) == 0
        out.append((started, (time.perf_counter() - t) * 1000))
    return out


def summary(samples: list[float]) -> dict:
    qs = statistics.quantiles(samples, n=100)
    return {"requests": len(samples), "p50_ms": qs[49], "p99_ms": qs[98]}


def set_ratio(cluster, topic: str, ratio: str) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    resource = ConfigResource("TOPIC", topic, incremental_configs=[
        ConfigEntry("min.cleanable.dirty.ratio", ratio, incremental_operation=AlterConfigOpType.SET)])
    admin = cluster.admin()   # keep the handle alive until the futures resolve
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(timeout=60)


def partition_log_bytes(cluster, topic: str) -> int:
    directory = Path(cluster.data_dir) / "broker-1" / f"{topic}-0"
    return sum(p.stat().st_size for p in directory.iterdir() if ".log" in p.name)


def produce_p99(records: int, keys: int, seconds: float, priority: str = "idle") -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cluster = start_cluster(Path(tmp), brokers=1, extra=("--config", f"log.cleaner.priority={priority}"))
        try:
            cluster.create_topic("compacted", config={"cleanup.policy": "compact", "segment.bytes": str(1 << 20),
                                                      "min.cleanable.dirty.ratio": "1.0",
                                                      "file.delete.delay.ms": "1000"})
            cluster.create_topic("plain")
            fill(cluster.bootstrap, "compacted", records, keys)
            before = partition_log_bytes(cluster, "compacted")
            latencies(cluster.bootstrap, "plain", 2)                     # warm-up
            idle = summary(latencies(cluster.bootstrap, "plain", seconds))
            set_ratio(cluster, "compacted", "0.01")
            watch = CleaningWatch(cluster, "compacted", before)
            samples = timed_latencies(cluster.bootstrap, "plain", seconds)
            watch.stop()
            busy = summary([ms for _, ms in samples])
            during = [ms for t, ms in samples if watch.done_at is None or t < watch.done_at]
            after = partition_log_bytes(cluster, "compacted")
        finally:
            stop_cluster(cluster, strict=False)
    return {"compacted_log_mb_before": before / 1e6, "compacted_log_mb_after": after / 1e6,
            "without_cleaner": idle, "with_cleaner": busy, "p99_ratio": busy["p99_ms"] / idle["p99_ms"],
            "cleaning_s": None if watch.done_at is None else watch.done_at - watch.started,
            "while_cleaning": summary(during), "p99_ratio_while_cleaning": summary(during)["p99_ms"] / idle["p99_ms"]}


class CleaningWatch:
    """When the compacted topic's live .log files fell below half their size: the swap is done."""

    def __init__(self, cluster, topic: str, before: int) -> None:
        self.directory = Path(cluster.data_dir) / "broker-1" / f"{topic}-0"
        self.before, self.started, self.done_at = before, time.monotonic(), None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            try:
                live = sum(p.stat().st_size for p in self.directory.iterdir() if p.name.endswith(".log"))
            except FileNotFoundError:   # renamed by the swap meanwhile
                continue
            if live < self.before / 2:
                self.done_at = time.monotonic()
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def report(label: str, p: dict) -> None:
    print(f"[{label}] compacted topic {p['compacted_log_mb_before']:.1f} MB -> {p['compacted_log_mb_after']:.1f} MB "
          f"during the measurement")
    for name in ("without_cleaner", "with_cleaner", "while_cleaning"):
        s = p[name]
        print(f"[{label}] produce {name.replace('_', ' ')}: {s['requests']} requests, p50 {s['p50_ms']:.2f} ms, "
              f"p99 {s['p99_ms']:.2f} ms")
    took = "not finished" if p["cleaning_s"] is None else f"{p['cleaning_s']:.1f} s"
    print(f"[{label}] p99 with / without the cleaner: {p['p99_ratio']:.2f} over the whole window, "
          f"{p['p99_ratio_while_cleaning']:.2f} while it cleaned (config change to swap: {took}) (goal <= 1.20)",
          flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--skip-cluster", action="store_true", help="only (a), the in-process cleaner speed")
    ap.add_argument("--priorities", default="idle", help="cleaner process priorities for (b): idle, nice10")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--shuffled-keys", action="store_true",
                    help="(a) with random keys: most batches keep some records (the record-by-record path)")
    args = ap.parse_args(argv)
    speed = cleaner_speed(args.records, args.keys, args.shuffled_keys)
    print(f"cleaner: {speed['log_mb']:.1f} MB of log cleaned in {speed['seconds']:.2f}s = "
          f"{speed['mb_per_s']:.1f} MB/s (goal >= 50), {speed['written_mb']:.2f} MB kept")
    if not args.skip_cluster:
        for round_ in range(args.rounds):
            for priority in args.priorities.split(","):
                report(f"round {round_} cleaner {priority}", produce_p99(args.records, args.keys, args.seconds,
                                                                         priority))
    return 0


if __name__ == "__main__":
    sys.exit(main())
