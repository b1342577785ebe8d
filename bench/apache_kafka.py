"""Apache Kafka next to Odradek: resolve it from Maven Central, run KRaft or ZooKeeper-mode
clusters, run its tools.

    .venv/bin/python -m bench.apache_kafka resolve             # idempotent; prints the classpath dir
    .venv/bin/python -m bench.apache_kafka up --nodes 3 --dir DIR   # detached; DIR/cluster.json
    .venv/bin/python -m bench.apache_kafka up --nodes 3 --dir DIR --zookeeper 127.0.0.1:2181/kafka
    .venv/bin/python -m bench.apache_kafka status --dir DIR
    .venv/bin/python -m bench.apache_kafka down --dir DIR
    .venv/bin/python -m bench.apache_kafka run org.apache.kafka.tools.TopicCommand --bootstrap-server ... --list

(`scripts/kafka.sh` is the same with Maven installed first when it is missing.)

Resolution: `bench/kafka/pom.xml` names `kafka_2.13` and `kafka-tools` (3.9.x) and the logging
binding; Maven resolves their dependency closure (`dependency:copy-dependencies`) into
`.cache/kafka/<version>/libs` with its own local repository in `.cache/kafka/m2`. A stamp file
holding the pom's hash makes a second call free. `bench/kafka/*.java` (small clients the
benchmark needs that Kafka's tools do not offer) are compiled against those jars into
`.cache/kafka/<version>/classes`. Nothing of Kafka is committed. `bench/kafka4/pom.xml` (Kafka
4.x's clients and tools, no broker: `resolve --pom bench/kafka4/pom.xml`, ``pom=KAFKA4_POM`` in
``resolve`` / ``tool_argv`` / ``run_tool``) resolves the same way into `.cache/kafka/4.x.y`.

Clusters: every node is a combined KRaft broker+controller (`process.roles=broker,controller`)
on free 127.0.0.1 ports, formatted with `kafka.tools.StorageTool format`, started with
`kafka.Kafka` and the JVM options of Kafka's own start scripts (`-Xmx1G -Xms1G`, G1). PIDs and
process start times go to `<dir>/cluster.json`; `down` signals exactly those PIDs. With
``KafkaCluster(sasl_ssl=SaslSsl(...))`` every node also has a SASL_SSL listener named SECURE
(PLAIN users from a JAAS config, SCRAM-SHA-256/512 from the cluster metadata, a PEM keystore)
at ``secure_bootstrap``; the PLAINTEXT listener stays (unauthenticated admin, as in the tests).

ZooKeeper mode (Kafka 3.9 is its last release, and it is Odradek's architecture): with
``KafkaCluster(zookeeper="host:port/chroot")`` every node is a plain broker (``broker.id``,
``zookeeper.connect``, no formatting) and one of them is elected controller through
ZooKeeper's ``/controller`` znode, as in Kafka 1.x-3.x. The ZooKeeper server is the caller's
(bench/scale.py starts the project's own, ``odradek.dev.zookeeper``, as ``odradek dev up``
does). ``stop_node`` / ``start_node`` stop (SIGTERM: a controlled shutdown) or kill and restart
one node with the same ports and data.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from odradek.controller.zkstore import new_cluster_id
from odradek.dev import processes
from odradek.dev.access import properties_text
from odradek.dev.processes import ProcessRecord, start_time

ROOT = Path(__file__).resolve().parent.parent
POM = ROOT / "bench" / "kafka" / "pom.xml"
CACHE = ROOT / ".cache" / "kafka"
# Kafka 4.x's clients and tools only (no broker): the compat suite's KIP-848 tests
KAFKA4_POM = ROOT / "bench" / "kafka4" / "pom.xml"
# Kafka 4.x's broker (and bench/groups.py's GroupMembers client): its own home, 4.x.y-server
KAFKA4_SERVER_POM = ROOT / "bench" / "kafka4" / "server" / "pom.xml"
HOME_OVERRIDES = {KAFKA4_POM: "ODRADEK_KAFKA4_HOME", KAFKA4_SERVER_POM: "ODRADEK_KAFKA4_SERVER_HOME"}


def pom_version(pom: Path) -> str:
    return re.search(r"<kafka.version>([^<]+)</kafka.version>", pom.read_text()).group(1)


def cache_name(pom: Path) -> str:
    """The pom's directory under .cache/kafka: its ``cache.name`` property, else its Kafka version."""
    named = re.search(r"<cache.name>([^<]+)</cache.name>", pom.read_text())
    return named.group(1) if named else pom_version(pom)


KAFKA_VERSION = pom_version(POM)
HOME = CACHE / KAFKA_VERSION
KAFKA4_VERSION = pom_version(KAFKA4_POM)

# kafka-run-class.sh / kafka-server-start.sh defaults
BROKER_JVM = ["-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
              "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
              "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true"]
TOOL_JVM = ["-Xmx512M", "-XX:+UseG1GC", "-Djava.awt.headless=true"]
# ODRADEK_QUICK_TOOL_JVM=1 (the tests set it): a tool's JVM lives seconds, so C1 alone and the serial
# collector start it with ~35% less CPU; benchmarks keep TOOL_JVM (a Java client's throughput is measured)
QUICK_TOOL_JVM = ["-Xmx512M", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]
# what a node logs once it serves: KRaft's KafkaRaftServer, ZooKeeper mode's KafkaServer
STARTED = re.compile(r"Kafka Server started|\[KafkaServer id=\d+\] started")


class ResolutionError(RuntimeError):
    """Maven could not resolve Kafka (typically: Maven Central unreachable, or no `mvn`)."""


# -- resolution ----------------------------------------------------------------------------------

def home_of(pom: Path = POM) -> Path:
    """Where ``pom`` resolves: ``.cache/kafka/<cache name>``; ODRADEK_KAFKA4_HOME and
    ODRADEK_KAFKA4_SERVER_HOME move 4.x's (with its own Maven repository) elsewhere, e.g. out of
    a worktree's read-only shared cache."""
    override = os.environ.get(HOME_OVERRIDES[pom]) if pom in HOME_OVERRIDES else None
    return Path(override) if override else CACHE / cache_name(pom)


def _stamp(pom: Path = POM) -> str:
    h = hashlib.sha256(pom.read_bytes())
    for src in sorted(pom.parent.glob("*.java")):
        h.update(src.name.encode() + src.read_bytes())
    return h.hexdigest()


def resolve(quiet: bool = True, pom: Path = POM) -> Path:
    """Resolve (once) and return the home: ``libs/`` (jars), ``classes/`` (our Java clients,
    the ``*.java`` beside the pom)."""
    home = home_of(pom)
    stamp = home / "resolved.stamp"
    if stamp.exists() and stamp.read_text() == _stamp(pom):
        return home
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ResolutionError("`mvn` is not installed (scripts/kafka.sh installs Maven from Debian's packages)")
    libs, classes = home / "libs", home / "classes"
    tmp = home / "libs.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    # an overridden home keeps its own Maven repository (the shared one may be read-only)
    m2 = home / "m2" if home != CACHE / cache_name(pom) else CACHE / "m2"
    cmd = [mvn, "-B", *(["-q"] if quiet else []), "-f", str(pom), f"-Dmaven.repo.local={m2}",
           "dependency:copy-dependencies", f"-DoutputDirectory={tmp}", "-DincludeScope=runtime"]
    proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=900)
    if proc.returncode != 0:
        raise ResolutionError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    shutil.rmtree(libs, ignore_errors=True)
    tmp.rename(libs)
    shutil.rmtree(classes, ignore_errors=True)
    classes.mkdir(parents=True)
    sources = sorted(str(s) for s in pom.parent.glob("*.java"))
    if sources:
        javac = subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", str(libs / "*"), *sources],
                               capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
        if javac.returncode != 0:
            raise ResolutionError(f"javac failed:\n{javac.stdout}\n{javac.stderr}")
    stamp.write_text(_stamp(pom))
    return home


def classpath(pom: Path = POM) -> str:
    home = resolve(pom=pom)
    return f"{home / 'classes'}:{home / 'libs' / '*'}"


def tool_argv(main_class: str, *args: str, jvm: list[str] | None = None, pom: Path = POM) -> list[str]:
    """The java command line of a main class on ``pom``'s classpath (3.9's by default)."""
    log4j = HOME / "tools-log4j.properties"
    if not log4j.exists():
        log4j.write_text("log4j.rootLogger=WARN, stderr\n"
                         "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
                         "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
                         "log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
                         "log4j.appender.stderr.Target=System.err\n")
    default = QUICK_TOOL_JVM if os.environ.get("ODRADEK_QUICK_TOOL_JVM") == "1" else TOOL_JVM
    log4j2 = []
    if pom == KAFKA4_SERVER_POM:  # the one 4.x classpath with a Log4j 2 binding: warnings to stderr
        log4j2 = [f"-Dlog4j2.configurationFile={log4j2_properties(home_of(pom) / 'tools-log4j2.properties')}"]
    return ["java", *(jvm or default), f"-Dlog4j.configuration=file:{log4j}", *log4j2, "-cp", classpath(pom),
            main_class, *args]


def log4j2_properties(path: Path, log_file: Path | None = None) -> Path:
    """Kafka 4.x's logging (Log4j 2) as ``path``: INFO into ``log_file``, or WARN to stderr."""
    if log_file is None:
        appender = "appender.out.type = Console\nappender.out.target = SYSTEM_ERR\n"
    else:
        appender = f"appender.out.type = File\nappender.out.fileName = {log_file}\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{appender}appender.out.name = out\nappender.out.layout.type = PatternLayout\n"
                    "appender.out.layout.pattern = [%d] %p %m (%c)%n\n"
                    f"rootLogger.level = {'WARN' if log_file is None else 'INFO'}\nrootLogger.appenderRef.out.ref = out\n"
                    "logger.request.name = kafka.request.logger\nlogger.request.level = WARN\n")
    return path


def run_tool(main_class: str, *args: str, timeout: float = 300, input: str | None = None,
             check: bool = False, pom: Path = POM) -> subprocess.CompletedProcess:
    """Run one of Kafka's (or our) Java mains to completion; stdout/stderr captured as text."""
    argv = tool_argv(main_class, *args, pom=pom)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input,
                          stdin=None if input is not None else subprocess.DEVNULL)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{main_class} {' '.join(args)} exited {proc.returncode}:\n"
                           f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


# -- clusters ------------------------------------------------------------------------------------

def pem_keystore(pem_file: str | Path) -> dict[str, str]:
    """Kafka's PEM keystore settings for a file holding a private key (any format) and its
    certificate chain: inline, as unencrypted PKCS#8 (a keystore given by location must hold an
    encrypted key)."""
    from cryptography.hazmat.primitives.serialization import (Encoding, NoEncryption, PrivateFormat,
                                                              load_pem_private_key)
    pem = Path(pem_file).read_bytes()
    key = load_pem_private_key(pem, None).private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    chain = pem[pem.index(b"-----BEGIN CERTIFICATE-----"):]
    return {"ssl.keystore.type": "PEM", "ssl.keystore.key": key.decode(),
            "ssl.keystore.certificate.chain": chain.decode()}


@dataclass
class SaslSsl:
    """The SECURE listener: ``keystore`` is a PEM file with the broker's private key and
    certificate chain; ``plain_users`` are PLAIN's name -> password."""
    keystore: Path
    plain_users: dict[str, str]

    def properties(self) -> dict[str, str]:
        users = " ".join(f'user_{u}="{p}"' for u, p in self.plain_users.items())
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        return {"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                "listener.name.secure.plain.sasl.jaas.config":
                    f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};",
                "listener.name.secure.scram-sha-256.sasl.jaas.config": scram,
                "listener.name.secure.scram-sha-512.sasl.jaas.config": scram,
                **pem_keystore(self.keystore)}


def _read_from(path: Path, offset: int) -> str:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive(pid: int, started: int | None) -> bool:
    """The process we started is still running (a reused PID has another start time)."""
    return processes.alive(ProcessRecord("kafka", pid, started or 0, ""))


@dataclass
class KafkaCluster:
    """A KRaft cluster of ``nodes`` combined broker+controller processes under ``dir``."""
    dir: Path
    nodes: int = 1
    sasl_ssl: SaslSsl | None = None
    zookeeper: str | None = None  # ZooKeeper mode: zookeeper.connect (with a chroot); None: KRaft
    pom: Path = POM  # which Kafka: 3.9 (bench/kafka/pom.xml) or 4.x's broker (KAFKA4_SERVER_POM, KRaft only)
    ports: dict[int, int] = field(default_factory=dict)
    secure_ports: dict[int, int] = field(default_factory=dict)
    controller_ports: dict[int, int] = field(default_factory=dict)
    pids: dict[int, int] = field(default_factory=dict)
    start_times: dict[int, int | None] = field(default_factory=dict)
    _procs: dict[int, subprocess.Popen] = field(default_factory=dict, repr=False)
    _log_offsets: dict[int, int] = field(default_factory=dict, repr=False)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.ports[n]}" for n in sorted(self.ports))

    @property
    def secure_bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.secure_ports[n]}" for n in sorted(self.secure_ports))

    def state_file(self) -> Path:
        return self.dir / "cluster.json"

    def save(self) -> None:
        self.state_file().write_text(json.dumps({
            "kafka_version": pom_version(self.pom), "pom": str(self.pom), "nodes": self.nodes, "bootstrap_servers": self.bootstrap,
            "ports": self.ports, "secure_ports": self.secure_ports, "controller_ports": self.controller_ports,
            "pids": self.pids, "start_times": self.start_times, "zookeeper": self.zookeeper}, indent=2) + "\n")

    @classmethod
    def load(cls, dir: Path) -> "KafkaCluster":
        d = json.loads((dir / "cluster.json").read_text())
        return cls(dir=dir, nodes=d["nodes"], ports={int(k): v for k, v in d["ports"].items()},
                   secure_ports={int(k): v for k, v in d.get("secure_ports", {}).items()},
                   controller_ports={int(k): v for k, v in d["controller_ports"].items()},
                   pids={int(k): v for k, v in d["pids"].items()},
                   start_times={int(k): v for k, v in d["start_times"].items()}, zookeeper=d.get("zookeeper"),
                   pom=Path(d.get("pom", POM)))

    def _roles(self, node: int, voters: str) -> dict[str, str]:
        """The KRaft combined-node settings, or a ZooKeeper-mode broker's."""
        plaintext = f"PLAINTEXT://127.0.0.1:{self.ports[node]}"
        if self.zookeeper is not None:
            return {"broker.id": str(node), "zookeeper.connect": self.zookeeper, "listeners": plaintext,
                    "advertised.listeners": plaintext, "inter.broker.listener.name": "PLAINTEXT",
                    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT"}
        return {"process.roles": "broker,controller", "node.id": str(node), "controller.quorum.voters": voters,
                "listeners": f"{plaintext},CONTROLLER://127.0.0.1:{self.controller_ports[node]}",
                "advertised.listeners": plaintext, "controller.listener.names": "CONTROLLER",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"}

    def _properties(self, node: int, voters: str, extra: dict[str, str]) -> str:
        rf = min(self.nodes, 3)
        props = {
            **self._roles(node, voters),
            "log.dirs": str(self.dir / f"node-{node}" / "data"),
            "num.partitions": "1", "default.replication.factor": "1",
            "offsets.topic.replication.factor": str(rf), "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": str(rf),
            "transaction.state.log.min.isr": str(min(rf, 2)),
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
        }
        if self.sasl_ssl is not None:
            secure = f"SECURE://127.0.0.1:{self.secure_ports[node]}"
            props["listeners"] += f",{secure}"
            props["advertised.listeners"] += f",{secure}"
            props["listener.security.protocol.map"] += ",SECURE:SASL_SSL"
            props.update(self.sasl_ssl.properties())
        props.update(extra)
        return properties_text(props)

    def start(self, extra: dict[str, str] | None = None, timeout: float = 120) -> "KafkaCluster":
        home = resolve(pom=self.pom)
        self.dir.mkdir(parents=True, exist_ok=True)
        ids = list(range(1, self.nodes + 1))
        self.ports = {n: free_port() for n in ids}
        self.controller_ports = {n: free_port() for n in ids}
        self.secure_ports = {n: free_port() for n in ids} if self.sasl_ssl is not None else {}
        voters = ",".join(f"{n}@127.0.0.1:{self.controller_ports[n]}" for n in ids)
        cluster_id = new_cluster_id()
        try:
            for n in ids:
                nd = self.dir / f"node-{n}"
                nd.mkdir(parents=True, exist_ok=True)
                (nd / "server.properties").write_text(self._properties(n, voters, extra or {}))
                log4j2_properties(nd / "log4j2.properties", nd / "server.log")
                (nd / "log4j.properties").write_text(
                    "log4j.rootLogger=INFO, file\n"
                    "log4j.appender.file=org.apache.log4j.FileAppender\n"
                    f"log4j.appender.file.File={nd / 'server.log'}\n"
                    "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
                    "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
                    "log4j.logger.kafka.request.logger=WARN\nlog4j.logger.state.change.logger=WARN\n")
                if self.zookeeper is None:
                    run_tool("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c",
                             str(nd / "server.properties"), "--ignore-formatted", check=True, timeout=120, pom=self.pom)
            for n in ids:
                self._spawn(n, home)
            self.save()
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, n: int, home: Path) -> None:
        nd = self.dir / f"node-{n}"
        argv = ["java", *BROKER_JVM, f"-Dlog4j.configuration=file:{nd / 'log4j.properties'}",
                f"-Dlog4j2.configurationFile={nd / 'log4j2.properties'}",
                f"-Dkafka.logs.dir={nd}", "-cp", f"{home / 'libs' / '*'}", "kafka.Kafka",
                str(nd / "server.properties")]
        with open(nd / "stdout.log", "ab") as out:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        self._procs[n], self.pids[n] = p, p.pid
        self.start_times[n] = start_time(p.pid)
        self._log_offsets[n] = (nd / "server.log").stat().st_size if (nd / "server.log").exists() else 0

    def start_node(self, n: int, timeout: float = 120) -> None:
        """Start a stopped node again (same ports, same data); return once it serves."""
        if alive(self.pids[n], self.start_times.get(n)):
            raise RuntimeError(f"Kafka node {n} is already running")
        self._spawn(n, resolve(pom=self.pom))
        self.save()
        self.wait_ready(timeout, {n})

    def stop_node(self, n: int, sig: int = signal.SIGTERM, timeout: float = 300) -> float:
        """Signal one node (SIGTERM: Kafka's controlled shutdown; SIGKILL: a crash) and wait
        until it has exited; returns the seconds that took."""
        pid, started = self.pids[n], time.monotonic()
        if alive(pid, self.start_times.get(n)):
            os.kill(pid, sig)
        if not self._wait_exit(n, started + timeout):
            os.kill(pid, signal.SIGKILL)
            self._wait_exit(n, time.monotonic() + 30)
        return time.monotonic() - started

    def _wait_exit(self, n: int, deadline: float) -> bool:
        """Wait until node ``n``'s process has exited (True) or the deadline passed (False)."""
        while alive(self.pids[n], self.start_times.get(n)):
            if time.monotonic() > deadline:
                return False
            if n in self._procs:
                try:
                    self._procs[n].wait(0.05)
                except subprocess.TimeoutExpired:
                    pass
            else:
                time.sleep(0.05)
        return True

    def wait_ready(self, timeout: float, nodes: set[int] | None = None) -> None:
        """Every node's log says it started (since its last spawn) and its Kafka port accepts connections."""
        deadline = time.monotonic() + timeout
        pending = set(nodes if nodes is not None else self.ports)
        while pending:
            for n in list(pending):
                if not alive(self.pids[n], self.start_times.get(n)):
                    raise RuntimeError(f"Kafka node {n} exited:\n{self.log_tail(n)}")
                log = self.dir / f"node-{n}" / "server.log"
                started = log.exists() and STARTED.search(_read_from(log, self._log_offsets.get(n, 0))) is not None
                if started:
                    try:
                        socket.create_connection(("127.0.0.1", self.ports[n]), timeout=1).close()
                        pending.discard(n)
                    except OSError:
                        pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"Kafka nodes {sorted(pending)} not ready after {timeout}s:\n"
                                   + "\n".join(self.log_tail(n) for n in sorted(pending)))
            time.sleep(0.2)

    def log_tail(self, node: int, lines: int = 40) -> str:
        out = []
        for name in ("server.log", "stdout.log"):
            f = self.dir / f"node-{node}" / name
            if f.exists():
                out.append(f"--- {f}\n" + "\n".join(f.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(out)

    def stop(self, timeout: float = 30) -> list[str]:
        """SIGTERM each recorded PID (if it is still the process we started), SIGKILL after
        ``timeout``; returns what had to be killed."""
        killed = []
        live = {n: pid for n, pid in self.pids.items() if alive(pid, self.start_times.get(n))}
        for pid in live.values():
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + timeout
        for n, pid in live.items():
            if not self._wait_exit(n, deadline):
                os.kill(pid, signal.SIGKILL)
                killed.append(f"kafka node {n} (pid {pid})")
        for p in self._procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                pass
        return killed


# -- command line --------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/kafka.sh", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    res = sub.add_parser("resolve", help="resolve Kafka into .cache/kafka (idempotent)")
    res.add_argument("--pom", type=Path, default=POM, help=f"default {POM.relative_to(ROOT)}; "
                     f"Kafka 4.x's clients and tools: {KAFKA4_POM.relative_to(ROOT)}")
    up = sub.add_parser("up", help="start a KRaft (or, with --zookeeper, ZooKeeper-mode) cluster, detached")
    up.add_argument("--nodes", type=int, default=1)
    up.add_argument("--dir", type=Path, required=True)
    up.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    up.add_argument("--zookeeper", metavar="HOST:PORT/CHROOT", help="ZooKeeper mode (default: KRaft)")
    for name in ("down", "status"):
        p = sub.add_parser(name)
        p.add_argument("--dir", type=Path, required=True)
    run = sub.add_parser("run", help="run a Java main class with Kafka's classpath")
    run.add_argument("main_class")
    run.add_argument("args", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)

    if args.cmd == "resolve":
        print(resolve(quiet=False, pom=args.pom.resolve()))
    elif args.cmd == "up":
        extra = dict(kv.split("=", 1) for kv in args.config)
        c = KafkaCluster(args.dir.resolve(), nodes=args.nodes, zookeeper=args.zookeeper).start(extra)
        print(json.dumps({"bootstrap_servers": c.bootstrap, "pids": c.pids}))
    elif args.cmd == "status":
        c = KafkaCluster.load(args.dir.resolve())
        print(json.dumps({"bootstrap_servers": c.bootstrap,
                          "alive": {n: alive(p, c.start_times.get(n)) for n, p in c.pids.items()}}))
    elif args.cmd == "down":
        c = KafkaCluster.load(args.dir.resolve())
        killed = c.stop()
        if killed:
            print("killed after 30 s: " + ", ".join(killed), file=sys.stderr)
    elif args.cmd == "run":
        os.execvp("java", tool_argv(args.main_class, *args.args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
