"""Profile Odradek's brokers with py-spy under one side-by-side scenario (issue 4's gaps).

    .venv/bin/python -m bench.profile_broker e2e --rate 12537 --seconds 20      # scenario 4
    .venv/bin/python -m bench.profile_broker produce --records 1000000          # scenario 1, p=1, 1 KiB
    .venv/bin/python -m bench.profile_broker consume --records 400000 --consumes 3   # scenario 3
    .venv/bin/python -m bench.profile_broker single --records 10000             # scenario 6

Starts an Odradek dev cluster (3 brokers for ``e2e`` and ``single``, 1 for ``produce``), runs
the same client as `bench.side_by_side` (AssignedClients e2e / ProducerPerformance; for
``single``, one acks=all record at a time after the side-by-side's 15,000-record warm-up), and meanwhile runs
``py-spy record --idle --format speedscope`` on every broker (needs root or ptrace rights):
every thread sampled at a steady rate, busy or not, so that samples are a timeline. Writes
under ``--out`` (default bench/results/profile-<scenario>-<time>/), per broker, the
speedscope profile (open it at speedscope.app) and ``<broker>.top.txt``: the event loop
thread's busy share, its longest busy stretches (the loop answers nothing meanwhile: the
stalls that make tail latency) and its top frames; the client's figures go to ``client.json``.
``summarize --out DIR`` rewrites the .top.txt files of an earlier run (from its profiles,
gzipped or not).
"""

from __future__ import annotations

import argparse
import collections
import datetime
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.round_trip import single_record_round_trip, warm_round_trips
from bench.side_by_side import CLK_TCK, RESULTS, OdradekSystem, assigned_client, measured, producer_performance

PY_SPY = Path(sys.executable).parent / "py-spy"
LOOP = "Runner.run (asyncio/runners.py)"   # the uvloop run loop: idle, or in its own C code
RATE = 200
TOP = 30
STALLS = 10


def start_py_spy(pid: int, out: Path, seconds: float) -> subprocess.Popen:
    argv = [str(PY_SPY), "record", "--pid", str(pid), "--format", "speedscope", "--rate", str(RATE),
            "--duration", str(int(seconds)), "--nonblocking", "--idle", "--output", str(out)]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def main_thread_samples(speedscope: Path) -> list[list[str]]:
    """The event loop thread's stacks (root first) as 'function (dir/file.py)', in time order."""
    raw = speedscope.read_bytes()
    doc = json.loads(gzip.decompress(raw) if speedscope.suffix == ".gz" else raw)
    frames = [f"{f['name']} ({'/'.join(Path(f['file'] or '?').parts[-2:])})" for f in doc["shared"]["frames"]]
    for profile in doc["profiles"]:
        stacks = [[frames[i] for i in sample] for sample in profile["samples"]]
        if any(LOOP in stack for stack in stacks[:50] + stacks[-50:]):
            return stacks
    return []


def busy(stack: list[str]) -> bool:
    """The loop is running Python code or blocked in a call made from it (not waiting in uvloop)."""
    return bool(stack) and stack[-1] != LOOP


def top_table(stacks: list[list[str]], leaf_only: bool) -> str:
    counts: collections.Counter[str] = collections.Counter()
    for stack in stacks:
        counts.update([stack[-1]] if leaf_only else sorted(set(stack)))
    return "\n".join(f"{100 * n / len(stacks):6.1f}%  {f}" for f, n in counts.most_common(TOP))


def stalls(stacks: list[list[str]]) -> list[tuple[int, int]]:
    """(first sample, length) of the longest runs of consecutive busy samples, longest first."""
    runs, start = [], None
    for i, stack in enumerate(stacks + [[LOOP]]):
        if busy(stack) and start is None:
            start = i
        elif not busy(stack) and start is not None:
            runs.append((start, i - start))
            start = None
    return sorted(runs, key=lambda r: -r[1])[:STALLS]


def describe_stall(stacks: list[list[str]], start: int, length: int) -> str:
    """The stall's most frequent stack below the loop, outermost first."""
    below = [tuple(s[s.index(LOOP) + 1:] if LOOP in s else s) for s in stacks[start:start + length]]
    stack, n = collections.Counter(below).most_common(1)[0]
    return (f"{length * 1000 / RATE:5.0f} ms at {start / RATE:5.1f} s ({100 * n // length}% of it in): "
            + " > ".join(f.split(" (")[0] for f in stack))


def cpu_split(pids: list[int]) -> dict[str, float]:
    """User and system CPU seconds of the processes, and how long their main (event loop)
    threads waited runnable for a CPU (/proc/<pid>/schedstat): busy samples that are not CPU."""
    user = system = waited_ns = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        user, system = user + int(fields[11]), system + int(fields[12])
        waited_ns += int(Path(f"/proc/{pid}/schedstat").read_text().split()[1])
    return {"broker_user_s": user / CLK_TCK, "broker_system_s": system / CLK_TCK,
            "broker_loop_runqueue_wait_s": waited_ns / 1e9}


def summarize(speedscope: Path) -> str:
    stacks = main_thread_samples(speedscope)
    busy_stacks = [s for s in stacks if busy(s)]
    if not busy_stacks:
        return "no busy samples of the event loop thread\n"
    return (f"event loop thread: {len(stacks)} samples at {RATE} Hz, {len(busy_stacks)} busy "
            f"({100 * len(busy_stacks) / len(stacks):.0f}%; the rest waiting in uvloop or running its C code)\n\n"
            f"## longest stretches of the loop busy without a break (requests wait meanwhile)\n"
            + "\n".join(describe_stall(stacks, *r) for r in stalls(stacks))
            + f"\n\n## self, % of busy samples\n{top_table(busy_stacks, True)}\n\n"
            f"## inclusive, % of busy samples\n{top_table(busy_stacks, False)}\n")


def write_summaries(out: Path) -> int:
    for profile in sorted(out.glob("*.speedscope.json*")):  # .gz: as committed under bench/results
        summary = summarize(profile)
        profile.with_name(profile.name.split(".speedscope.json")[0] + ".top.txt").write_text(summary)
        print(f"== {profile.name}\n" + "\n".join(summary.splitlines()[:30]))
    return 0


def run_time_s(pids: list[int]) -> float:
    """CPU seconds of every thread of the processes, to the nanosecond (/proc/<pid>/task/*/schedstat;
    /proc/<pid>/stat counts 10 ms ticks: 0.15-0.19 s for one 400 MB read)."""
    total = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError):
                pass
    return total / 1e9


def client_cpu_s() -> float:
    """CPU seconds (user + system) of the finished client processes (the JVM, its start included)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def consume_from_start(system: OdradekSystem, topic: str, records: int) -> dict:
    """One scenario-3 read of ``topic`` from the start, with the broker's CPU per GB of values
    (``broker_cpu_s`` in ticks, as side_by_side counts; ``broker_cpu_ns_s`` to the nanosecond; its
    user/system split in ticks), and the client's (the JVM's, its start included)."""
    from bench.ceiling import user_system_faults
    pids = system.broker_pids()
    before, client_before, (user, kernel, _) = run_time_s(pids), client_cpu_s(), user_system_faults(pids)
    result = measured(system, assigned_client, "consume", "--bootstrap", system.bootstrap, "--topic", topic,
                      "--partitions", "1", "--records", str(records))
    result["broker_cpu_ns_s"] = round(run_time_s(pids) - before, 4)
    gb = records * 1024 / 1e9
    user_after, kernel_after, _ = user_system_faults(pids)   # 10 ms ticks: the split, not the total
    result["broker_user_s_per_gb"] = round((user_after - user) / gb, 3)
    result["broker_system_s_per_gb"] = round((kernel_after - kernel) / gb, 3)
    result["broker_cpu_s_per_gb"] = round(result["broker_cpu_s"] / gb, 3)
    result["broker_cpu_ns_s_per_gb"] = round(result["broker_cpu_ns_s"] / gb, 3)
    result["client_cpu_s_per_gb"] = round((client_cpu_s() - client_before) / gb, 3)
    result["load"] = round(os.getloadavg()[0], 1)
    return result


def idle_cpu(system: OdradekSystem, seconds: float = 5) -> dict:
    """The broker's CPU per second while no client is connected (its timers, metadata, ZooKeeper
    session): part of every figure per GB, over the client's whole run (JVM start included)."""
    pids = system.broker_pids()
    before = run_time_s(pids)
    time.sleep(seconds)
    return {"idle_broker_cpu_s_per_s": round((run_time_s(pids) - before) / seconds, 4)}


THREE_BROKERS = ("e2e", "single")
SINGLE_TOPIC = "profile-single"


def warm_single(system: OdradekSystem) -> list[dict]:
    """``single``: the RF 3 topic made and its path warmed as scenario 6 warms it (not profiled)."""
    system.create_topic(SINGLE_TOPIC, 1, 3, {"min.insync.replicas": "2"})
    p50s = warm_round_trips(lambda: single_record_round_trip(system.bootstrap, SINGLE_TOPIC, 1000, 0))
    return [{"warm_up_chunk_p50_ms": p50s}]


def run_client(args: argparse.Namespace, system: OdradekSystem) -> dict:
    if args.scenario == "consume":
        return consume_from_start(system, "profile-consume", args.records)
    if args.scenario == "single":
        return measured(system, single_record_round_trip, system.bootstrap, SINGLE_TOPIC, args.records, 0)
    config = {"min.insync.replicas": "2"} if args.scenario == "e2e" else {}
    topic = f"profile-{args.scenario}"
    system.create_topic(topic, args.partitions, 3 if args.scenario == "e2e" else 1, config)
    if args.scenario == "e2e":
        return measured(system, assigned_client, "e2e", "--bootstrap", system.bootstrap, "--topic", topic,
                        "--partitions", str(args.partitions), "--rate", str(args.rate), "--seconds",
                        str(args.seconds), "--warmup", "3", "--size", "1024", "--acks", "all")
    return measured(system, producer_performance, system, topic, args.records, args.size, "1")


def fill_and_consume(args: argparse.Namespace, system: OdradekSystem) -> list[dict]:
    """``consume``: the partition filled (not measured), then ``--consumes`` reads without py-spy."""
    system.create_topic("profile-consume", 1, 1)
    producer_performance(system, "profile-consume", args.records, 1024, "1")
    runs = [idle_cpu(system)]
    runs += [consume_from_start(system, "profile-consume", args.records) for _ in range(args.consumes)]
    for run in runs:
        print(json.dumps(run), flush=True)
    return runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.profile_broker", description=__doc__.split("\n")[0])
    ap.add_argument("scenario", choices=["e2e", "produce", "consume", "single", "summarize"])
    ap.add_argument("--rate", type=int, default=12537, help="e2e: records/s")
    ap.add_argument("--seconds", type=float, default=20, help="e2e: client run time")
    ap.add_argument("--records", type=int, help="produce, consume: records (default 1,000,000); single: round trips (10,000)")
    ap.add_argument("--consumes", type=int, default=3, help="consume: unprofiled reads from the start")
    ap.add_argument("--size", type=int, default=1024, help="produce: value bytes")
    ap.add_argument("--partitions", type=int, help="default 6 (e2e), 1 (produce)")
    ap.add_argument("--profile-seconds", type=float, default=15, help="py-spy duration (from the client's start)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.scenario == "summarize":
        return write_summaries(args.out)
    args.partitions = args.partitions or (6 if args.scenario == "e2e" else 1)
    args.records = args.records or (10_000 if args.scenario == "single" else 1_000_000)
    out = args.out or RESULTS / f"profile-{args.scenario}-{datetime.datetime.now():%Y-%m-%d-%H%M}"
    out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="odradek-profile-"))
    system = OdradekSystem(root, 3 if args.scenario in THREE_BROKERS else 1)
    try:
        spies = {}
        def start_spies() -> None:
            for name, pid in system.pids.items():
                if name.startswith("broker-"):
                    spies[name] = start_py_spy(pid, out / f"{name}.speedscope.json", args.profile_seconds)
        system.create_topic("profile-warm-up", 1, 1)  # connections and imports warm before sampling
        unprofiled = (fill_and_consume(args, system) if args.scenario == "consume"
                      else warm_single(system) if args.scenario == "single" else [])
        if args.profile_seconds > 0:
            start_spies()
        pids = system.broker_pids()
        before = cpu_split(pids)
        result = run_client(args, system)
        result.update({k: round(v - before[k], 2) for k, v in cpu_split(pids).items()})
        if unprofiled:
            result = {"unprofiled": unprofiled, "profiled": result}
        for name, spy in spies.items():
            _, err = spy.communicate(timeout=args.profile_seconds + 60)
            if spy.returncode != 0:
                print(f"py-spy on {name} exited {spy.returncode}: {err[-500:]}", file=sys.stderr)
    finally:
        left = system.stop()
        shutil.rmtree(root, ignore_errors=True)
    result["command"] = "python -m bench.profile_broker " + " ".join(argv if argv is not None else sys.argv[1:])
    result["left_behind"] = left
    (out / "client.json").write_text(json.dumps(result, indent=2) + "\n")
    write_summaries(out)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
