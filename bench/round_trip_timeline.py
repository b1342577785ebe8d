"""Where the single acks=all record's round trip goes, step by step across the three brokers
(issue 33: the hops and wake-ups between the produce's arrival and its answer, against the
loopback round trip):

    .venv/bin/python -m bench.round_trip_timeline [--records 5000] [--json out.json] [--delay EVENT:US] [--detail]

Starts a 3-broker dev cluster whose brokers load ``bench.timeline_probes`` (see there: the
events, and what each costs), warms the path as scenario 6 does, then notes every event of
``--records`` round trips (RF 3, min.insync.replicas 2, confluent-kafka one record at a time).
Each round trip is the leader's events from the Produce frame read whole to its answer handed
to the socket, with every broker's events in between, in time order. Round trips with the same
sequence of events are grouped; the commonest sequences are printed as a timeline of medians
(µs after the Produce frame was read), with the time since the same broker's previous event.

Beside it: the loopback round trip of two processes that answer each other with the brokers'
own event loop (uvloop), 100-byte messages (``loopback_rtt_us``). The record's path has four
one-way hops (client to leader, leader to follower, follower to leader, leader to client):
about two such round trips; the rest of its time is CPU, or a wait for a core.

``--delay 'follower appended:30'``: every broker spins 30 µs after each such event (a what-if:
that step 30 µs longer); the p50's change against a run without says how much of that step's
time reaches the record (docs/performance.md, "What a step's time costs the record").
``--detail``: the steps inside the follower's pass and the appends are noted too (the answer
decoded, the batches validated, the next fetch built: ``bench.timeline_probes``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

from bench.round_trip import WARM_CHUNK, WARM_CHUNKS, single_record_round_trip, warm_round_trips

PROBES = Path(__file__).with_name("timeline_probes.py")
TOPIC = "timeline"
START, END = "Produce in", "Produce answer"
SHOWN = 2     # sequences printed


def read_events(prefix: Path) -> list[tuple[int, int, str]]:
    """(ns, pid, event) of every probe file ``<prefix>.<pid>``, in time order."""
    events = []
    for path in prefix.parent.glob(prefix.name + ".*"):
        pid = int(path.suffix[1:])
        for line in path.read_text().splitlines():
            ns, event = line.split(" ", 1)
            events.append((int(ns), pid, event))
    return sorted(events)


def round_trips(events: list[tuple[int, int, str]], leader: int, names: dict[int, str]
                ) -> list[tuple[tuple[str, ...], list[int]]]:
    """Per round trip on ``leader``: its sequence of '<broker>: <event>' and each event's ns after
    the Produce frame was read. A round trip overlapping events before any follower's first or
    after any follower's last note is left out (a probe file starts and ends at a signal)."""
    followers = {pid for _, pid, _ in events if pid != leader}
    if not followers:
        return []
    first = max(min(ns for ns, pid, _ in events if pid == f) for f in followers)
    last = min(max(ns for ns, pid, _ in events if pid == f) for f in followers)
    out, start, seq, offsets = [], None, [], []
    for ns, pid, event in events:
        if pid == leader and event == START:
            start, seq, offsets = ns, [], []
            continue
        if start is None:
            continue
        seq.append(f"{names.get(pid, pid)}: {event}")
        offsets.append(ns - start)
        if pid == leader and event == END:
            if first <= start and ns <= last:
                out.append((tuple(seq), offsets))
            start = None
    return out


def timelines(trips: list[tuple[tuple[str, ...], list[int]]], shown: int = SHOWN) -> list[dict]:
    """The ``shown`` commonest sequences: their share of the round trips and each event's median
    µs after the Produce frame was read."""
    groups: dict[tuple[str, ...], list[list[int]]] = collections.defaultdict(list)
    for seq, offsets in trips:
        groups[seq].append(offsets)
    out = []
    for seq, runs in sorted(groups.items(), key=lambda kv: -len(kv[1]))[:shown]:
        medians = [round(statistics.median(run[i] for run in runs) / 1000, 1) for i in range(len(seq))]
        out.append({"round_trips": len(runs), "share": round(len(runs) / len(trips), 3),
                    "events": [[event, us] for event, us in zip(seq, medians)]})
    return out


def format_timeline(timeline: dict) -> str:
    """One line per event: µs after the Produce frame was read, and since the same broker's
    previous event (the leader's first: since the frame was read; a follower's first: none)."""
    lines = [f"{timeline['round_trips']} round trips ({100 * timeline['share']:.0f}%):",
             f"  {'µs':>7} {'since':>7}  event"]
    last = {"leader": 0.0}
    for event, us in timeline["events"]:
        broker = event.split(":")[0]
        since = f"{us - last[broker]:+7.1f}" if broker in last else f"{'':7}"
        lines.append(f"  {us:7.1f} {since}  {event}")
        last[broker] = us
    return "\n".join(lines)


_ECHO = """
import asyncio, socket, sys, uvloop
class Echo(asyncio.Protocol):
    def connection_made(self, transport):
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.transport = transport
    def data_received(self, data):
        self.transport.write(data)
async def main():
    server = await asyncio.get_running_loop().create_server(Echo, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.sleep(3600)
uvloop.run(main())
"""


def loopback_rtt_us(count: int = 5000, size: int = 100) -> float:
    """The median round trip of ``size`` bytes to a uvloop echo server in another process (µs)."""
    server = subprocess.Popen([sys.executable, "-c", _ECHO], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            message, times = b"x" * size, []
            for _ in range(count):
                started = time.perf_counter_ns()
                sock.sendall(message)
                got = 0
                while got < size:
                    got += len(sock.recv(size - got))
                times.append(time.perf_counter_ns() - started)
        return round(statistics.median(times) / 1000, 1)
    finally:
        server.kill()
        server.wait()


def measure(records: int, root: Path, warm_chunks: int = WARM_CHUNKS, delay: str = "", detail: bool = False) -> dict:
    """The probed cluster's round trips (see the module doc); ``delay``: ``<event>:<µs>``;
    ``detail``: the probes' steps inside the follower's pass and the appends too."""
    from bench.side_by_side import OdradekSystem
    from odradek.dev.harness import partition_leaders
    probes = root / "probes"
    probes.mkdir()
    shutil.copy(PROBES, probes / "sitecustomize.py")
    prefix = root / "events" / "broker"
    prefix.parent.mkdir()
    path = os.pathsep.join(p for p in (str(probes), os.environ.get("PYTHONPATH")) if p)
    with mock.patch.dict(os.environ, {"PYTHONPATH": path, "ODRADEK_TIMELINE": str(prefix),
                                      "ODRADEK_TIMELINE_DELAY": delay, "ODRADEK_TIMELINE_DETAIL": "1" if detail else ""}):
        system = OdradekSystem(root, 3)   # its processes inherit the environment
    try:
        system.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
        warm_round_trips(lambda: single_record_round_trip(system.bootstrap, TOPIC, WARM_CHUNK, 0), warm_chunks)
        brokers = {int(name.split("-")[1]): pid for name, pid in system.pids.items() if name.startswith("broker-")}
        for pid in brokers.values():
            os.kill(pid, signal.SIGUSR1)
        _wait_for_files([Path(f"{prefix}-{pid}.on") for pid in brokers.values()])   # every broker noting
        result = single_record_round_trip(system.bootstrap, TOPIC, records, 0)
        for pid in brokers.values():
            os.kill(pid, signal.SIGUSR2)
        leader = partition_leaders(system.bootstrap, TOPIC)[0]
        _wait_for_files([Path(f"{prefix}.{pid}") for pid in brokers.values()])
    finally:
        system.stop()
    names = {pid: ("leader" if broker == leader else f"follower {broker}") for broker, pid in brokers.items()}
    events = read_events(prefix)
    if delay and not any(event == delay.rpartition(":")[0] for _, _, event in events):
        raise ValueError(f"--delay {delay!r}: no broker noted that event (the events: the timeline's)")
    trips = round_trips(events, brokers[leader], names)
    return {"records": records, "p50_ms": result["p50_ms"], "p99_ms": result["p99_ms"],
            "round_trips_probed": len(trips), "timelines": timelines(trips)}


def _wait_for_files(paths: list[Path], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        if time.monotonic() > deadline:
            raise RuntimeError(f"not every broker's probe answered within {timeout} s: {[str(p) for p in paths]}")
        time.sleep(0.05)


def _delay(text: str) -> str:
    event, _, us = text.rpartition(":")
    try:
        if event and float(us) > 0:
            return text
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"{text!r}: want EVENT:US, e.g. 'follower appended:30'")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m bench.round_trip_timeline", description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=5000)
    ap.add_argument("--warm-chunks", type=int, default=WARM_CHUNKS,
                    help=f"untimed chunks of {WARM_CHUNK:,} records first (default: scenario 6's)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--delay", type=_delay, metavar="EVENT:US",
                    help="spin US µs after each EVENT (e.g. 'follower appended:30'): a step made longer")
    ap.add_argument("--detail", action="store_true",
                    help="also note the steps inside the follower's pass and the appends (bench/timeline_probes.py)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="odradek-timeline-"))
    try:
        figures = measure(args.records, root, args.warm_chunks, args.delay or "", args.detail)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    figures["loopback_rtt_us"] = loopback_rtt_us()
    figures["delay"] = args.delay
    print((f"with {args.delay.rpartition(':')[2]} µs spun after each '{args.delay.rpartition(':')[0]}': "
           if args.delay else "")
          + f"p50 {figures['p50_ms']} ms, p99 {figures['p99_ms']} ms over {args.records} records; "
          f"{figures['round_trips_probed']} round trips probed; loopback round trip "
          f"{figures['loopback_rtt_us']} µs (the record's four hops: about two of these)\n")
    print("\n\n".join(format_timeline(t) for t in figures["timelines"]))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
