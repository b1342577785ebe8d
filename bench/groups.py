"""Consumer group rebalance time (issue 5).

    .venv/bin/python -m bench.groups [--delay-ms 3000] [--rounds 3]

A 1-broker dev cluster with ``group.initial.rebalance.delay.ms=--delay-ms``, a topic of 12
partitions, and per round a fresh group of 3 librdkafka consumers (heartbeat.interval.ms
3000, range assignor) subscribing at the same moment: the time from the subscriptions until
every member holds its 4 partitions. Goal: <= 2 x the delay + one heartbeat interval (the
first rebalance of an empty group waits the delay, extended once while members keep
arriving; a member learns of a rebalance at its next heartbeat). Then one member leaves
(close: LeaveGroup) and the time until the other two hold 6 partitions each is printed too.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer

from odradek.dev.harness import start_cluster, stop_cluster
from odradek.dev.waiting import wait_until

PARTITIONS, MEMBERS, HEARTBEAT_MS = 12, 3, 3000
DEADLINE_S = 120


def wait_for_shares(members: list[Consumer], share: int) -> float:
    """Poll every member until each holds ``share`` partitions; seconds waited."""
    started = time.monotonic()

    def shared() -> bool:
        for m in members:
            m.poll(0.02)  # serves the rebalance callbacks, and paces the loop
        return all(len(m.assignment()) == share for m in members)
    wait_until(shared, DEADLINE_S, f"members to get {share} partitions each", 0, retry_on=())
    return time.monotonic() - started


def one_round(bootstrap: str, topic: str, group: str) -> tuple[float, float]:
    members = [Consumer({"bootstrap.servers": bootstrap, "group.id": group, "heartbeat.interval.ms": HEARTBEAT_MS,
                         "session.timeout.ms": 10000, "partition.assignment.strategy": "range",
                         "enable.auto.commit": False}) for _ in range(MEMBERS)]
    try:
        for m in members:
            m.subscribe([topic])
        join = wait_for_shares(members, PARTITIONS // MEMBERS)
        members.pop().close()
        leave = wait_for_shares(members, PARTITIONS // (MEMBERS - 1))
    finally:
        for m in members:
            m.close()
    return join, leave


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delay-ms", type=int, default=3000, help="group.initial.rebalance.delay.ms")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    goal = (2 * args.delay_ms + HEARTBEAT_MS) / 1000
    with tempfile.TemporaryDirectory() as tmp:
        cluster = start_cluster(Path(tmp), brokers=1,
                                extra=("--config", f"group.initial.rebalance.delay.ms={args.delay_ms}"))
        try:
            cluster.create_topic("rebalance", partitions=PARTITIONS)
            joins, leaves = [], []
            for i in range(args.rounds):
                join, leave = one_round(cluster.bootstrap, "rebalance", f"bench-{i}")
                joins.append(join)
                leaves.append(leave)
                print(f"round {i}: 3 members on {PARTITIONS} partitions in {join:.2f}s; after one left, "
                      f"2 members in {leave:.2f}s")
        finally:
            stop_cluster(cluster, strict=False)
    print(f"rebalance of 3 members: median {statistics.median(joins):.2f}s, max {max(joins):.2f}s; goal <= "
          f"{goal:.1f}s (2 x {args.delay_ms} ms + {HEARTBEAT_MS} ms heartbeat): "
          f"{'met' if max(joins) <= goal else 'NOT met'}")
    print(f"rebalance after a member left: median {statistics.median(leaves):.2f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
