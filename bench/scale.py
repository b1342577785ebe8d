"""Partition scale side by side: Odradek, Apache Kafka 3.9 in ZooKeeper mode, Kafka in KRaft mode.

    .venv/bin/python -m bench.scale --replicas-per-broker 1000 [--systems odradek,kafka-zk,kafka-kraft]

Each system in turn (never two at once) runs 3 brokers on 127.0.0.1 and goes through the same
steps; RF 3 on 3 brokers puts every partition on every broker, so ``--replicas-per-broker N``
means N partitions (``N / 10`` topics of 10 partitions, as a new user would create them):

1. **create**: CreateTopics, ``--topics-per-request`` topics a request (confluent-kafka's
   AdminClient, 60 s request timeout): seconds until every request answered, partitions/s;
2. **led + full ISR**: seconds from the first request until Metadata shows every partition
   with a leader and an ISR of 3;
3. **idle**: each broker's CPU (% of a core over ``--idle-seconds``) and RSS, the cluster quiet;
4. **metadata**: latency of a Metadata request for every topic (median and max of 5);
   ``--until metadata`` stops here (RSS and Metadata figures only: each broker's RSS is also
   taken before the first topic is created);
5. **controlled shutdown** of broker 2 (SIGTERM; it leads about a third of the partitions):
   seconds until its process exited, and that Metadata then shows no leadership on it;
6. **restart to full ISR**: broker 2 started again; seconds until every ISR has 3 members;
7. **controller failover**: SIGKILL of the active controller together with a broker (in
   Kafka the controller *is* a broker: that one broker; in Odradek the active controller
   process and broker 3): seconds until Metadata shows every partition led by a live broker
   (a standby elected, state loaded, first elections done: until then Metadata still names
   the dead broker), then both restarted and back to full ISR.

Odradek runs as ``odradek dev up`` with 2 controllers (one standby); Kafka ZooKeeper mode uses
the project's ZooKeeper (``odradek.dev.zookeeper``, as ``odradek dev up`` starts it) with
Kafka's defaults (``zookeeper.session.timeout.ms`` 18 s); KRaft nodes are combined
broker+controllers (``bench.apache_kafka``). Figures go to ``bench/results/scale-<date>.json``
with the machine's load (``/proc/loadavg``) before and after each system. Every cluster and its
temporary directory is removed at the end, also on failure.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
from abc import ABC, abstractmethod
from pathlib import Path

from bench import apache_kafka
from bench.apache_kafka import KafkaCluster
from bench.side_by_side import cpu_seconds, environment, memory_mb

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
BROKERS, RF = 3, 3
PARTITIONS_PER_TOPIC = 10
ODRADEK, KAFKA_ZK, KAFKA_KRAFT = "odradek", "kafka-zk", "kafka-kraft"


def load() -> list[float]:
    """The 1, 5 and 15-minute load averages (the machine is shared: figures come with them)."""
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


# -- the systems ---------------------------------------------------------------------------------

class Target(ABC):
    name: str
    bootstrap: str
    # CreateTopics' timeout_ms (librdkafka's operation_timeout, seconds). 0 asks the broker to
    # answer once creation is triggered (ZooKeeper mode: znodes written; librdkafka hides the
    # REQUEST_TIMED_OUT that comes back). A KRaft controller takes it as the deadline of its
    # createTopics event: at 0 the event never starts, nothing is created, and the same hidden
    # REQUEST_TIMED_OUT looks like success. KRaft answers once its records are committed.
    create_timeout: float = 0

    @abstractmethod
    def broker_pid(self, broker: int) -> int | None: ...

    @abstractmethod
    def stop_broker(self, broker: int, sig: int) -> float:
        """Signal the broker, wait until its process exited; seconds."""

    @abstractmethod
    def start_broker(self, broker: int) -> None: ...

    def active_controller(self) -> int | None:
        """The Kafka node to kill as the controller, asked before the failover clock starts
        (KRaft asks a JVM tool: seconds on a loaded machine); None for Odradek."""
        return None

    @abstractmethod
    def kill_controller(self, node: int | None) -> list[str]:
        """SIGKILL the active controller (``node`` for Kafka; for Odradek the active controller
        process and broker 3); what was killed, to restart."""

    @abstractmethod
    def restart(self, killed: list[str]) -> None: ...

    @abstractmethod
    def stop(self) -> None: ...

    def admin(self):
        from confluent_kafka.admin import AdminClient
        return AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 60000})


class OdradekTarget(Target):
    name = ODRADEK

    def __init__(self, root: Path) -> None:
        from odradek.dev.harness import start_cluster
        self.cluster = start_cluster(root / "odradek", brokers=BROKERS, replication_factor=RF,
                                     min_insync_replicas=2, extra=("--controllers", "2"))
        self.bootstrap = self.cluster.bootstrap

    def broker_pid(self, broker: int) -> int | None:
        return self.cluster.pids.get(f"broker-{broker}")

    def stop_broker(self, broker: int, sig: int) -> float:
        pid, started = self.broker_pid(broker), time.monotonic()
        os.kill(pid, sig)
        while Path(f"/proc/{pid}").exists() and _state(pid) != "Z":
            time.sleep(0.02)
        return time.monotonic() - started

    def start_broker(self, broker: int) -> None:
        self.cluster.run("start", str(broker))

    def kill_controller(self, node: int | None) -> list[str]:
        self.cluster.run("kill", "controller")
        self.stop_broker(3, signal.SIGKILL)
        names = [f"controller-{i}" for i in range(2)]
        dead = [n for n in names if n not in self.cluster.pids]
        print(f"  odradek: killed {dead} and broker-3", flush=True)
        return [*dead, "3"]

    def restart(self, killed: list[str]) -> None:
        for name in killed:
            self.cluster.run("start", name)

    def stop(self) -> None:
        from odradek.dev.harness import stop_cluster
        stop_cluster(self.cluster, strict=False)


class KafkaTarget(Target):
    """Kafka 3.9: ZooKeeper mode (on the project's ZooKeeper) or KRaft combined nodes."""

    def __init__(self, root: Path, zookeeper_mode: bool) -> None:
        self.name = KAFKA_ZK if zookeeper_mode else KAFKA_KRAFT
        self.create_timeout = 0 if zookeeper_mode else 30  # within the 60 s request timeout
        self.zk = None
        connect = None
        if zookeeper_mode:
            from odradek.dev.zookeeper import ZooKeeperServer
            self.zk = ZooKeeperServer(root / "zookeeper").start()
            connect = f"{self.zk.connect}/kafka"
        self.cluster = KafkaCluster(root / self.name, nodes=BROKERS, zookeeper=connect)
        try:
            self.cluster.start({"default.replication.factor": str(RF), "min.insync.replicas": "2",
                                "offsets.topic.num.partitions": "50"})
        except BaseException:
            self.stop()
            raise
        self.bootstrap = self.cluster.bootstrap

    def broker_pid(self, broker: int) -> int | None:
        return self.cluster.pids.get(broker)

    def stop_broker(self, broker: int, sig: int) -> float:
        return self.cluster.stop_node(broker, sig)

    def start_broker(self, broker: int) -> None:
        self.cluster.start_node(broker)

    def active_controller(self) -> int:
        if self.zk is not None:  # ZooKeeper mode: Metadata names the controller broker
            return self.admin().list_topics(timeout=30).controller_id
        out = apache_kafka.run_tool("org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-server",
                                    self.bootstrap, "describe", "--status", check=True, timeout=120).stdout
        return int(re.search(r"LeaderId:\s+(\d+)", out).group(1))

    def kill_controller(self, node: int | None) -> list[str]:
        self.cluster.stop_node(node, signal.SIGKILL)
        print(f"  {self.name}: killed the controller, node {node}", flush=True)
        return [str(node)]

    def restart(self, killed: list[str]) -> None:
        for node in killed:
            self.cluster.start_node(int(node))

    def stop(self) -> None:
        self.cluster.stop()
        if self.zk is not None:
            self.zk.stop()


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "X"


# -- observing -----------------------------------------------------------------------------------

def topic_names(replicas_per_broker: int) -> list[str]:
    return [f"scale-{i:05d}" for i in range(replicas_per_broker // PARTITIONS_PER_TOPIC)]


def view(target: Target, names: list[str]) -> dict:
    """Counts over the benchmark's partitions from one Metadata request."""
    md = target.admin().list_topics(timeout=60)
    wanted = set(names)
    led = full = total = 0
    leaders: dict[int, int] = {}
    for name, t in md.topics.items():
        if name not in wanted or t.error is not None:
            continue
        for p in t.partitions.values():
            total += 1
            if p.leader >= 0 and p.error is None:
                led += 1
                leaders[p.leader] = leaders.get(p.leader, 0) + 1
                full += len(p.isrs) == len(p.replicas) == RF
    return {"partitions": total, "led": led, "full_isr": full, "leaders": leaders}


def wait_for(target: Target, names: list[str], what: str, ok, timeout: float) -> float:
    """Seconds until ``ok(view)``; polls Metadata. Raises TimeoutError with the last view."""
    started = time.monotonic()
    last = None
    while time.monotonic() - started < timeout:
        try:
            last = view(target, names)
            if ok(last):
                return time.monotonic() - started
        except Exception as e:  # noqa: BLE001 - a broker restarting; retried until the deadline
            last = repr(e)
        time.sleep(0.25)
    raise TimeoutError(f"{target.name}: {what} not reached in {timeout}s; last {last}")


def every_led(n: int):
    return lambda v: v["partitions"] == n and v["led"] == n


def every_full(n: int):
    return lambda v: v["partitions"] == n and v["full_isr"] == n


# -- the steps -----------------------------------------------------------------------------------

def create(target: Target, names: list[str], per_request: int) -> dict:
    from confluent_kafka.admin import NewTopic
    admin = target.admin()
    started = time.monotonic()
    errors: dict[str, int] = {}
    for i in range(0, len(names), per_request):
        batch = [NewTopic(n, num_partitions=PARTITIONS_PER_TOPIC, replication_factor=RF)
                 for n in names[i:i + per_request]]
        futures = admin.create_topics(batch, request_timeout=60, operation_timeout=target.create_timeout)
        for name, fut in futures.items():
            try:
                fut.result(timeout=120)
            except Exception as e:  # noqa: BLE001 - counted and reported
                code = getattr(e.args[0], "name", lambda: type(e).__name__)() if e.args else type(e).__name__
                errors[str(code)] = errors.get(str(code), 0) + 1
    seconds = time.monotonic() - started
    partitions = len(names) * PARTITIONS_PER_TOPIC
    return {"seconds": seconds, "partitions_per_s": partitions / seconds, "errors": errors, "started": started}


def idle(target: Target, seconds: float) -> dict:
    pids = {b: target.broker_pid(b) for b in range(1, BROKERS + 1)}
    before = {b: cpu_seconds([p]) for b, p in pids.items()}
    time.sleep(seconds)
    return {str(b): {"cpu_pct": 100 * (cpu_seconds([p]) - before[b]) / seconds,
                     "rss_mb": memory_mb(p).get("VmRSS")} for b, p in pids.items()}


def metadata_latency(target: Target, runs: int = 5) -> dict:
    admin = target.admin()
    admin.list_topics(timeout=60)  # connections up
    times = []
    for _ in range(runs):
        t = time.monotonic()
        admin.list_topics(timeout=60)
        times.append(1000 * (time.monotonic() - t))
    return {"p50_ms": statistics.median(times), "max_ms": max(times)}


def run_system(target: Target, names: list[str], args) -> dict:
    n = len(names) * PARTITIONS_PER_TOPIC
    out: dict = {"load_before": load()}
    out["rss_without_topics_mb"] = {str(b): memory_mb(target.broker_pid(b)).get("VmRSS") for b in range(1, BROKERS + 1)}
    out["create"] = c = create(target, names, args.topics_per_request)
    print(f"  {target.name}: created {len(names)} topics in {c['seconds']:.1f} s {c['errors'] or ''}", flush=True)
    wait_for(target, names, "every partition led with a full ISR", every_full(n), args.timeout)
    out["led_full_isr_s"] = time.monotonic() - c.pop("started")
    print(f"  {target.name}: every partition led with a full ISR after {out['led_full_isr_s']:.1f} s", flush=True)
    time.sleep(args.settle)
    out["idle"] = idle(target, args.idle_seconds)
    out["metadata"] = metadata_latency(target)
    if args.until == "metadata":
        out["load_after"] = load()
        return out
    before = view(target, names)["leaders"].get(2, 0)
    shutdown_s = target.stop_broker(2, signal.SIGTERM)
    after = wait_for(target, names, "no leadership on broker 2", lambda v: 2 not in v["leaders"], 60)
    out["controlled_shutdown"] = {"led_before": before, "seconds": shutdown_s, "leaders_gone_after_exit_s": after}
    print(f"  {target.name}: controlled shutdown of broker 2 (led {before}) {shutdown_s:.1f} s", flush=True)
    started = time.monotonic()
    target.start_broker(2)
    wait_for(target, names, "broker 2 back in every ISR", every_full(n), args.timeout)
    out["restart_full_isr_s"] = time.monotonic() - started
    print(f"  {target.name}: broker 2 back in every ISR after {out['restart_full_isr_s']:.1f} s", flush=True)
    controller = target.active_controller()
    started = time.monotonic()
    killed = target.kill_controller(controller)
    dead = {int(k) for k in killed if k.isdigit()}  # the broker killed with the controller (Kafka: the same node)
    wait_for(target, names, "every partition led by a live broker after the controller died",
             lambda v: every_led(n)(v) and not dead & set(v["leaders"]), args.timeout)
    out["controller_failover_s"] = time.monotonic() - started
    print(f"  {target.name}: every partition led again {out['controller_failover_s']:.1f} s after the kill",
          flush=True)
    started = time.monotonic()
    target.restart(killed)
    wait_for(target, names, "every ISR full after the restarts", every_full(n), args.timeout)
    out["after_failover_full_isr_s"] = time.monotonic() - started
    out["load_after"] = load()
    return out


def start(name: str, root: Path) -> Target:
    if name == ODRADEK:
        return OdradekTarget(root)
    return KafkaTarget(root, zookeeper_mode=name == KAFKA_ZK)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n")[0])
    ap.add_argument("--replicas-per-broker", type=int, default=1000, help="1000, 5000 or 10000")
    ap.add_argument("--systems", default=f"{ODRADEK},{KAFKA_ZK},{KAFKA_KRAFT}")
    ap.add_argument("--topics-per-request", type=int, default=50)
    ap.add_argument("--idle-seconds", type=float, default=10)
    ap.add_argument("--settle", type=float, default=5, help="seconds of quiet before the idle sample")
    ap.add_argument("--timeout", type=float, default=900, help="deadline of each wait")
    ap.add_argument("--until", choices=("metadata", "failover"), default="failover",
                    help="stop after the Metadata latency (memory and Metadata only) or run every step")
    ap.add_argument("--output", type=Path)
    args = ap.parse_args(argv)
    names = topic_names(args.replicas_per_broker)
    report = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
              "command": "python -m bench.scale " + " ".join(argv if argv is not None else sys.argv[1:]),
              "replicas_per_broker": args.replicas_per_broker, "brokers": BROKERS, "rf": RF,
              "topics": len(names), "partitions_per_topic": PARTITIONS_PER_TOPIC,
              "kafka_version": apache_kafka.KAFKA_VERSION, "environment": environment(), "systems": {}}
    if any(s != ODRADEK for s in args.systems.split(",")):
        apache_kafka.resolve()
    for name in args.systems.split(","):
        root = Path(tempfile.mkdtemp(prefix=f"odradek-scale-{name}-"))
        print(f"== {name}: {len(names)} topics x {PARTITIONS_PER_TOPIC} partitions, RF {RF} "
              f"(load {load()})", flush=True)
        target = None
        try:
            target = start(name, root)
            report["systems"][name] = run_system(target, names, args)
        except Exception as e:  # noqa: BLE001 - reported; the next system still runs
            print(f"  {name} failed: {e}", file=sys.stderr, flush=True)
            report["systems"][name] = {"error": str(e)[:2000]}
        finally:
            if target is not None:
                target.stop()
            shutil.rmtree(root, ignore_errors=True)
    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M")
    out = args.output or RESULTS / f"scale-{args.replicas_per_broker}-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["systems"], indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
