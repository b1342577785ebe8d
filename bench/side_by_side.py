"""Odradek next to Apache Kafka on the same machine: same clients, same settings, A/B rounds.

    make bench                                   # = scripts/kafka.sh resolve; python -m bench.side_by_side
    .venv/bin/python -m bench.side_by_side [--rounds 3] [--scenarios 1,2,3,4,5,6,7] [--quick]

Both systems run as local processes on 127.0.0.1 (Kafka: KRaft nodes from `bench.apache_kafka`;
Odradek: `odradek dev up --kafka-port 0`), started once per cluster shape and kept up while
the rounds alternate Kafka, Odradek, Kafka, Odradek, ... Every figure is the median over the
rounds; the ratio is Odradek / Kafka (above 1 is better for throughput, worse for latency,
CPU and memory).

Scenarios (the issue's numbering):
 1. 1 broker, 1 and 6 partitions, RF=1, acks=1, 100 B and 1 KiB values: produce MB/s and
    records/s with Kafka's `ProducerPerformance` (each case's rounds into the topic its warm-up
    wrote, one per system).
 2. 3 brokers, RF=3, acks=all, min.insync.replicas=2, 6 partitions, 1 KiB: produce MB/s and
    ProducerPerformance's p50/p99/p99.9 send latency (at full speed: queueing included).
 3. consume a ~2 GB topic (1 partition, 1 KiB values) from the start: MB/s with Kafka's Java
    consumer (`AssignedClients consume`: assign + seekToBeginning; Kafka's
    `ConsumerPerformance` needs consumer groups, which Odradek serves only from issue 5).
 4. end-to-end latency (send -> consumer receives, one JVM clock) at a fixed rate of half of
    Kafka's scenario-2 records/s, RF=3, acks=all (`AssignedClients e2e`).
 5. broker CPU seconds per GB of values (with the client's: each case of scenarios 1, 2, 3, 7)
    and every broker's peak RSS (VmHWM), per cluster shape.
 6. the single-record acks=all round trip: one 100 B record at a time, RF=3,
    min.insync.replicas=2, p50/p99 (`bench.round_trip`, confluent-kafka for both systems).
 7. transactional produce: 200,000 1 KiB records in transactions of 1,000, RF=3, 6 partitions,
    records/s and the commit's p50/p99 (`bench.transactional`, confluent-kafka for both systems).

MB/s are 10^6 bytes of record values per second. Every measured run also records the CPU
seconds over it of the client (``client_cpu_seconds``: the JVM, or the in-process confluent-kafka
client of scenarios 6 and 7), of the brokers, and of the machine (cores x wall seconds); the
throughput scenarios 1, 2, 3 and 7 report each per GB of values (``CPU_FIGURES``), the client's
as its marginal cost beyond the case's warm-up run (``marginal_client_cpu``: no JVM start).

Results: `bench/results/side-by-side-<date>.json`, `bench/results/side-by-side-<date>.png`, and
the table between the markers in `docs/performance.md`.
"""

from __future__ import annotations

import argparse
from abc import ABC, abstractmethod
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import apache_kafka
from bench.apache_kafka import KafkaCluster
from bench.round_trip import WARM_CHUNK, single_record_round_trip, warm_round_trips
from bench.transactional import transactional_produce

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- side-by-side:begin -->", "<!-- side-by-side:end -->"
CLK_TCK = os.sysconf("SC_CLK_TCK")
CORES = len(os.sched_getaffinity(0))  # the cores the brokers and the client share
PRODUCER_PROPS = {"enable.idempotence": "false", "linger.ms": "5", "batch.size": "262144",
                  "compression.type": "none"}
PERF_LINE = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")
KAFKA, ODRADEK = "kafka", "odradek"
TXN_VALUE_SIZE = 1024     # scenario 7's values (bench.transactional's default)
WARM_SHARE = 0.1          # scenarios 1-3 and 7: an untimed run of this share of a case's records first


# -- processes -----------------------------------------------------------------------------------

def cpu_seconds(pids: list[int], reaped_children: bool = False) -> float:
    """utime + stime of ``pids`` from /proc; ``reaped_children``: with cutime + cstime, the CPU
    of their children that have exited and been waited for."""
    total = 0
    for pid in pids:
        try:
            f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(v) for v in f[11:15 if reaped_children else 13])
        except OSError:
            pass
    return total / CLK_TCK


def client_cpu_seconds() -> float:
    """This process's CPU and its reaped children's: over a run, the client's. A Java client is a
    child (``subprocess.run`` reaps it, with whatever it started); the confluent-kafka clients
    (scenarios 6, 7) run in this process. The brokers are not counted: Kafka's nodes are
    children reaped only when stopped, Odradek's are ``dev up``'s daemons."""
    return cpu_seconds([os.getpid()], reaped_children=True)


def memory_mb(pid: int) -> dict[str, float]:
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
                out[key] = int(rest.split()[0]) / 1024
    except OSError:
        pass
    return out


class System(ABC):
    name: str
    bootstrap: str
    dir: Path | None = None     # its brokers' files (``drop_page_cache``)

    @abstractmethod
    def broker_pids(self) -> list[int]:
        """PIDs of the broker processes whose CPU and memory are measured."""

    @abstractmethod
    def stop(self) -> list[str]:
        """Stop every process; return what was left behind."""

    def admin(self):
        from confluent_kafka.admin import AdminClient
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def create_topic(self, name: str, partitions: int, rf: int, config: dict[str, str] | None = None) -> None:
        from confluent_kafka.admin import NewTopic
        admin = self.admin()
        fut = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=rf,
                                            config=config or {})], operation_timeout=60, request_timeout=60)
        fut[name].result(timeout=90)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            t = admin.list_topics(name, timeout=10).topics.get(name)
            if t is not None and t.error is None and len(t.partitions) == partitions and all(
                    p.leader >= 0 and p.error is None for p in t.partitions.values()):
                return
            time.sleep(0.2)
        raise TimeoutError(f"{self.name}: no leader for every partition of {name}")

    def delete_topic(self, name: str) -> None:
        try:
            admin = self.admin()  # keep the handle alive until the future resolves
            admin.delete_topics([name], operation_timeout=60, request_timeout=60)[name].result(timeout=90)
        except Exception as e:  # noqa: BLE001 - cleanup only; reported in the log
            print(f"  ({self.name}: deleting {name} failed: {e})", file=sys.stderr)


class KafkaSystem(System):
    name = KAFKA

    def __init__(self, root: Path, brokers: int) -> None:
        self.dir = root / f"kafka-{brokers}"
        self.cluster = KafkaCluster(self.dir, nodes=brokers).start()
        self.bootstrap = self.cluster.bootstrap

    def broker_pids(self) -> list[int]:
        return list(self.cluster.pids.values())

    def stop(self) -> list[str]:
        return self.cluster.stop()


class OdradekSystem(System):
    """``odradek dev up --kafka-port 0`` through the integration tests' ``start_cluster`` /
    ``stop_cluster`` (PIDs with start times; whatever ``dev down`` leaves is killed by PID)."""
    name = ODRADEK

    def __init__(self, root: Path, brokers: int, extra: tuple[str, ...] = ()) -> None:
        from odradek.dev.harness import start_cluster
        self.dir = root / f"odradek-{brokers}"
        self.cluster = start_cluster(self.dir, brokers=brokers, extra=extra)
        self.bootstrap = self.cluster.bootstrap
        self.pids = {k: int(v) for k, v in self.cluster.pids.items()}

    def broker_pids(self) -> list[int]:
        return [pid for name, pid in self.pids.items() if name.startswith("broker-")]

    def stop(self) -> list[str]:
        from odradek.dev.harness import stop_cluster
        try:
            stop_cluster(self.cluster, strict=True)
        except AssertionError as e:  # `dev down` failed or left processes (killed by PID)
            return [f"odradek: {e}"]
        return []


# -- clients -------------------------------------------------------------------------------------

def producer_performance(system: System, topic: str, records: int, size: int, acks: str) -> dict:
    props = {"bootstrap.servers": system.bootstrap, "acks": acks, **PRODUCER_PROPS}
    proc = apache_kafka.run_tool(
        "org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", str(records),
        "--record-size", str(size), "--throughput", "-1",
        "--producer-props", *(f"{k}={v}" for k, v in props.items()), timeout=600)
    lines = [m for m in PERF_LINE.finditer(proc.stdout)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"ProducerPerformance exited {proc.returncode}: {proc.stdout[-800:]} {proc.stderr[-1500:]}")
    m = lines[-1]
    sent, rps = int(m.group(1)), float(m.group(2))
    if sent != records:
        raise RuntimeError(f"ProducerPerformance sent {sent}/{records}")
    return {"records": sent, "value_bytes": sent * size, "records_s": round(rps), "mb_s": round(rps * size / 1e6, 1),
            "avg_ms": float(m.group(4)), "max_ms": float(m.group(5)), "p50_ms": float(m.group(6)),
            "p95_ms": float(m.group(7)), "p99_ms": float(m.group(8)), "p999_ms": float(m.group(9))}


def assigned_client(mode: str, *args: str, timeout: float = 900) -> dict:
    proc = apache_kafka.run_tool("AssignedClients", mode, *args, timeout=timeout)
    line = next((l for l in reversed(proc.stdout.splitlines()) if l.startswith("{")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"AssignedClients {mode} exited {proc.returncode}: {proc.stdout[-800:]} {proc.stderr[-1500:]}")
    result = json.loads(line)
    if "bytes" in result:  # consume: the bytes of the values it read
        result["value_bytes"] = result["bytes"]
    return result


def transactions(bootstrap: str, topic: str, records: int) -> dict:
    """Scenario 7's client (``bench.transactional``, values of 1 KiB), with its bytes of values."""
    result = transactional_produce(bootstrap, topic, records)
    result["value_bytes"] = result["records"] * TXN_VALUE_SIZE
    return result


def with_client_cpu(fn, *args) -> dict:
    """``fn(*args)``'s result with the client's CPU seconds over it (``client_cpu_s``)."""
    client0 = client_cpu_seconds()
    result = fn(*args)
    result["client_cpu_s"] = round(client_cpu_seconds() - client0, 2)
    return result


def measured(system: System, fn, *args) -> dict:
    """Run one client; add the CPU seconds of the brokers and of the client over the run, the
    wall time, and the machine's CPU seconds over it (cores x wall)."""
    pids = system.broker_pids()
    broker0, t0 = cpu_seconds(pids), time.monotonic()
    result = with_client_cpu(fn, *args)
    result["broker_cpu_s"] = round(cpu_seconds(pids) - broker0, 2)
    result["wall_s"] = round(time.monotonic() - t0, 2)
    result["machine_cpu_s"] = round(CORES * result["wall_s"], 2)
    result.update(cpu_per_gb(result))
    return result


CPU_PER_GB = ("client_cpu_s", "broker_cpu_s", "machine_cpu_s")


def cpu_per_gb(result: dict) -> dict:
    """Each of ``CPU_PER_GB`` per GB (10^9 bytes) of values, for a run that says its ``value_bytes``."""
    gb = result.get("value_bytes", 0) / 1e9
    return {f"{k}_per_gb": round(result[k] / gb, 2) for k in CPU_PER_GB if gb and k in result}


# -- scenarios -----------------------------------------------------------------------------------

PRINTED = ("mb_s", "records_s", "p50_ms", "p99_ms", "p999_ms", "broker_cpu_s", "client_cpu_s",
           "client_cpu_s_per_gb", "broker_cpu_s_per_gb", "machine_cpu_s_per_gb",
           "produce_requests", "records_per_produce", "fetches", "records_per_fetch")  # a run's line in the log


def drop_page_cache(root: Path | None) -> None:
    """The clean cached pages of every file under ``root`` (a system's logs, synced) given
    back to the kernel, so that a measured run's writes reuse memory the machine used lately. On
    the VM of 2026-12-01 (free page reporting on: the host takes back free memory), page cache
    written into memory not used lately cost 2.3 kernel s/GB against 0.18 (`dd` of 512-MB files
    one after another: the first 2 GB at 0.18, the rest at 2.3): more than Odradek's whole
    produce path, met by whichever system's round came late in a case (docs/performance.md,
    "What runs")."""
    if root is None:
        return
    for path in root.rglob("*"):
        try:
            if not path.is_file():
                continue
            fd = os.open(path, os.O_RDONLY)
        except OSError:   # a file deleted meanwhile (a segment retired)
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


class Bench:
    def __init__(self, rounds: int, scale: float) -> None:
        self.rounds, self.scale = rounds, scale
        self.runs: list[dict] = []          # every run: scenario, case, system, round, figures | error
        self.memory: dict[str, dict] = {}   # cluster shape -> system -> broker -> memory
        self.warmups: list[dict] = []       # the warm-ups' client CPU and bytes (``warm``), not runs
        self.notes: list[str] = []
        self.seq = 0

    def n(self, records: int) -> int:
        return max(1000, int(records * self.scale))

    def warm_n(self, records: int) -> int:
        """Records of a scenario's untimed warm-up run (``records``: a measured run's)."""
        return max(1000, int(records * WARM_SHARE))

    def topic(self, stem: str) -> str:
        self.seq += 1
        return f"{stem}-{self.seq}"

    def record(self, scenario: str, case: str, system: System, rnd: int, fn, reads_cache: bool = False) -> dict | None:
        """One measured run. Before it, ``system``'s files' page cache is given back, unless the run
        ``reads_cache``: what earlier runs wrote (scenario 3's consume). Only the system's own:
        the other's filled topic waits in memory for its consume."""
        entry = {"scenario": scenario, "case": case, "system": system.name, "round": rnd}
        os.sync()   # the earlier runs' dirty pages written back now, not during this run (see "What runs")
        if not reads_cache:
            drop_page_cache(system.dir)
        try:
            entry.update(fn())
        except Exception as e:  # noqa: BLE001 - a failed run is reported, not fatal
            entry["error"] = str(e)[-2000:]
        self.runs.append(entry)
        figs = {k: v for k, v in entry.items() if k in PRINTED}
        print(f"  {scenario} {case:28} round {rnd} {system.name:8} "
              + (f"ERROR {entry['error'][:300]}" if "error" in entry else json.dumps(figs)), flush=True)
        return None if "error" in entry else entry

    def alternate(self, systems: list[System], rnd: int) -> list[System]:
        return systems if rnd % 2 == 0 else list(reversed(systems))

    def scenario1(self, systems: list[System]) -> None:
        cases = [(f"produce p={p} {size}B acks=1", p, size, self.n(1_000_000 if size >= 1024 else 2_000_000))
                 for p in (1, 6) for size in (100, 1024)]
        for case, partitions, size, records in cases:
            self.rounds_on_a_warm_topic(
                systems, "1", case, partitions, 1, None,
                lambda s, topic, size=size, records=records: with_client_cpu(
                    producer_performance, s, topic, self.warm_n(records), size, "1"),
                lambda s, topic, size=size, records=records: measured(
                    s, producer_performance, s, topic, records, size, "1"), warm_case=True)

    def scenario3(self, systems: list[System]) -> None:
        records = self.n(2_000_000)  # 2 GB of 1 KiB values at scale 1
        topics = {}
        for s in systems:
            topics[s.name] = self.topic("s3-consume")
            try:
                s.create_topic(topics[s.name], 1, 1)
                self.record("3", "fill 1 partition 1KiB acks=1", s, 0,
                            lambda s=s: measured(s, producer_performance, s, topics[s.name], records, 1024, "1"))
            except Exception as e:  # noqa: BLE001
                self.runs.append({"scenario": "3", "case": "fill", "system": s.name, "error": str(e)[-2000:]})
        self.warm([s for s in systems if s.name in topics], lambda s: with_client_cpu(
            assigned_client, "consume", "--bootstrap", s.bootstrap, "--topic", topics[s.name], "--partitions", "1",
            "--records", str(min(records, self.warm_n(records)))), ("3", "consume from the start"))
        for rnd in range(self.rounds):
            for s in self.alternate(systems, rnd):
                self.record("3", "consume from the start", s, rnd, lambda s=s: measured(
                    s, assigned_client, "consume", "--bootstrap", s.bootstrap, "--topic", topics[s.name],
                    "--partitions", "1", "--records", str(records)), reads_cache=True)
        for s in systems:
            s.delete_topic(topics[s.name])

    def scenario2(self, systems: list[System]) -> dict[str, str]:
        """Returns {system: why not runnable} for systems whose RF=3 topic cannot be created."""
        records = self.n(1_000_000)
        config = {"min.insync.replicas": "2"}
        blocked: dict[str, str] = {}
        for s in systems:
            probe = self.topic("s2-probe")
            try:
                s.create_topic(probe, 6, 3, config)
                s.delete_topic(probe)
            except Exception as e:  # noqa: BLE001
                blocked[s.name] = f"creating a topic with RF=3 failed: {e}"
        self.rf3_scenario(systems, blocked, "2", "produce p=6 1KiB RF=3 acks=all", 6, lambda s, topic: with_client_cpu(
            producer_performance, s, topic, self.warm_n(records), 1024, "all"), lambda s, topic: measured(
            s, producer_performance, s, topic, records, 1024, "all"), warm_case=True)
        return blocked

    def scenario4(self, systems: list[System], blocked: dict[str, str], seconds: float,
                  fixed_rate: int | None = None) -> None:
        peak = [r["records_s"] for r in self.runs if r["scenario"] == "2" and r["system"] == KAFKA and "error" not in r]
        if fixed_rate:
            rate = fixed_rate
            self.notes.append(f"scenario 4 rate: {rate} records/s of 1 KiB (--e2e-rate)")
        elif not peak:
            self.notes.append("scenario 4 skipped: no Kafka figure from scenario 2 to set the rate")
            return
        else:
            rate = int(statistics.median(peak) / 2)
            self.notes.append(f"scenario 4 rate: {rate} records/s of 1 KiB (half of Kafka's scenario-2 median)")
        self.rf3_scenario(systems, blocked, "4", f"e2e {rate} rec/s RF=3 acks=all", 6, lambda s, topic: assigned_client(
            "e2e", "--bootstrap", s.bootstrap, "--topic", topic, "--partitions", "6", "--rate", str(rate),
            "--seconds", str(seconds), "--warmup", "1", "--size", "1024", "--acks", "all"), lambda s, topic: measured(
            s, assigned_client, "e2e", "--bootstrap", s.bootstrap, "--topic", topic, "--partitions", "6",
            "--rate", str(rate), "--seconds", str(seconds), "--warmup", "3", "--size", "1024", "--acks", "all"))

    def scenario6(self, systems: list[System], blocked: dict[str, str]) -> None:
        def warm(s: System, topic: str) -> dict:
            self.full_rate_burst(s)
            p50s = warm_round_trips(lambda: single_record_round_trip(s.bootstrap, topic, WARM_CHUNK, warmup=0))
            self.notes.append(f"scenario 6 warm-up, {s.name}: p50 ms per {WARM_CHUNK:,} records: "
                              + " ".join(f"{p:.2f}" for p in p50s))
            return {}
        self.rf3_scenario(systems, blocked, "6", "one record at a time RF=3 acks=all", 1, warm, lambda s, topic: measured(
            s, single_record_round_trip, s.bootstrap, topic, self.n(2000)))

    def full_rate_burst(self, s: System) -> None:
        """Scenario 6's warm-up starts with scenario 2's load at full rate (``n(600,000)`` records:
        300,000 at scale 0.5) on a topic of its own, on both systems: a fresh Kafka's G1 keeps a
        young generation of ~50 MB until many collections have sized it, and its single record
        measured alone had rounds of p99 2.2-4.7 ms (0.4-1.4 ms in others) where the full run,
        after scenarios 2 and 4, has 0.6; after the burst eden is 200-500 MB and the rounds'
        p99 0.44-1.05 ms (docs/performance.md, "What runs")."""
        topic = self.topic("s6-burst-p6")
        s.create_topic(topic, 6, 3, {"min.insync.replicas": "2"})
        try:
            producer_performance(s, topic, self.n(600_000), 1024, "all")
        finally:
            s.delete_topic(topic)

    def scenario7(self, systems: list[System], blocked: dict[str, str]) -> None:
        case = "transactions of 1,000 x 1 KiB RF=3"
        self.rf3_scenario(systems, blocked, "7", case, 6, lambda s, topic: with_client_cpu(
            transactions, s.bootstrap, topic, self.warm_n(self.n(200_000))), lambda s, topic: measured(
            s, transactions, s.bootstrap, topic, self.n(200_000)), warm_case=True)

    def rf3_scenario(self, systems: list[System], blocked: dict[str, str], scenario: str, case: str,
                     partitions: int, warm, run, warm_case: bool = False) -> None:
        """``rounds_on_a_warm_topic`` on the systems not ``blocked``, RF=3, min.insync.replicas=2."""
        self.rounds_on_a_warm_topic([s for s in systems if s.name not in blocked], scenario, case, partitions, 3,
                                    {"min.insync.replicas": "2"}, warm, run, warm_case)

    def rounds_on_a_warm_topic(self, systems: list[System], scenario: str, case: str, partitions: int, rf: int,
                               config: dict[str, str] | None, warm, run, warm_case: bool = False) -> None:
        """On each system one topic, deleted after: ``warm(system, topic)`` (``warm``;
        ``warm_case``: its client CPU kept for the case), then ``run(system, topic)`` each round.
        The rounds reuse the warmed topic: Kafka's first seconds on a new partition cost it several
        times its steady CPU per request (docs/performance.md, "What runs"), which a fresh topic
        per run measured instead of its steady path."""
        topics: dict[str, str] = {}
        for s in systems:
            try:
                topic = self.topic(f"s{scenario}-p{partitions}")
                s.create_topic(topic, partitions, rf, config)
                topics[s.name] = topic
            except Exception as e:  # noqa: BLE001 - reported as the scenario's run
                self.runs.append({"scenario": scenario, "case": case, "system": s.name, "error": str(e)[-2000:]})
        runnable = [s for s in systems if s.name in topics]
        try:
            self.warm(runnable, lambda s: warm(s, topics[s.name]), (scenario, case) if warm_case else None)
            for rnd in range(self.rounds):
                for s in self.alternate(runnable, rnd):
                    self.record(scenario, case, s, rnd, lambda s=s: run(s, topics[s.name]))
        finally:
            for s in runnable:
                try:
                    s.delete_topic(topics[s.name])
                except Exception as e:  # noqa: BLE001 - the next scenario's runs report a broken system
                    print(f"  deleting {s.name}'s {topics[s.name]} failed: {str(e)[:300]}", flush=True)

    def warm(self, systems: list[System], fn, case: tuple[str, str] | None = None) -> None:
        """Not recorded: ``fn(system)`` once on each system before a scenario's rounds, the same
        client on the same path as its measured runs, so that a scenario run alone (``--scenarios
        1,3,6``) measures its path warm: a fresh JVM runs interpreted until the JIT has compiled
        that path (scenario 6 alone measured Kafka's cold single-record path: p50 3.4-3.7 ms
        against 0.6 ms warm), and Odradek's first run of a path pays its imports and first
        allocations. ``case``: (scenario, case) whose measured runs ``fn`` warms; its client CPU
        and bytes are kept in ``warmups`` (for ``marginal_client_cpu``), outside the rounds."""
        for s in systems:
            try:
                result = fn(s)
            except Exception as e:  # noqa: BLE001 - the measured runs will report it
                print(f"  warm-up of {s.name}'s path failed: {str(e)[:300]}", flush=True)
                continue
            if case and "client_cpu_s" in result and result.get("value_bytes"):
                self.warmups.append({"scenario": case[0], "case": case[1], "system": s.name,
                                     "client_cpu_s": result["client_cpu_s"], "value_bytes": result["value_bytes"]})
                print(f"  {case[0]} {case[1]:28} warm-up {s.name:8} "
                      + json.dumps({k: result[k] for k in ("client_cpu_s", "value_bytes")}), flush=True)

    def snapshot_memory(self, shape: str, systems: list[System]) -> None:
        self.memory[shape] = {s.name: {str(pid): memory_mb(pid) for pid in s.broker_pids()} for s in systems}


def start_systems(root: Path, brokers: int) -> list[System]:
    systems: list[System] = []
    try:
        systems.append(KafkaSystem(root, brokers))
        systems.append(OdradekSystem(root, brokers))
    except BaseException:
        for s in systems:
            s.stop()
        raise
    return systems


# -- summary -------------------------------------------------------------------------------------

PER_ROUND = {"4"}  # scenarios whose every round is listed under the table, not only the median
# the throughput scenarios' CPU per GB of values: the client's (marginal: ``marginal_client_cpu``),
# the brokers', and the machine's (cores x wall): client + broker near the machine's = it was saturated
CLIENT_CPU = "client CPU s/GB (marginal)"
CPU_FIGURES = [("client_cpu_s_per_gb", CLIENT_CPU, False), ("broker_cpu_s_per_gb", "broker CPU s/GB", False),
               ("machine_cpu_s_per_gb", "machine CPU s/GB", False)]
FIGURES = {  # scenario -> figures reported (name, unit, higher is better)
    "1": [("mb_s", "MB/s", True), ("records_s", "records/s", True), *CPU_FIGURES],
    "2": [("mb_s", "MB/s", True), ("p50_ms", "p50 ms", False), ("p99_ms", "p99 ms", False),
          ("p999_ms", "p99.9 ms", False), *CPU_FIGURES],
    "3": [("mb_s", "MB/s", True), ("records_s", "records/s", True), *CPU_FIGURES],
    "4": [("p50_ms", "p50 ms", False), ("p99_ms", "p99 ms", False), ("p999_ms", "p99.9 ms", False)],
    "6": [("p50_ms", "p50 ms", False), ("p99_ms", "p99 ms", False)],
    "7": [("mb_s", "MB/s", True), ("records_s", "records/s", True), ("commit_p50_ms", "commit p50 ms", False),
          ("commit_p99_ms", "commit p99 ms", False), *CPU_FIGURES],
}

CPU_UNITS = [unit for _, unit, _ in CPU_FIGURES]
CPU_LABEL = "CPU s/GB: client (marginal) / broker / machine"  # the markdown's one row for a case's CPU_FIGURES
CPU_NOTE = ("CPU s/GB: CPU seconds per GB (10^9 bytes) of values over a run, of the client (scenarios 1-3: "
            "the Java client's JVM; 7: the harness's process, where confluent-kafka runs), marginal: "
            "(median CPU s of the runs − the case's warm-up run's) / (GB − the warm-up's GB), without what every "
            "run pays once (a JVM's start); of the brokers, and of the machine (cores × the run's wall seconds: "
            "what there was to share). "
            "A system's MB/s cannot exceed 1,000 × cores / (client + broker) (docs/performance.md, "
            "\"Clients and settings\").")
PLAIN_NOTE = ("Client CPU s/GB not marginal (no warm-up of the case, or no more CPU or bytes than it: "
              "the median of the runs' figures, the client's start included): ")


def marginal_client_cpu(runs: list[dict], warmup: dict | None) -> float | None:
    """The client's CPU s per GB of values beyond ``warmup`` (the same client on the same case with
    fewer records): (median CPU s of ``runs`` - the warm-up's) / (their GB - the warm-up's), which
    leaves out a run's fixed costs (a JVM's start: ~2 CPU s, 1-2 s/GB of a full run). None without
    a warm-up, or where the runs have no more CPU or bytes than it."""
    cpu = [r["client_cpu_s"] for r in runs if "client_cpu_s" in r and r.get("value_bytes")]
    if not warmup or not cpu:
        return None
    extra_cpu = statistics.median(cpu) - warmup["client_cpu_s"]
    extra_gb = (statistics.median(r["value_bytes"] for r in runs if r.get("value_bytes")) - warmup["value_bytes"]) / 1e9
    return round(extra_cpu / extra_gb, 2) if extra_cpu > 0 and extra_gb > 0 else None


def summarize(runs: list[dict], memory: dict, warmups: list[dict] = ()) -> list[dict]:
    """Each case's figures (``FIGURES``): medians of its runs, the client's CPU per GB marginal
    (``marginal_client_cpu`` with its warm-up of ``warmups``), or the median of its runs' where
    there is none (``plain``: those systems); scenario 5's memory per cluster shape."""
    warm = {(w["scenario"], w["case"], w["system"]): w for w in warmups}
    rows = []
    cases = []
    for r in runs:
        key = (r["scenario"], r["case"])
        if key not in cases and r["scenario"] in FIGURES and not r["case"].startswith("fill") and r["case"] != "fill":
            cases.append(key)
    for scenario, case in cases:
        for fig, unit, higher in FIGURES[scenario]:
            row = {"scenario": scenario, "case": case, "figure": unit, "higher_is_better": higher}
            for system in (KAFKA, ODRADEK):
                mine = [r for r in runs if (r["scenario"], r["case"], r["system"]) == (scenario, case, system)]
                vals = [r[fig] for r in mine if "error" not in r and fig in r]
                errs = [r["error"] for r in mine if "error" in r]
                row[system] = statistics.median(vals) if vals else None
                if unit == CLIENT_CPU and vals:
                    marginal = marginal_client_cpu([r for r in mine if "error" not in r], warm.get((scenario, case, system)))
                    if marginal is None:
                        row.setdefault("plain", []).append(system)
                    else:
                        row[system] = marginal
                row[f"{system}_values"] = vals
                row[f"{system}_errors"] = len(errs)
            row["ratio"] = (round(row[ODRADEK] / row[KAFKA], 2) if row[KAFKA] and row[ODRADEK] is not None else None)
            if scenario in PER_ROUND:
                row["per_round"] = per_round(runs, scenario, case, fig)
            rows.append(row)
    # scenario 5's CPU: each throughput case's "broker CPU s/GB" row (CPU_FIGURES) above
    for shape, systems in memory.items():
        row = {"scenario": "5", "case": f"peak broker RSS, {shape}", "figure": "MB (max VmHWM)", "higher_is_better": False}
        for system in (KAFKA, ODRADEK):
            hwm = [m.get("VmHWM") for m in systems.get(system, {}).values() if m.get("VmHWM")]
            row[system] = round(max(hwm)) if hwm else None
            row[f"{system}_values"] = [round(v) for v in hwm]
        row["ratio"] = round(row[ODRADEK] / row[KAFKA], 2) if row[KAFKA] and row[ODRADEK] is not None else None
        rows.append(row)
    return rows


def per_round(runs: list[dict], scenario: str, case: str, fig: str) -> list[dict]:
    """Each round's figure of both systems and its ratio (the e2e tail moves from round to round:
    a median of rounds hid a round where Odradek's p99 was behind)."""
    out = []
    for rnd in sorted({r["round"] for r in runs if (r["scenario"], r["case"]) == (scenario, case)}):
        got = {r["system"]: r.get(fig) for r in runs if (r["scenario"], r["case"], r["round"]) == (scenario, case, rnd)
               and "error" not in r}
        k, o = got.get(KAFKA), got.get(ODRADEK)
        out.append({"round": rnd, KAFKA: k, ODRADEK: o, "ratio": round(o / k, 2) if k and o is not None else None})
    return out


def fmt(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, float) and v < 100:
        return f"{v:,.2f}" if v < 10 else f"{v:,.1f}"
    return f"{v:,.0f}"


def fmt_ratio(ratio: float | None) -> str:
    return "—" if ratio is None else f"{ratio:.2f}"


def joined(rows: list[dict]) -> tuple[str, str, str]:
    """Kafka's figures, Odradek's and their ratios, of ``rows`` (one case's), each joined by " / "."""
    return (" / ".join(fmt(r.get(KAFKA)) for r in rows), " / ".join(fmt(r.get(ODRADEK)) for r in rows),
            " / ".join(fmt_ratio(r.get("ratio")) for r in rows))


def table_rows(summary: list[dict]) -> list[tuple[dict, str, list[dict]]]:
    """(first row, figure, rows) per line of the markdown table: a row each, but the CPU_FIGURES
    of a case on one line (``CPU_LABEL``) where its MB/s are."""
    lines, cpu_cases = [], set()
    for row in summary:
        key = (row["scenario"], row["case"])
        if row["figure"] not in CPU_UNITS:
            lines.append((row, row["figure"], [row]))
        elif key not in cpu_cases:
            cpu_cases.add(key)
            group = sorted((r for r in summary if (r["scenario"], r["case"]) == key and r["figure"] in CPU_UNITS),
                           key=lambda r: CPU_UNITS.index(r["figure"]))
            lines.append((row, CPU_LABEL, group))
    return lines


def markdown(report: dict) -> str:
    lines = [f"Measured {report['date']} at commit `{(report['environment'].get('commit') or '?')[:7]}`, "
             f"{report['environment']['cpus']} cores ({report['environment']['cpu']}), Kafka {report['kafka_version']}, "
             f"{report['rounds']} alternating rounds, medians; ratio = Odradek / Kafka. "
             f"Command: `{report['command']}`. Data: `{report['json']}`.", "",
             "| scenario | case | figure | Kafka | Odradek | Odradek/Kafka |",
             "| --- | --- | --- | ---: | ---: | ---: |"]
    for row, figure, rows in table_rows(report["summary"]):
        lines.append(f"| {row['scenario']} | {row['case']} | {figure} | {' | '.join(joined(rows))} |")
    for row in report["summary"]:
        if row.get("per_round"):
            rounds = "; ".join(f"round {r['round']} {fmt(r[KAFKA])} / {fmt(r[ODRADEK])} ({fmt_ratio(r['ratio'])})"
                               for r in row["per_round"])
            lines.append(f"\nScenario {row['scenario']} {row['figure']} per round (Kafka / Odradek, ratio): {rounds}.")
    if any(row["figure"] in CPU_UNITS for row in report["summary"]):
        lines.append(f"\n{CPU_NOTE}")
    plain = [f"{row['scenario']} {row['case']} ({', '.join(row['plain'])})" for row in report["summary"] if row.get("plain")]
    if plain:
        lines.append(f"\n{PLAIN_NOTE}{'; '.join(plain)}.")
    for scenario, why in report["not_runnable"].items():
        lines.append(f"\nNot runnable: {why}")
    for note in report["notes"]:
        lines.append(f"\n{note}")
    lines.append(f"\n![Odradek next to Kafka]({os.path.relpath(ROOT / report['chart'], DOC.parent)})")
    return "\n".join(lines) + "\n"


def save_result(name: str, result: dict) -> Path:
    """Print ``result`` and keep it as bench/results/<name>-<local time>.json."""
    text = json.dumps(result, indent=2)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}-{datetime.datetime.now().strftime('%Y-%m-%d-%H%M')}.json"
    path.write_text(text + "\n")
    return path


def write_doc(text: str, begin: str = BEGIN, end: str = END) -> None:
    """Replace what is between the markers ``begin`` and ``end`` of docs/performance.md (appended
    at its end when missing)."""
    doc = DOC.read_text() if DOC.exists() else f"# Performance\n\n{begin}\n{end}\n"
    if begin not in doc:
        doc += f"\n{begin}\n{end}\n"
    head, rest = doc.split(begin, 1)
    _, tail = rest.split(end, 1)
    DOC.write_text(f"{head}{begin}\n{text}{end}{tail}")


def chart(report: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [r for r in report["summary"] if r.get(KAFKA) is not None or r.get(ODRADEK) is not None]
    panels = [("Throughput (MB/s, higher is better)", [r for r in rows if r["figure"] == "MB/s"]),
              ("Latency (ms, lower is better)", [r for r in rows if r["figure"].endswith(" ms")]),
              ("Client and broker CPU s per GB (lower is better)",
               [r for r in rows if r["figure"] in CPU_UNITS[:2]]),
              ("Peak broker RSS MB (lower is better)", [r for r in rows if r["figure"].startswith("MB (")])]
    fig, axes = plt.subplots(2, 2, figsize=(15, 10))
    for ax, (title, data) in zip(axes.flat, panels):
        ax.set_title(title)
        if not data:
            ax.text(0.5, 0.5, "not measured", ha="center", va="center", transform=ax.transAxes)
            continue
        labels = [f"s{r['scenario']} {r['case'].replace('produce ', '')}"
                  + ("" if r["figure"] == "MB/s" or r["figure"].startswith("MB (") else
                     f" {r['figure'].replace(' CPU s/GB', '')}") for r in data]
        y = range(len(data))
        k = [r.get(KAFKA) or 0 for r in data]
        o = [r.get(ODRADEK) or 0 for r in data]
        ax.barh([i + 0.2 for i in y], k, height=0.4, label="Apache Kafka", color="#888888")
        ax.barh([i - 0.2 for i in y], o, height=0.4, label="Odradek", color="#2a7ab9")
        for i, r in enumerate(data):
            if r.get("ratio") is not None:
                ax.text(max(k[i], o[i]), i, f"  x{r['ratio']:.2f}", va="center", fontsize=8)
        ax.set_yticks(list(y))
        ax.set_yticklabels(labels, fontsize=8)
        ax.invert_yaxis()
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Odradek vs Apache Kafka {report['kafka_version']} — {report['date']} "
                 f"({report['rounds']} rounds, medians; xN = Odradek/Kafka)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def environment() -> dict:
    import confluent_kafka
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--", "lib", "services"], capture_output=True,
                                text=True, cwd=ROOT).stdout.strip())
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), platform.processor())
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    return {"cpus": os.cpu_count(), "cpu": cpu, "python": platform.python_version(), "java": java,
            "librdkafka": confluent_kafka.libversion()[0], "commit": commit, "odradek_tree_dirty": dirty}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.side_by_side", description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scenarios", default="1,2,3,4,5,6,7")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every record count")
    ap.add_argument("--quick", action="store_true", help="--rounds 1 --scale 0.05: a smoke run of the harness")
    ap.add_argument("--e2e-seconds", type=float, default=20)
    ap.add_argument("--e2e-rate", type=int, help="scenario 4 at this records/s (then scenario 2 runs only if asked)")
    ap.add_argument("--no-doc", action="store_true", help="do not rewrite the table in docs/performance.md")
    ap.add_argument("--output", type=Path, help="JSON path (default bench/results/side-by-side-<date>.json)")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds, args.scale, args.e2e_seconds = 1, 0.05, 8
    wanted = set(args.scenarios.split(","))

    apache_kafka.resolve()
    bench = Bench(args.rounds, args.scale)
    not_runnable: dict[str, str] = {}
    leftovers: list[str] = []
    root = Path(tempfile.mkdtemp(prefix="odradek-vs-kafka-"))
    try:
        if wanted & {"1", "3", "5"}:
            print("== 1 broker: Kafka (KRaft) and Odradek", flush=True)
            systems = start_systems(root, 1)
            try:
                if wanted & {"1", "5"}:
                    bench.scenario1(systems)
                if wanted & {"3", "5"}:
                    bench.scenario3(systems)
                bench.snapshot_memory("1 broker", systems)
            finally:
                for s in systems:
                    leftovers += s.stop()
        if wanted & {"2", "4", "6", "7"}:
            print("== 3 brokers: Kafka (KRaft) and Odradek", flush=True)
            systems = start_systems(root, 3)
            try:
                blocked = bench.scenario2(systems) if "2" in wanted or (not args.e2e_rate and "4" in wanted) else {}
                if wanted & {"4"}:
                    bench.scenario4(systems, blocked, args.e2e_seconds, args.e2e_rate)
                if "6" in wanted:
                    bench.scenario6(systems, blocked)
                if "7" in wanted:
                    bench.scenario7(systems, blocked)
                for name, why in blocked.items():
                    not_runnable["2"] = not_runnable["4"] = f"scenarios 2 and 4 on {name}: {why}"
                bench.snapshot_memory("3 brokers", systems)
            finally:
                for s in systems:
                    leftovers += s.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)

    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M")
    out = args.output or RESULTS / f"side-by-side-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    png = out.with_suffix(".png")
    report = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": "python -m bench.side_by_side " + " ".join(argv if argv is not None else sys.argv[1:]),
        "kafka_version": apache_kafka.KAFKA_VERSION, "rounds": args.rounds, "scale": args.scale,
        "producer_props": PRODUCER_PROPS, "environment": environment(),
        "json": str(out.relative_to(ROOT)) if out.is_relative_to(ROOT) else str(out),
        "chart": str(png.relative_to(ROOT)) if png.is_relative_to(ROOT) else str(png),
        "summary": summarize(bench.runs, bench.memory, bench.warmups), "not_runnable": not_runnable,
        "notes": bench.notes, "memory_mb": bench.memory, "runs": bench.runs, "warmups": bench.warmups,
        "leftover_processes_killed": leftovers}
    out.write_text(json.dumps(report, indent=2) + "\n")
    chart(report, png)
    table = markdown(report)
    print("\n" + table)
    if not args.no_doc:
        write_doc(table)
    print(f"wrote {out}, {png}" + ("" if args.no_doc else f", {DOC}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
