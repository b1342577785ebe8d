"""Moving data to a new broker, Odradek next to Apache Kafka: the same plan under the same
replication throttle, time to move and the produce latency of a steady acks=all producer meanwhile.

    .venv/bin/python -m bench.rebalance [--fill-mb 400] [--partitions 12] [--rf 2]
        [--throttle 10000000] [--rate 200] [--scale 1] [--no-doc]

On each system in turn (Odradek first: its controller makes the plan): 3 brokers, a topic of
``--partitions`` partitions at ``--rf`` filled with ``--fill-mb`` MB of 1 KiB values
(ProducerPerformance, acks=all), then a 4th broker (Odradek: ``odradek dev start 4``; Kafka: node 4
of a 4-node KRaft cluster, stopped before the topic is created and started again here), a steady
acks=all producer on the topic (confluent-kafka, ``--rate`` records/s of 1 KiB), and the move:

- Odradek: ``odradek rebalance --add-brokers 4 --throttle T --json`` (the controller plans and
  executes); its proposal's moves are the plan;
- Kafka: the same moves as ``kafka-reassign-partitions --execute --throttle T`` (Kafka's
  ReassignPartitionsCommand with its reassignment JSON), then ``--verify`` until every
  reassignment is complete (which removes the throttle), as Kafka's documentation says.

The topic starts with the same replica lists on both (Kafka's is created with Odradek's
assignment), so the moves are the same. Figures, for both:

- time to move: from the first metadata answer showing a partition reassigning to the first one
  showing every partition on its target replicas, all in sync (metadata polled every 0.25 s,
  the same client for both); the command's wall time too;
- bytes moved: the ``.log`` bytes of the topic on broker 4 afterwards;
- the throttle's ideal time: for every broker, the bytes it receives as a new replica
  (follower throttle) and the bytes it sends as the moving partitions' leader (leader throttle,
  counted once per new replica), the largest of these over the throttle; here every new replica
  is on broker 4, so it is broker 4's bytes in over T; the ratio is time to move / ideal;
- produce p50/p99: the steady producer's send-to-acknowledgement latency of the records sent
  while moving (and of those before, for reference).

``--scale`` multiplies ``--fill-mb`` (full-size runs outside CI); ``--kafka-again RESULTS_JSON``
runs Kafka alone with an earlier run's plan. Each run records the steady producer's median
latency second by second (``latency_by_second``): a producer already behind before the move
makes goal 2 "not comparable". Results:
``bench/results/rebalance-<date>.json`` and the table between the rebalance markers in
docs/performance.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

from bench import apache_kafka
from bench.reporting import publish, report_head, uptime
from bench.side_by_side import KAFKA, ODRADEK, RESULTS, KafkaSystem, OdradekSystem, System

TOPIC = "moving"
RECORD_BYTES = 1024
NEW_BROKER = 4
BEGIN, END = "<!-- rebalance:begin -->", "<!-- rebalance:end -->"
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
POLL_S = 0.25
DEADLINE_S = 1800
BEHIND_MS = 1000   # a steady producer's p50 before the move above this: it fell behind, no figure to compare


# -- the plan (pure) -----------------------------------------------------------------------------

def kafka_reassignment(moves: list[dict]) -> dict:
    """Kafka's reassignment JSON (``kafka-reassign-partitions --reassignment-json-file``) for
    the proposal's moves (``topic``, ``partition``, ``after``)."""
    return {"version": 1, "partitions": [{"topic": m["topic"], "partition": m["partition"],
                                          "replicas": list(m["after"])} for m in moves]}


def ideal_seconds(moves: list[dict], leaders: dict[tuple[str, int], int], sizes: dict[tuple[str, int], int],
                  throttle: float) -> float:
    """The throttle's lower bound on the time to move: every new replica copies its partition's
    ``sizes`` bytes from the partition's leader; a broker receives at most ``throttle`` bytes/s
    (follower throttle) and its leaders send at most ``throttle`` bytes/s (leader throttle), so
    the busiest broker in either direction decides."""
    into: dict[int, int] = defaultdict(int)
    out: dict[int, int] = defaultdict(int)
    for m in moves:
        key = (m["topic"], m["partition"])
        for broker in (b for b in m["after"] if b not in m["before"]):
            into[broker] += sizes[key]
            out[leaders[key]] += sizes[key]
    return max([*into.values(), *out.values(), 0]) / throttle


def latency_figures(samples: list[tuple[float, float]], start: float, end: float) -> dict:
    """p50/p99 (ms) of the latencies whose send time (monotonic) is within [start, end]."""
    window = sorted(ms for sent, ms in samples if start <= sent <= end)
    if not window:
        return {"records": 0, "p50_ms": None, "p99_ms": None}
    return {"records": len(window), "p50_ms": round(statistics.median(window), 2),
            "p99_ms": round(window[int(0.99 * (len(window) - 1))], 2), "max_ms": round(window[-1], 2)}


# -- clients -------------------------------------------------------------------------------------

class SteadyProducer(threading.Thread):
    """acks=all at a fixed rate of 1 KiB records, round robin over the partitions; keeps each
    record's (send time, latency to its acknowledgement in ms)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.partitions, self.rate = bootstrap, topic, partitions, rate
        self.samples: list[tuple[float, float]] = []
        self.errors: list[str] = []
        self.halt = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Producer
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 1,
                             "enable.idempotence": False})
        value, sent, started = b"v" * RECORD_BYTES, 0, time.monotonic()
        while not self.halt.is_set():
            due = started + sent / self.rate
            if time.monotonic() < due:
                producer.poll(max(0.0, min(0.005, due - time.monotonic())))  # a negative timeout blocks
                continue
            t0 = time.monotonic()
            producer.produce(self.topic, value, partition=sent % self.partitions,
                             on_delivery=lambda err, _msg, t0=t0: self._delivered(err, t0))
            producer.poll(0)
            sent += 1
        if producer.flush(60):
            self.errors.append("records not acknowledged within 60 s of the end")

    def _delivered(self, err, t0: float) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.samples.append((t0, 1000 * (time.monotonic() - t0)))


def assignment(system: System, topic: str) -> dict[int, tuple[tuple[int, ...], int, tuple[int, ...]]]:
    """partition -> (replicas, leader, isr) from a metadata answer."""
    md = system.admin().list_topics(topic, timeout=30)
    return {p.id: (tuple(p.replicas), p.leader, tuple(p.isrs)) for p in md.topics[topic].partitions.values()}


def new_replicas(moves: list[dict], broker: int) -> int:
    """How many replicas ``broker`` gains by ``moves``."""
    return sum(broker in m["after"] and broker not in m["before"] for m in moves)


def watch_move(system: System, topic: str, initial: dict[int, tuple], rf: int, gained: int) -> tuple[float, float]:
    """(first seen reassigning, first seen done) as monotonic times from metadata polls: done
    when broker 4 holds ``gained`` replicas and every partition has ``rf`` replicas, all in sync
    (the plan's own partitions are not known in advance on Odradek: the command plans afresh).
    ``initial``: the assignment read before the command started."""
    started = None
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        now, a = time.monotonic(), assignment(system, topic)
        if started is None and any(set(r) != set(initial[p][0]) for p, (r, _, _) in a.items()):
            started = now
        if sum(NEW_BROKER in r for r, _, _ in a.values()) == gained and all(
                len(r) == rf and set(r) <= set(isr) for r, _, isr in a.values()):
            return started or now, now
        time.sleep(POLL_S)
    raise TimeoutError(f"{system.name}: the moves were not done after {DEADLINE_S} s")


def wait_led(system: System, partitions: int) -> None:
    deadline = time.monotonic() + 120
    while len(a := assignment(system, TOPIC)) != partitions or any(leader < 0 for _, leader, _ in a.values()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{system.name}: {TOPIC} has no leader for every partition")
        time.sleep(0.2)


def log_bytes_on(root: Path, topic: str) -> int:
    """The ``.log`` bytes of ``topic``'s partition directories under a broker's ``root``."""
    return sum(f.stat().st_size for d in root.rglob(f"{topic}-*") if d.is_dir() for f in d.glob("*.log"))


# -- one system ----------------------------------------------------------------------------------

class Measure:
    """The part both runs share: the steady producer from ``--lead-s`` before the move, and the
    figures once it is done."""

    def __init__(self, args, system: System, moves: list[dict], leaders: dict[int, int]) -> None:
        self.args, self.system, self.moves, self.leaders = args, system, moves, leaders
        self.producer = SteadyProducer(system.bootstrap, TOPIC, args.partitions, args.rate)

    def before_move(self) -> float:
        self.producer.start()
        time.sleep(self.args.lead_s)
        return time.monotonic()

    def figures(self, began: float, window: tuple[float, float], command_s: float, broker4: Path) -> dict:
        time.sleep(2)  # the records sent last before the end get their acknowledgements
        self.producer.halt.set()
        self.producer.join(90)
        start, end = window
        moved = log_bytes_on(broker4, TOPIC)
        per_partition = moved // max(1, sum(len(set(m["after"]) - set(m["before"])) for m in self.moves))
        sizes = {(m["topic"], m["partition"]): per_partition for m in self.moves}
        ideal = ideal_seconds(self.moves, {(TOPIC, p): b for p, b in self.leaders.items()}, sizes, self.args.throttle)
        return {"system": self.system.name, "move_s": round(end - start, 2), "command_s": round(command_s, 2),
                "bytes_moved": moved, "ideal_s": round(ideal, 2),
                "ratio": round((end - start) / ideal, 3) if ideal else None,
                "produce_moving": latency_figures(self.producer.samples, start, end),
                "produce_before": latency_figures(self.producer.samples, began - self.args.lead_s, start),
                "producer_errors": self.producer.errors[:5], "latency_by_second": self.timeline(began - self.args.lead_s)}

    def timeline(self, since: float) -> list[list[float]]:
        """[second since the producer started, records sent in it, their median latency in ms]."""
        seconds: dict[int, list[float]] = defaultdict(list)
        for sent, ms in self.producer.samples:
            seconds[int(sent - since)].append(ms)
        return [[s, len(v), round(statistics.median(v), 1)] for s, v in sorted(seconds.items())]


def fill(system: System, args) -> None:
    """``--fill-mb`` (times ``--scale``) of 1 KiB values, partition by partition in turn (every
    partition the same size on both systems: Kafka's adaptive partitioner would favour the
    faster brokers), acks=all; then wait until every replica is in sync."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": system.bootstrap, "acks": "all", "linger.ms": 5,
                         "batch.size": 262144, "enable.idempotence": False})
    value = b"f" * RECORD_BYTES
    for i in range(int(args.fill_mb * args.scale * 1e6 / RECORD_BYTES)):
        while True:
            try:
                producer.produce(TOPIC, value, partition=i % args.partitions)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(600):
        raise RuntimeError(f"{system.name}: the fill was not acknowledged within 600 s")
    deadline = time.monotonic() + 600
    while not all(set(r) == set(isr) for r, _, isr in assignment(system, TOPIC).values()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{system.name}: replicas not in sync after the fill")
        time.sleep(1)


def run_odradek(root: Path, args) -> tuple[dict, list[dict], dict[int, list[int]]]:
    """The Odradek run; returns its figures, the executed plan's moves and the topic's replica
    lists before them (Kafka's topic starts from those)."""
    system = OdradekSystem(root, 3)
    try:
        system.create_topic(TOPIC, args.partitions, args.rf)
        fill(system, args)
        initial = assignment(system, TOPIC)
        assert f"broker-{NEW_BROKER} started" in system.cluster.run("start", str(NEW_BROKER)).stdout
        system.cluster.refresh()
        dry = json.loads(subprocess.run(_odradek_argv(system, "--dry-run"), capture_output=True, text=True,
                                        timeout=300, stdin=subprocess.DEVNULL, check=True).stdout)
        measure = Measure(args, system, dry["moves"], {p: leader for p, (_, leader, _) in initial.items()})
        began = measure.before_move()
        proc = subprocess.Popen(_odradek_argv(system, "--throttle", str(args.throttle)), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        window = watch_move(system, TOPIC, initial, args.rf, new_replicas(dry["moves"], NEW_BROKER))
        out, err = proc.communicate(timeout=DEADLINE_S)
        command_s = time.monotonic() - began
        if proc.returncode != 0:
            raise RuntimeError(f"odradek rebalance exited {proc.returncode}:\n{out[-2000:]}\n{err[-2000:]}")
        executed = json.loads(out)["proposal"]   # planned afresh by the command: the moves given to Kafka
        measure.moves = executed["moves"]
        result = measure.figures(began, window, command_s, system.cluster.data_dir / f"broker-{NEW_BROKER}")
        result["planned_bytes"] = executed["bytes_to_move"]
        return result, executed["moves"], {p: list(r) for p, (r, _, _) in sorted(initial.items())}
    finally:
        system.stop()


def _odradek_argv(system: OdradekSystem, *extra: str) -> list[str]:
    return [sys.executable, "-m", "odradek.cli", "rebalance", "--data-dir", str(system.cluster.data_dir),
            "--add-brokers", str(NEW_BROKER), "--json", *extra]


def run_kafka(root: Path, args, moves: list[dict], initial: dict[int, list[int]]) -> dict:
    """The Kafka run: the topic created with ``initial``'s replica lists while node 4 is down,
    then node 4 started and ``moves`` executed by kafka-reassign-partitions."""
    system = KafkaSystem(root, NEW_BROKER)
    try:
        system.cluster.stop_node(NEW_BROKER)
        apache_kafka.run_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", system.bootstrap,
                              "--create", "--topic", TOPIC, "--replica-assignment",
                              ",".join(":".join(map(str, initial[p])) for p in sorted(initial)), check=True)
        wait_led(system, args.partitions)
        fill(system, args)
        leaders = {p: leader for p, (_, leader, _) in assignment(system, TOPIC).items()}
        system.cluster.start_node(NEW_BROKER)
        plan = root / "kafka-reassignment.json"
        plan.write_text(json.dumps(kafka_reassignment(moves)))
        common = ("--bootstrap-server", system.bootstrap, "--reassignment-json-file", str(plan))
        measure = Measure(args, system, moves, leaders)
        began = measure.before_move()
        before = assignment(system, TOPIC)
        execute = subprocess.Popen(apache_kafka.tool_argv(REASSIGN, *common, "--execute", "--throttle", str(args.throttle)),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   stdin=subprocess.DEVNULL)
        window = watch_move(system, TOPIC, before, args.rf, new_replicas(moves, NEW_BROKER))
        if execute.wait(120) != 0:
            raise RuntimeError(f"kafka-reassign-partitions --execute exited {execute.returncode}: "
                               f"{execute.stdout.read()[-2000:]} {execute.stderr.read()[-2000:]}")
        deadline = time.monotonic() + DEADLINE_S
        while "is still in progress" in (out := apache_kafka.run_tool(REASSIGN, *common, "--verify", check=True).stdout):
            if time.monotonic() > deadline:
                raise TimeoutError(f"kafka-reassign-partitions --verify: still in progress:\n{out[-2000:]}")
            time.sleep(1)
        command_s = time.monotonic() - began
        return measure.figures(began, window, command_s, system.cluster.dir / f"node-{NEW_BROKER}")
    finally:
        system.stop()


# -- report --------------------------------------------------------------------------------------

def fmt(v, digits: int = 1) -> str:
    return "—" if v is None else f"{v:,.{digits}f}"


def markdown(report: dict) -> str:
    rows = {r["system"]: r for r in report["runs"]}
    k, o = rows.get(KAFKA, {}), rows.get(ODRADEK, {})

    def line(label: str, get, digits: int = 1) -> str:
        kv, ov = get(k) if k else None, get(o) if o else None
        ratio = f"{ov / kv:.2f}" if kv and ov is not None else "—"
        return f"| {label} | {fmt(kv, digits)} | {fmt(ov, digits)} | {ratio} |"

    a = report["args"]
    lines = [f"Measured {report['date']} at commit `{(report['environment'].get('commit') or '?')[:7]}`, "
             f"{report['environment']['cpus']} shared cores, Kafka {report['kafka_version']}: 3 brokers, topic of "
             f"{a['partitions']} partitions RF {a['rf']} filled with {a['fill_mb'] * a['scale']:.0f} MB of 1 KiB "
             f"values, broker 4 added, {report['moves']} partitions moved onto it at a throttle of "
             f"{a['throttle'] / 1e6:g} MB/s, a steady acks=all producer of {a['rate']:g} records/s of 1 KiB "
             f"meanwhile. Command: `{report['command']}`. Machine load (`uptime`) before: {report['load_before']}; "
             f"after: {report['load_after']}. Data: `{report['json']}`.", "",
             "| figure | Kafka | Odradek | Odradek/Kafka |", "| --- | ---: | ---: | ---: |",
             line("time to move (s)", lambda r: r["move_s"]),
             line("command until done (s)", lambda r: r["command_s"]),
             line("bytes moved (MB, on broker 4)", lambda r: r["bytes_moved"] / 1e6),
             line("throttle's ideal time (s)", lambda r: r["ideal_s"]),
             line("time to move / ideal", lambda r: r["ratio"], 2),
             line("produce p50 while moving (ms)", lambda r: r["produce_moving"]["p50_ms"], 2),
             line("produce p99 while moving (ms)", lambda r: r["produce_moving"]["p99_ms"], 2),
             line("produce p50 before moving (ms)", lambda r: r["produce_before"]["p50_ms"], 2),
             line("produce p99 before moving (ms)", lambda r: r["produce_before"]["p99_ms"], 2)]
    lines += ["", *report["notes"]]
    return "\n".join(lines) + "\n"


def goals(runs: dict[str, dict]) -> list[str]:
    """The issue's two goals, met or not, in words."""
    notes = []
    o, k = runs.get(ODRADEK), runs.get(KAFKA)
    if o and o.get("ratio"):
        notes.append(f"Goal 1, moving time within 10% of the throttle's ideal: Odradek {o['ratio']:.2f}x the ideal, "
                     + ("met." if o["ratio"] <= 1.10 else "not met.")
                     + (f" Kafka: {k['ratio']:.2f}x." if k and k.get("ratio") else ""))
    if o and k and o["produce_moving"]["p99_ms"] is not None and k["produce_moving"]["p99_ms"] is not None:
        op, kp = o["produce_moving"]["p99_ms"], k["produce_moving"]["p99_ms"]
        behind = [r["system"] for r in (o, k) if (r["produce_before"]["p50_ms"] or 0) > BEHIND_MS]
        notes.append(f"Goal 2, produce p99 while moving <= Kafka's: {op:.1f} ms vs {kp:.1f} ms, "
                     + (f"not comparable: the producer of {', '.join(behind)} was already behind before the move "
                        f"(p50 above {BEHIND_MS / 1000:g} s)." if behind else "met." if op <= kp else "not met."))
    return notes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.rebalance", description=__doc__.split("\n")[0])
    ap.add_argument("--fill-mb", type=float, default=400, help="MB of 1 KiB values in the topic")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies --fill-mb (full-size runs)")
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--rf", type=int, default=2, choices=(2, 3))
    ap.add_argument("--throttle", type=int, default=10_000_000, help="bytes/s")
    ap.add_argument("--rate", type=float, default=200, help="the steady producer's records/s")
    ap.add_argument("--lead-s", type=float, default=5, help="seconds of the steady producer before the move")
    ap.add_argument("--kafka-again", type=Path, metavar="RESULTS_JSON",
                    help="run Kafka alone with that earlier run's plan (its Odradek figures are kept)")
    ap.add_argument("--no-doc", action="store_true", help="do not rewrite the section in docs/performance.md")
    ap.add_argument("--output", type=Path, help="JSON path (default bench/results/rebalance-<date>.json)")
    args = ap.parse_args(argv)

    apache_kafka.resolve()
    load_before = uptime()
    root = Path(tempfile.mkdtemp(prefix="odradek-rebalance-"))
    try:
        if args.kafka_again:   # Kafka alone, with an earlier run's plan and Odradek figures
            earlier = json.loads(args.kafka_again.read_text())
            odradek = next(r for r in earlier["runs"] if r["system"] == ODRADEK)
            moves, initial = earlier["plan"], {int(p): r for p, r in earlier["initial_assignment"].items()}
        else:
            print("== Odradek: 3 brokers, fill, `odradek dev start 4`, `odradek rebalance --add-brokers 4`", flush=True)
            odradek, moves, initial = run_odradek(root, args)
        print(json.dumps(odradek), flush=True)
        print("== Kafka: the same topic and moves, kafka-reassign-partitions --execute/--verify", flush=True)
        kafka = run_kafka(root, args, moves, initial)
        print(json.dumps(kafka), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    out = args.output or RESULTS / f"rebalance-{datetime.datetime.now():%Y-%m-%d-%H%M}.json"
    runs = {ODRADEK: odradek, KAFKA: kafka}
    command = "python -m bench.rebalance " + " ".join(argv if argv is not None else sys.argv[1:])
    report = {**report_head(command, apache_kafka.KAFKA_VERSION, args, load_before, out),
              "moves": len(moves), "plan": moves, "initial_assignment": initial, "runs": list(runs.values()),
              "notes": goals(runs)}
    publish(report, out, markdown(report), BEGIN, END, doc=not args.no_doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
