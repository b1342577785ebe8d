"""The nemesis' kinds of fault: whom each one strikes and what it does to the dev cluster.

- ``kill``: SIGKILL the broker leading a random partition, start it again after 0..downtime s
  (``leader`` is its name from issue 3; ``controller`` and ``broker`` SIGKILL the active
  controller or a random broker the same way; ``coordinator`` the broker coordinating one of
  the run's transactional ids, as FindCoordinator with key type 1 names it);
- ``pause``: SIGSTOP a partition leader, then SIGCONT, half the time beyond the brokers'
  ZooKeeper session timeout (its session expires, leadership moves) and half the time below;
- ``zk-kill``: SIGKILL ZooKeeper, start it again (same port, same data) after 0..downtime s;
- ``zk-pause``: SIGSTOP / SIGCONT ZooKeeper, below or beyond the session timeout as ``pause``;
- ``controller-pause``: SIGSTOP / SIGCONT the active controller (1 s .. the session timeout);
- ``disk-full``: fill the small disk holding one broker's data (``diskfull.SmallDisk``),
  hold, delete the filler (the recovery starts the broker again if it exited);
- ``partition``: cut one broker (a partition leader) off from the other brokers, the
  controllers and ZooKeeper (``partition.Partitioner``), hold, heal.

Each ``act`` injects, holds and heals, returning what it did for the history; ``fresh`` kinds
restart their target, which then has to come back as a new incarnation.
"""

from __future__ import annotations

import logging
import signal
import time
from dataclasses import dataclass
from typing import Callable

from odradek.dev.harness import partition_leaders

log = logging.getLogger("odradek.verify")


@dataclass(frozen=True)
class Kind:
    name: str
    target: Callable  # (nemesis) -> (process name, why) | None
    act: Callable     # (nemesis, process name) -> dict for the history
    fresh: bool       # the target is restarted: it must come back as a new incarnation


# -- targets -------------------------------------------------------------------------------
def leader(n) -> tuple[str, str] | None:
    leaders = {p: b for p, b in partition_leaders(n.kafka, n.topic).items() if b >= 0}
    if not leaders:
        return None
    p = n.rng.choice(sorted(leaders))
    return f"broker-{leaders[p]}", f"leader of partition {p}"


def controller(n) -> tuple[str, str] | None:
    name = n.cluster.active_controller()
    return (name, "active controller") if name else None


def random_broker(n) -> tuple[str, str] | None:
    return n.rng.choice([b for b in n.cluster.names() if b.startswith("broker-")]), "random broker"


def txn_coordinator(n) -> tuple[str, str] | None:
    """The broker a random transactional id of the run is coordinated by (DescribeTransactions
    goes to the coordinator FindCoordinator(key_type=1) names), None without transactions or
    when no coordinator answers within 15 s (a partition loading or between leaders)."""
    from kafka import KafkaAdminClient
    if not n.transactional_ids:
        return None
    tid = n.rng.choice(sorted(n.transactional_ids))
    deadline = time.monotonic() + 15
    while not n.stop_event.is_set():
        admin = None
        try:
            admin = KafkaAdminClient(**n.kafka.kafka_python(request_timeout_ms=10_000))
            broker = admin.describe_transactions([tid])[tid].coordinator_id
            return f"broker-{broker}", f"transaction coordinator of {tid}"
        except Exception as e:
            if time.monotonic() > deadline:
                log.info("nemesis: no coordinator of %s: %r", tid, e)
                return None
            n.stop_event.wait(0.5)
        finally:
            if admin is not None:
                admin.close()
    return None


def zookeeper(n) -> tuple[str, str]:
    return "zookeeper", "the ZooKeeper server"


def disk_broker(n) -> tuple[str, str] | None:
    return (n.disk.broker, "broker on the small disk") if n.disk is not None else None


# -- actions -------------------------------------------------------------------------------
def kill_and_restart(n, name: str) -> dict:
    n.cluster.kill(name)
    down = n.rng.uniform(0, n.downtime)
    n.stop_event.wait(down)
    n.cluster.start(name)
    return {"down": round(down, 3)}


def pause_length(n) -> tuple[float, bool]:
    """(seconds, beyond the session timeout?): half the pauses each way."""
    beyond = n.rng.random() < 0.5
    factor = n.rng.uniform(1.2, 1.5) if beyond else n.rng.uniform(0.2, 0.6)
    return n.session_timeout * factor, beyond


def pause(n, name: str, seconds: float) -> None:
    n.paused.add(name)
    n.cluster.signal(name, signal.SIGSTOP)
    try:
        n.stop_event.wait(seconds)
    finally:
        n.cluster.signal(name, signal.SIGCONT)
        n.paused.discard(name)


def pause_around_session(n, name: str) -> dict:
    seconds, beyond = pause_length(n)
    pause(n, name, seconds)
    return {"paused": round(seconds, 3), "beyond_session_timeout": beyond}


def pause_controller(n, name: str) -> dict:
    seconds = n.rng.uniform(1.0, n.session_timeout)
    pause(n, name, seconds)
    return {"paused": round(seconds, 3)}


def fill_disk(n, name: str) -> dict:
    written = n.disk.fill()
    held = n.rng.uniform(2.0, 2.0 + 2 * n.downtime)
    try:
        n.stop_event.wait(held)
    finally:
        n.disk.free()
    # a broker whose only log directory went offline shuts down, as Kafka's does, and may
    # exit long after the disk is freed: the nemesis' recovery starts it again (casualties)
    return {"filler_bytes": written, "held": round(held, 3)}


def cut_off(n, name: str) -> dict:
    held = n.rng.uniform(0.5, 1.5) * n.session_timeout
    n.partitioner.isolate(name)
    try:
        n.stop_event.wait(held)
    finally:
        n.partitioner.heal()
    return {"isolated": round(held, 3)}


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("kill", leader, kill_and_restart, True),
    Kind("pause", leader, pause_around_session, False),
    Kind("zk-kill", zookeeper, kill_and_restart, False),
    Kind("zk-pause", zookeeper, pause_around_session, False),
    Kind("controller-pause", controller, pause_controller, False),
    Kind("disk-full", disk_broker, fill_disk, False),
    Kind("partition", leader, cut_off, False),
    # issue 3's names, kept for its tests and habits
    Kind("leader", leader, kill_and_restart, True),
    Kind("controller", controller, kill_and_restart, True),
    Kind("broker", random_broker, kill_and_restart, True),
    Kind("coordinator", txn_coordinator, kill_and_restart, True),
)}

NEMESES = ("kill", "pause", "zk-kill", "zk-pause", "controller-pause", "disk-full", "partition")
FAULTS = tuple(KINDS)
