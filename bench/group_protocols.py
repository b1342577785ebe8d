"""``python -m bench.groups --compare``: a 50-member group's rebalances, classic against KIP-848's
consumer protocol, on Odradek and on Apache Kafka 4.x (KRaft); what is measured is in
bench/groups.py's docstring. This module owns the runs (one system after the other, one JVM of
GroupMembers per protocol), the figures from GroupMembers' ``GROUPS {json}`` lines, and the
results file and table."""

from __future__ import annotations

import datetime
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench import apache_kafka
from bench.apache_kafka import KAFKA4_SERVER_POM, KafkaCluster
from bench.reporting import publish, report_head, uptime
from bench.side_by_side import KAFKA, ODRADEK, RESULTS, KafkaSystem, OdradekSystem, System

TOPIC = "groups"
BEGIN, END = "<!-- groups:begin -->", "<!-- groups:end -->"
MARK = "GROUPS "
# protocol name -> GroupMembers' --protocol and --assignor
PROTOCOLS = {"classic": ("classic", "default"), "cooperative": ("classic", "cooperative-sticky"),
             "consumer": ("consumer", "default")}
LABELS = {"classic": "classic, range (eager; Java's default)", "cooperative": "classic, cooperative-sticky",
          "consumer": "consumer (KIP-848)"}
NO_DELAY = {"group.initial.rebalance.delay.ms": "0"}  # as bench.apache_kafka's clusters have it
FIGURES = ("settled_s", "resumed_s", "member_pause_p50_ms", "member_pause_max_ms", "group_pause_ms")


def add_arguments(ap) -> None:
    ap.add_argument("--members", type=int, default=50)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--rate", type=int, default=1000, help="records/s produced meanwhile, round robin")
    ap.add_argument("--protocols", default="classic,consumer", help=f"of {','.join(PROTOCOLS)}")
    ap.add_argument("--systems", default=f"{ODRADEK},{KAFKA}")
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--deadline-s", type=float, default=300, help="per change, until it must have settled")
    ap.add_argument("--no-doc", action="store_true", help="do not rewrite the table in docs/performance.md")
    ap.add_argument("--output", type=Path, help="JSON path (default bench/results/groups-<date>.json)")
    ap.add_argument("--keep", type=Path, metavar="DIR", help="run the clusters under DIR and keep it (their logs)")


class Kafka4System(KafkaSystem):
    """Kafka 4.x's KRaft nodes (bench/kafka4/server/pom.xml) instead of 3.9's."""

    def __init__(self, root: Path, brokers: int) -> None:
        self.cluster = KafkaCluster(root / f"kafka4-{brokers}", nodes=brokers, pom=KAFKA4_SERVER_POM).start(NO_DELAY)
        self.bootstrap = self.cluster.bootstrap


def start_system(name: str, root: Path, brokers: int) -> System:
    if name == KAFKA:
        return Kafka4System(root, brokers)
    return OdradekSystem(root, brokers, extra=tuple(x for k, v in NO_DELAY.items() for x in ("--config", f"{k}={v}")))


# -- one group -----------------------------------------------------------------------------------

def parse_events(stdout: str) -> list[dict]:
    """GroupMembers' ``GROUPS {json}`` lines (the rest of its output is the clients' logging)."""
    return [json.loads(line[len(MARK):]) for line in stdout.splitlines() if line.startswith(MARK)]


def run_group(bootstrap: str, protocol: str, args, group: str) -> dict:
    """One JVM of ``--members`` consumers in ``group``; its events, and the failure if it stopped."""
    wire, assignor = PROTOCOLS[protocol]
    argv = apache_kafka.tool_argv(
        "GroupMembers", "--bootstrap", bootstrap, "--topic", TOPIC, "--partitions", str(args.partitions),
        "--group", group, "--protocol", wire, "--assignor", assignor, "--members", str(args.members),
        "--rounds", str(args.rounds), "--rate", str(args.rate), "--deadline-s", str(args.deadline_s),
        jvm=apache_kafka.TOOL_JVM, pom=KAFKA4_SERVER_POM)
    started = time.monotonic()
    budget = args.deadline_s * (2 * args.rounds + 1) + 120
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=budget, stdin=subprocess.DEVNULL)
        stdout, stderr, rc = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        stdout, stderr, rc = _text(e.stdout), _text(e.stderr), None
    events = parse_events(stdout)
    failure = next((e for e in events if "error" in e), None)
    if failure is None and rc != 0:
        failure = {"error": f"GroupMembers exited {rc}", "stderr": stderr[-3000:]}
    return {"protocol": protocol, "events": [e for e in events if "error" not in e], "failure": failure,
            "wall_s": round(time.monotonic() - started, 1)}


def _text(b) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


def run_system(name: str, root: Path, args) -> list[dict]:
    print(f"== {name}: {args.brokers} brokers, topic of {args.partitions} partitions", flush=True)
    system = start_system(name, root, args.brokers)
    runs = []
    try:
        system.create_topic(TOPIC, args.partitions, 1)
        for protocol in args.protocols.split(","):
            load = uptime()  # the machine is shared: each run's load, not only the whole bench's
            run = run_group(system.bootstrap, protocol, args, f"bench-{protocol}")
            run.update(system=name, load_before=load, load_after=uptime())
            print(json.dumps(run), flush=True)
            runs.append(run)
    finally:
        left = system.stop()
        if left:
            print(f"  ({name}: left behind: {left})", flush=True)
    return runs


# -- figures -------------------------------------------------------------------------------------

def summarize(runs: list[dict]) -> list[dict]:
    """Per (system, protocol, change: join or leave) the median and max of each figure over the rounds."""
    rows = []
    for run in runs:
        for change in ("form", "join", "leave"):
            events = [e for e in run["events"] if e["event"] == change]
            if not events:
                continue
            row = {"system": run["system"], "protocol": run["protocol"], "change": change, "n": len(events)}
            for fig in FIGURES:
                values = [e[fig] for e in events if fig in e]
                if values:
                    row[fig] = {"median": statistics.median(values), "max": max(values)}
            rows.append(row)
    return rows


def cell(row: dict | None, fig: str, digits: int) -> str:
    if row is None or fig not in row:
        return "—"
    v = row[fig]
    if row["n"] == 1:
        return f"{v['median']:,.{digits}f}"
    return f"{v['median']:,.{digits}f} ({v['max']:,.{digits}f})"


def markdown(report: dict) -> str:
    a = report["args"]
    lines = [f"Measured {report['date']} at commit `{report['environment']['commit'][:7]}`, "
             f"{report['environment']['cpus']} shared cores, one system after the other: Odradek "
             f"({a['brokers']} dev brokers) and Apache Kafka {report['kafka_version']} ({a['brokers']} KRaft nodes). "
             f"{a['members']} Kafka {report['kafka_version']} Java consumers in one JVM, topic of {a['partitions']} "
             f"partitions, {a['rate']} records/s produced meanwhile; {a['rounds']} rounds of one member joining, "
             f"then the oldest leaving. Medians over the rounds, the worst in brackets. Command: "
             f"`{report['command']}`. Machine load (`uptime`) before: {report['load_before']}; after: "
             f"{report['load_after']}. Data: `{report['json']}`.", "",
             "| change | protocol | system | settled (s) | resumed (s) | others' pause, median member (ms) "
             "| others' pause, worst member (ms) | no member consuming (ms) |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    order = {"form": 0, "join": 1, "leave": 2}
    for row in sorted(report["summary"], key=lambda r: (order[r["change"]], list(PROTOCOLS).index(r["protocol"]),
                                                        r["system"] != ODRADEK)):
        change = f"{row['change']}: {a['members']} start" if row["change"] == "form" else row["change"]
        lines.append(f"| {change} | {LABELS[row['protocol']]} | {row['system']} | {cell(row, 'settled_s', 2)} "
                     f"| {cell(row, 'resumed_s', 2)} | {cell(row, 'member_pause_p50_ms', 0)} "
                     f"| {cell(row, 'member_pause_max_ms', 0)} | {cell(row, 'group_pause_ms', 0)} |")
    for run in report["runs"]:
        if run["failure"]:
            lines += ["", f"**{run['system']}, {LABELS[run['protocol']]}: did not finish**: "
                          f"`{json.dumps(run['failure'])[:1500]}`"]
    return "\n".join(lines) + "\n"


def run(args, argv: list[str]) -> int:
    apache_kafka.resolve(pom=KAFKA4_SERVER_POM)
    load_before = uptime()
    root = args.keep or Path(tempfile.mkdtemp(prefix="odradek-groups-"))
    runs: list[dict] = []
    try:
        for name in args.systems.split(","):
            runs += run_system(name, root, args)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    out = args.output or RESULTS / f"groups-{datetime.datetime.now():%Y-%m-%d-%H%M}.json"
    report = {**report_head("python -m bench.groups " + " ".join(argv), apache_kafka.pom_version(KAFKA4_SERVER_POM),
                            args, load_before, out), "runs": runs, "summary": summarize(runs)}
    publish(report, out, markdown(report), BEGIN, END, doc=not args.no_doc)
    return 0 if not any(r["failure"] for r in runs) else 1
