"""A handle on a detached ``odradek dev`` cluster, driven through its CLI: for tests and benches.

``start_cluster`` runs ``odradek dev up --detach --kafka-port 0`` into a data directory and
returns a ``Cluster``; ``stop_cluster`` runs ``odradek dev down`` and afterwards kills, by PID,
every process the cluster ever recorded (PID *and* start time, so a reused PID is never
signalled) that is still alive, failing when there was one. ``partition_leaders`` and
``wait_for_leaders`` read leadership from Kafka Metadata (confluent-kafka). A secured cluster
(``--security sasl_ssl``) is reached with the security block of its status (``Cluster.access``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from odradek.dev import processes
from odradek.dev.access import KafkaAccess
from odradek.dev.processes import ProcessRecord
from odradek.dev.waiting import wait_until

START_TIMEOUT_S = 120
COMMAND_TIMEOUT_S = 120
# Controlled shutdown attempts 1 s apart (Kafka's default, the registry's, is 5 s). Stopping a
# whole cluster, the last live replica of each partition cannot hand its leaderships to anyone and
# sits out every attempt: with 5 s, 10 s for each such broker in every teardown (25 s for the rack
# tests' 6 brokers). A test's own --config comes later and wins.
SHUTDOWN_BACKOFF_MS = 1000
# A new (empty) group's first rebalance at once, as Kafka's own config/server.properties sets it
# "for development and testing" (its default, the registry's, is 3 s): every group a test forms, and
# every group formed again from empty (a Streams or Connect group after its coordinator moved),
# waited those 3 s. tests/groups sets its own delay where it tests it.
INITIAL_REBALANCE_DELAY_MS = 0


def _log_tails(data_dir: Path, lines: int = 30) -> str:
    out = []
    for log in sorted((data_dir / "logs").glob("*.log")):
        text = log.read_text(errors="replace").splitlines()[-lines:]
        out.append(f"--- {log} (last {len(text)} lines)\n" + "\n".join(text))
    return "\n".join(out)


@dataclass
class Cluster:
    data_dir: Path
    bootstrap: str = ""
    brokers: dict[int, str] = field(default_factory=dict)
    gateway: str | None = None                      # the HTTP gateway's URL, if started
    security: dict | None = None                    # status --json's "security" block, if secured
    _seen: dict[tuple[int, int], ProcessRecord] = field(default_factory=dict)

    # -- the odradek CLI -------------------------------------------------------------------
    def run(self, *args: str, check: bool = True, timeout: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess:
        """``odradek dev <args> --data-dir DIR``; raises with the output (and log tails) on failure."""
        argv = [sys.executable, "-m", "odradek.cli", "dev", *args, "--data-dir", str(self.data_dir)]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        self._remember_processes()
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} exited {proc.returncode}\nstdout:\n{proc.stdout}\n"
                                 f"stderr:\n{proc.stderr}\n{_log_tails(self.data_dir)}")
        return proc

    def status(self) -> dict:
        return json.loads(self.run("status", "--json").stdout)

    @property
    def pids(self) -> dict[str, int]:
        """Live processes by name (``broker-1``, ``controller-0``, ``zookeeper``), read afresh."""
        return self.status()["pids"]

    def refresh(self) -> None:
        st = self.status()
        self.bootstrap = st["bootstrap_servers"]
        self.brokers = {int(k): v for k, v in st["brokers"].items()}
        self.gateway = st.get("gateway")
        self.security = st.get("security")

    @property
    def access(self) -> KafkaAccess:
        return KafkaAccess(self.bootstrap, self.security)

    def _remember_processes(self) -> None:
        state = self.data_dir / "cluster.json"
        try:
            recs = json.loads(state.read_text()).get("processes", {}).values()
        except (OSError, ValueError):
            return
        for r in recs:
            rec = ProcessRecord.from_json(r)
            self._seen[(rec.pid, rec.start_time)] = rec

    def leftovers(self) -> list[ProcessRecord]:
        self._remember_processes()
        return [rec for rec in self._seen.values() if processes.alive(rec)]

    # -- Kafka-side helpers (confluent-kafka's AdminClient / metadata) ----------------------
    def admin(self):
        from confluent_kafka.admin import AdminClient
        return AdminClient(self.access.confluent())

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     config: dict[str, str] | None = None, timeout: float = 60.0) -> None:
        """CreateTopics, then wait until Metadata shows every partition with a leader."""
        from confluent_kafka.admin import NewTopic
        admin = self.admin()  # keep the handle alive until the future resolves
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                      config=dict(config or {}))], operation_timeout=timeout, request_timeout=timeout)
        futures[name].result(timeout=timeout)
        self.wait_for_leaders(name, partitions, timeout=timeout)

    def partition_leaders(self, topic: str) -> dict[int, int]:
        return partition_leaders(self.access, topic)

    def wait_for_leaders(self, topic: str, partitions: int, timeout: float = 60.0) -> dict[int, int]:
        return wait_for_leaders(self.access, topic, partitions, timeout)

    def leader_id(self, topic: str, partition: int) -> int:
        return self.partition_leaders(topic)[partition]

    def leader_address(self, topic: str, partition: int) -> str:
        md = self.admin().list_topics(topic, timeout=10)
        broker = md.brokers[md.topics[topic].partitions[partition].leader]
        return f"{broker.host}:{broker.port}"


def start_cluster(data_dir: Path, brokers: int = 3, extra: tuple[str, ...] = (),
                  replication_factor: int = 1, min_insync_replicas: int = 1, gateway: bool = False) -> Cluster:
    """A dev cluster; tests choose each topic's RF, so the defaults are single-replica here
    (``odradek dev up`` itself defaults to RF 3 with min.insync.replicas 2). The HTTP gateway
    only when asked for (on a free port); brokers retry a controlled shutdown ``SHUTDOWN_BACKOFF_MS``
    apart and form a new group without ``group.initial.rebalance.delay.ms``'s wait."""
    c = Cluster(data_dir=data_dir)
    extra = ("--replication-factor", str(replication_factor), "--min-insync-replicas", str(min_insync_replicas),
             *(("--gateway-port", "0") if gateway else ("--no-gateway",)),
             "--config", f"controlled.shutdown.retry.backoff.ms={SHUTDOWN_BACKOFF_MS}",
             "--config", f"group.initial.rebalance.delay.ms={INITIAL_REBALANCE_DELAY_MS}", *extra)
    try:
        c.run("up", "--detach", "--kafka-port", "0", "--brokers", str(brokers), *extra,
              timeout=START_TIMEOUT_S)
        c.refresh()
        assert len(c.brokers) == brokers, c.brokers
    except BaseException:
        stop_cluster(c, strict=False)
        raise
    return c


def stop_cluster(c: Cluster, strict: bool = True) -> None:
    """``odradek dev down``, then kill (by PID, never by name) whatever it left behind."""
    problems = []
    try:
        proc = c.run("down", check=False)
        if proc.returncode != 0:
            problems.append(f"`odradek dev down` exited {proc.returncode}: {proc.stderr.strip()}")
    except subprocess.TimeoutExpired:
        problems.append("`odradek dev down` timed out")
    left = c.leftovers()
    for rec in left:
        try:
            os.kill(rec.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for rec in left:
        try:
            wait_until(lambda: not processes.alive(rec), 10, f"{rec.name} (pid {rec.pid}) to die after SIGKILL")
        except TimeoutError as e:
            problems.append(str(e))
    if left:
        problems.append("left running after `odradek dev down` (killed by PID): "
                        + ", ".join(f"{r.name} pid {r.pid}" for r in left))
    if strict and problems:
        raise AssertionError("; ".join(problems))


def partition_leaders(kafka: str | KafkaAccess, topic: str) -> dict[int, int]:
    """{partition: leader broker id} from a fresh Metadata request (-1 = no leader)."""
    from confluent_kafka.admin import AdminClient
    md = AdminClient(KafkaAccess.of(kafka).confluent()).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return {}
    return {p.id: (p.leader if p.error is None else -1) for p in t.partitions.values()}


def wait_for_leaders(kafka: str | KafkaAccess, topic: str, partitions: int,
                     timeout: float = 60.0) -> dict[int, int]:
    """Leaders once Metadata shows every one of ``partitions`` partitions with one."""
    def ready():
        leaders = partition_leaders(kafka, topic)
        return leaders if (len(leaders) == partitions and all(l >= 0 for l in leaders.values())) else None
    return wait_until(ready, timeout, f"a leader for each of {partitions} partitions of {topic!r}", 0.2)
