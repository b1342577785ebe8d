"""One verify run against an existing dev cluster: topic, producers, nemesis, reads, check.

1. create the topic (``replication_factor``, ``min.insync.replicas``) and wait for leaders;
2. start the producers and a reader taking a snapshot of every partition (its tail) now and then;
3. after ``warmup`` seconds start the nemesis; run until it has done its ``kills`` and the
   workload has lasted ``duration`` seconds;
4. heal (start whatever is down, wait for every partition to have a leader), keep producing
   ``settle`` seconds more, stop the producers (they flush: every send resolves or times out);
5. read every partition from offset 0 to its high watermark (the ``final`` read) and check.

The history (``history.jsonl``) and the report (``report.json``) are written to ``out``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from odradek.cluster.zk_session import ZkTimeouts
from odradek.dev import harness
from odradek.dev.access import KafkaAccess
from odradek.dev.waiting import wait_until

from .checker import Report, check
from .copier import Copier, check_copier, copier_transactional_id, output_topic
from .diskfull import SmallDisk, SmallDiskUnavailable
from .faults import FAULTS
from .history import History
from .nemesis import DevCluster, Nemesis
from .partition import PartitionUnavailable, Partitioner
from .reader import read_all
from .transactional import transactional_id
from .workload import CLIENTS, make_producers

log = logging.getLogger("odradek.verify")


class ReplicationUnavailable(RuntimeError):
    """The cluster refused a topic with the requested replication factor."""


class RunError(RuntimeError):
    """The run could not be carried out (not a verdict on the cluster's safety)."""


@dataclass
class Config:
    data_dir: Path
    topic: str | None = None
    partitions: int = 6
    replication_factor: int = 3
    min_insync: int | None = None          # default: min(2, replication_factor)
    producers: int = 3
    clients: tuple[str, ...] = CLIENTS
    rate: float = 100.0                    # values per second per producer
    kills: int = 20
    interval: float = 2.5                  # mean seconds between one recovery and the next fault
    downtime: float = 2.0                  # a killed process stays down 0..downtime seconds
    faults: tuple[str, ...] = ("leader", "controller", "broker")
    session_timeout: float = ZkTimeouts().session_s  # the brokers' ZooKeeper session timeout (pauses around it)
    disk_headroom: int = 64 << 20          # disk-full: the small disk's free bytes at the start
    wait_isr: bool = True
    recovery_timeout: float = 60.0
    max_unrecovered: int = 3               # the nemesis stops after this many unrecovered faults in a row
    duration: float = 0.0                  # at least this long, faults or not
    warmup: float = 2.0
    settle: float = 3.0
    snapshot_interval: float = 5.0         # 0: no mid-run snapshots
    snapshot_tail: int = 2000              # a snapshot reads each partition's last N offsets (0: all)
    delivery_timeout: float = 60.0
    read_timeout: float = 120.0
    seed: int | None = None
    client_debug: str = ""                 # librdkafka debug contexts (e.g. "broker,topic,msg") -> out/rdkafka.log
    out: Path | None = None
    idempotent: bool = False               # idempotent producers: duplicates then fail the run
    # the last N producers idempotent beside plain ones (one run, one nemesis, both kinds): their
    # duplicates fail the run (``Report.idempotent_producers``), the plain ones' are reported
    idempotent_producers: int = 0
    transactional: bool = False            # transactional producers, read_committed reads (verify.transactional)
    command_config: Path | None = None     # Kafka client properties (security) instead of the dev cluster's
    topic_config: dict[str, str] = field(default_factory=dict)


def create_topic(kafka: KafkaAccess, cfg: Config, topic: str | None = None) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient(kafka.confluent())
    topic = topic or cfg.topic
    conf = {"min.insync.replicas": str(cfg.min_insync), **cfg.topic_config}
    fut = admin.create_topics([NewTopic(topic, num_partitions=cfg.partitions,
                                        replication_factor=cfg.replication_factor, config=conf)],
                              operation_timeout=30, request_timeout=60)[topic]
    try:
        fut.result(timeout=60)
    except KafkaException as e:
        err = e.args[0]
        if err.code() == KafkaError.INVALID_REPLICATION_FACTOR and cfg.replication_factor > 1:
            raise ReplicationUnavailable(
                f"replication is not there: the cluster refused topic {topic!r} with replication "
                f"factor {cfg.replication_factor} ({err.str()})") from e
        raise RunError(f"cannot create topic {topic!r}: {err.str()}") from e


def wait_for_leaders(kafka: KafkaAccess, topic: str, partitions: int, timeout: float) -> dict[int, int]:
    try:
        return harness.wait_for_leaders(kafka, topic, partitions, timeout)
    except TimeoutError as e:
        raise RunError(f"not every partition of {topic!r} has a leader: {e}") from e


class Snapshots(threading.Thread):
    """Reads every partition (its last ``tail`` offsets) every ``interval`` seconds while the
    workload runs."""

    def __init__(self, kafka: KafkaAccess, topic: str, partitions: list[int], history: History,
                 stop: threading.Event, interval: float, tail: int, committed: bool = False) -> None:
        super().__init__(name="snapshots", daemon=True)
        self.committed = committed
        self.kafka, self.topic, self.partitions = kafka, topic, partitions
        self.history, self.stop_event, self.interval, self.tail = history, stop, interval, tail
        self.count = 0

    def run(self) -> None:
        while not self.stop_event.wait(self.interval):
            started = time.monotonic()
            try:
                records, complete, errors = read_all(self.kafka, self.topic, self.partitions,
                                                     timeout=max(5.0, self.interval * 2), tail=self.tail,
                                                     committed=self.committed)
            except Exception as e:
                log.warning("snapshot read failed: %r", e)
                continue
            self.count += 1
            self.history.read(f"snapshot-{self.count}", records, complete, started=started,
                              error="; ".join(errors[:5]) or None)


def small_disk(cluster: DevCluster, cfg: Config, status: dict) -> SmallDisk:
    """The disk-full nemesis' small disk under the highest-numbered broker, mounted and the
    broker registered again."""
    broker = f"broker-{max(int(b) for b in status['brokers'])}"
    disk = SmallDisk(cluster, broker, cfg.topic, cfg.disk_headroom)
    try:
        disk.setup()
    except (SmallDiskUnavailable, OSError) as e:
        raise RunError(f"disk-full needs a tmpfs it can mount (root): {e}") from e

    def registered() -> bool:
        view = cluster.view()
        return view is not None and int(broker.removeprefix("broker-")) in {b["id"] for b in view["brokers"]}
    try:
        wait_until(registered, cfg.recovery_timeout, f"{broker} to register on its small disk", 0.2)
    except TimeoutError as e:
        disk.teardown()
        raise RunError(str(e)) from e
    return disk


def run(cfg: Config) -> tuple[Report, History]:
    cluster = DevCluster(cfg.data_dir)
    try:
        status = cluster.status()
    except Exception as e:
        raise RunError(f"no dev cluster at {cfg.data_dir}: {e}") from e
    kafka = KafkaAccess.from_status(status)
    if cfg.command_config is not None:   # the clients' security from a Kafka properties file instead
        kafka = KafkaAccess.from_properties(kafka.bootstrap, cfg.command_config)
    cfg.topic = cfg.topic or f"verify-{uuid.uuid4().hex[:8]}"
    cfg.min_insync = cfg.min_insync or min(2, cfg.replication_factor)
    if cfg.min_insync > cfg.replication_factor:
        raise RunError(f"min.insync.replicas {cfg.min_insync} > replication factor {cfg.replication_factor}: "
                       "acks=all could never succeed")
    out = cfg.out or cfg.data_dir / "verify" / cfg.topic
    partitions = list(range(cfg.partitions))
    log.info("verify: topic %s, %d partitions, RF %d, min.insync.replicas %d, bootstrap %s (%s)",
             cfg.topic, cfg.partitions, cfg.replication_factor, cfg.min_insync, kafka.bootstrap, kafka.protocol)
    partitioner = None
    if "partition" in cfg.faults and cfg.kills > 0:
        try:
            partitioner = Partitioner(cluster.state())
        except PartitionUnavailable as e:
            raise RunError(str(e)) from e
    disk = small_disk(cluster, cfg, status) if "disk-full" in cfg.faults and cfg.kills > 0 else None
    try:
        return _run(cfg, cluster, kafka, out, partitions, disk, partitioner)
    finally:
        if partitioner is not None:
            partitioner.heal()
        if disk is not None:
            disk.teardown()


def _run(cfg: Config, cluster: DevCluster, kafka: KafkaAccess, out: Path, partitions: list[int],
         disk: SmallDisk | None, partitioner: Partitioner | None) -> tuple[Report, History]:
    create_topic(kafka, cfg)
    wait_for_leaders(kafka, cfg.topic, cfg.partitions, 60)
    if cfg.transactional:  # the consume-transform-produce stage's output
        create_topic(kafka, cfg, output_topic(cfg.topic))
        wait_for_leaders(kafka, output_topic(cfg.topic), cfg.partitions, 60)

    if cfg.client_debug:
        out.mkdir(parents=True, exist_ok=True)
        rdkafka = logging.getLogger("odradek.verify.rdkafka")
        handler = logging.FileHandler(out / "rdkafka.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
        rdkafka.addHandler(handler)
        rdkafka.setLevel(logging.DEBUG)
        rdkafka.propagate = False
    history = History()
    stop_producers, stop_faults, stop_snapshots = threading.Event(), threading.Event(), threading.Event()
    producers = make_producers(cfg.producers, cfg.clients, kafka, cfg.topic, partitions, history,
                               stop_producers, rate=cfg.rate, delivery_timeout_s=cfg.delivery_timeout,
                               client_debug=cfg.client_debug, idempotent=cfg.idempotent,
                               idempotent_last=cfg.idempotent_producers, transactional=cfg.transactional)
    copier = (Copier(kafka, cfg.topic, partitions, threading.Event(), cfg.delivery_timeout)
              if cfg.transactional else None)
    txn_ids = (tuple(transactional_id(cfg.topic, p.name) for p in producers)
               + (copier_transactional_id(cfg.topic),)) if cfg.transactional else ()
    nemesis = Nemesis(cluster, kafka, cfg.topic, history, stop_faults, faults=cfg.faults, kills=cfg.kills,
                      interval=cfg.interval, downtime=cfg.downtime, wait_isr=cfg.wait_isr,
                      recovery_timeout=cfg.recovery_timeout, max_unrecovered=cfg.max_unrecovered,
                      seed=cfg.seed, session_timeout=cfg.session_timeout, disk=disk,
                      partitioner=partitioner, transactional_ids=txn_ids)
    snapshots = Snapshots(kafka, cfg.topic, partitions, history, stop_snapshots, cfg.snapshot_interval,
                          cfg.snapshot_tail, committed=cfg.transactional)
    history.invoke("runner", "workload", cfg.topic)
    started = time.monotonic()
    for p in producers:
        p.start()
    if copier is not None:
        copier.start()
    if cfg.snapshot_interval > 0:
        snapshots.start()
    try:
        try:
            time.sleep(cfg.warmup)
            if cfg.kills > 0:
                nemesis.start()
                budget = cfg.kills * (cfg.interval * 1.5 + cfg.downtime + cfg.recovery_timeout + 30) + 60
                nemesis.join(budget)
                if nemesis.is_alive():
                    stop_faults.set()
                    nemesis.join(cfg.recovery_timeout + 60)
                    raise RunError(f"the nemesis did not finish {cfg.kills} faults in {budget:.0f}s")
                if nemesis.error is not None:
                    raise RunError(f"nemesis: {nemesis.error!r}") from nemesis.error
            left = cfg.duration - (time.monotonic() - started)
            if left > 0:
                time.sleep(left)
        except KeyboardInterrupt:  # Ctrl-C: no more faults, but heal, read and check what happened
            log.warning("interrupted: stopping the faults, then healing, reading and checking")
            history.info("runner", "interrupted", None)
    finally:
        stop_faults.set()
        if nemesis.is_alive():
            nemesis.join(cfg.recovery_timeout + 60)
        nemesis.heal()
        try:
            wait_for_leaders(kafka, cfg.topic, cfg.partitions, cfg.recovery_timeout)
        finally:
            time.sleep(cfg.settle)
            stop_producers.set()
            history.ok("runner", "workload", cfg.topic)
            stop_snapshots.set()
            for p in producers:
                p.join(cfg.delivery_timeout + 60)
            if snapshots.is_alive():
                snapshots.join(cfg.read_timeout)
    errors = [f"{p.name}: {p.error!r}" for p in producers if p.error is not None]
    if errors:
        raise RunError("producer failed: " + "; ".join(errors))
    wait_for_leaders(kafka, cfg.topic, cfg.partitions, cfg.recovery_timeout)
    records, complete, read_errors = read_all(kafka, cfg.topic, partitions, timeout=cfg.read_timeout,
                                              committed=cfg.transactional)
    history.read("final", records, complete, error="; ".join(read_errors[:5]) or None)
    report = check(history, topic=cfg.topic,
                   client_reorders={p.name: why for p in producers if (why := p.reorder_reason())})
    report.idempotent_producers = sorted(p.name for p in producers if p.idempotent)
    if copier is not None:
        check_copier(copier, kafka, records, report, cfg.read_timeout)
    out.mkdir(parents=True, exist_ok=True)
    history.dump(out / "history.jsonl")
    (out / "report.json").write_text(json.dumps(report.to_json(), indent=2))
    log.info("verify: history and report in %s", out)
    return report, history
