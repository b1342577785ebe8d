"""bench/profile_broker.py's reading of a py-spy timeline: which samples are the event loop at
work, its longest busy stretches, and gzipped profiles (as committed under bench/results)."""

import gzip
import json

from bench.profile_broker import LOOP, RATE, busy, stalls, summarize

ROOT = ["main (broker/cli.py)", LOOP]
IDLE = ROOT
FSYNC = ROOT + ["LogManager.checkpoint (storage/manager.py)", "write_checkpoint (storage/checkpoint.py)"]
SEND = ROOT + ["KafkaConnection._serve (protocol/connection.py)", "KafkaConnection._write (protocol/connection.py)"]


def speedscope(stacks: list[list[str]]) -> dict:
    frames = sorted({f for s in stacks for f in s})
    def frame(name: str) -> dict:
        function, _, file = name.partition(" (")
        return {"name": function, "file": "/x/" + file.rstrip(")"), "line": 1}
    return {"shared": {"frames": [frame(f) for f in frames]},
            "profiles": [{"samples": [[0]] * 3, "weights": [0.005] * 3},  # another thread
                         {"samples": [[frames.index(f) for f in s] for s in stacks],
                          "weights": [1 / RATE] * len(stacks)}]}


def test_the_waiting_loop_is_not_busy_and_stalls_are_the_longest_busy_runs():
    timeline = [IDLE, SEND, IDLE, FSYNC, FSYNC, FSYNC, IDLE, SEND, SEND, IDLE]
    assert not busy(IDLE) and busy(SEND) and busy(FSYNC)
    assert stalls(timeline) == [(3, 3), (7, 2), (1, 1)]
    assert stalls([SEND, SEND]) == [(0, 2)]  # a stretch running to the end counts


def test_summary_of_a_gzipped_profile_names_the_stall_and_the_busy_share(tmp_path):
    timeline = [IDLE] * 6 + [FSYNC] * 4 + [IDLE] * 8 + [SEND] * 2
    path = tmp_path / "broker-1.speedscope.json.gz"
    path.write_bytes(gzip.compress(json.dumps(speedscope(timeline)).encode()))
    text = summarize(path)
    assert text.startswith("event loop thread: 20 samples at 200 Hz, 6 busy (30%")
    stall_lines = text.split("## longest")[1].splitlines()[1:3]
    assert stall_lines[0].strip().startswith("20 ms at   0.0 s (100% of it in): LogManager.checkpoint > write_checkpoint")
    assert "KafkaConnection._serve > KafkaConnection._write" in stall_lines[1]
    assert "66.7%  write_checkpoint (storage/checkpoint.py)" in text


def test_run_time_counts_every_thread_to_the_nanosecond():
    import os
    import threading
    import time

    from bench.profile_broker import run_time_s

    busy, done = threading.Event(), threading.Event()

    def work() -> None:
        sum(i * i for i in range(300_000))
        busy.set()
        done.wait(30)

    worker = threading.Thread(target=work)
    before = run_time_s([os.getpid()])
    main_before = time.thread_time()
    worker.start()
    busy.wait(30)
    spent = run_time_s([os.getpid()]) - before - (time.thread_time() - main_before)
    done.set()
    worker.join()
    assert spent > 0.001 and spent != round(spent, 2)   # the worker's CPU, not 10 ms ticks
