"""Consumer group rebalance time (issues 5 and 35).

The small librdkafka group of issue 5, and (``--compare``) a 50-member group's membership
changes, classic against KIP-848's consumer protocol, on Odradek and on Apache Kafka 4.x
(KRaft) one after the other on the same machine (issue 35).

    .venv/bin/python -m bench.groups [--delay-ms 3000] [--rounds 3]
    .venv/bin/python -m bench.groups --compare [--members 50] [--partitions 100] [--rounds 3]
        [--protocols classic,cooperative,consumer] [--systems odradek,kafka] [--brokers 3] [--no-doc] [--keep DIR]

Issue 5's run: a 1-broker dev cluster with ``group.initial.rebalance.delay.ms=--delay-ms``, a
topic of 12 partitions, and per round a fresh group of 3 librdkafka consumers
(heartbeat.interval.ms 3000, range assignor) subscribing at the same moment: the time from the
subscriptions until every member holds its 4 partitions. Goal: <= 2 x the delay + one heartbeat
interval (the first rebalance of an empty group waits the delay, extended once while members
keep arriving; a member learns of a rebalance at its next heartbeat). Then one member leaves
(close: LeaveGroup) and the time until the other two hold 6 partitions each is printed too.

``--compare``: per system (Odradek: ``--brokers`` dev brokers; Kafka 4.1.1: ``--brokers``
combined KRaft nodes from bench/kafka4/server/pom.xml), a topic of ``--partitions`` partitions
(RF 1) and per protocol one JVM of Kafka 4.1.1 Java consumers (bench/kafka4/server/
GroupMembers.java): ``--members`` consumers form a group while a producer in the same JVM
sends ``--rate`` records/s round robin; then ``--rounds`` times one member joins and then the
oldest leaves (close()). Protocols: ``classic`` (group.protocol=classic with the Java client's
default assignors, i.e. range, eager), ``cooperative`` (classic with cooperative-sticky),
``consumer`` (group.protocol=consumer, the broker's default assignor). Every setting else is
each side's default (classic heartbeat 3 s; KIP-848 heartbeat 5 s set by the broker), except
``group.initial.rebalance.delay.ms=0`` on both (it only delays the group's forming). Figures
per change: seconds until settled (every member holds its final share: the partitions covered
once, floor or ceil of partitions/members each) and until resumed (every member has consumed
since), the longest pause in the other members' consumption (median member, worst member) and
the longest moment in which no member consumed. Results: ``bench/results/groups-<date>.json``
and the table between the groups markers in docs/performance.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer

from bench import group_protocols
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
    ap = argparse.ArgumentParser(prog="python -m bench.groups", description=__doc__.splitlines()[0])
    ap.add_argument("--delay-ms", type=int, default=3000, help="group.initial.rebalance.delay.ms (issue 5's run)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--compare", action="store_true", help="the 50-member classic/consumer protocol comparison")
    group_protocols.add_arguments(ap)
    args = ap.parse_args(argv)
    if args.compare:
        return group_protocols.run(args, argv if argv is not None else sys.argv[1:])
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
