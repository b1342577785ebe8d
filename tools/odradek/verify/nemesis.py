"""The nemesis: faults injected into a dev cluster at random moments, one at a time.

Kinds of fault (``faults.KINDS``: kills, pauses, ZooKeeper outages, a full disk, a network
partition), among those enabled, are dealt from a shuffled deck (every kind once per round, in
random order, so a short run with several kinds still has each of them).

One fault at a time: inject, hold, heal (``Kind.act``), then wait until the cluster is whole
again before the next fault: a restarted process back as a new incarnation (a broker with a new
registration epoch, a controller active under a newer controller epoch), every process running,
every broker registered and, with ``wait_isr``, every partition's ISR full. At most one process
is ever down or cut off: a minority of a 3-broker cluster. Every fault and recovery is recorded
in the history (``fault`` with its kind, ``recovered``) with its times.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from odradek.dev.access import KafkaAccess
from odradek.dev.processes import ProcessRecord, alive
from odradek.dev.waiting import wait_until

from .faults import FAULTS, KINDS
from .history import History

log = logging.getLogger("odradek.verify")


class DevCluster:
    """A dev cluster driven through ``odradek dev ... --data-dir DIR``."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)

    def dev(self, *args: str, timeout: float = 120.0) -> str:
        argv = [sys.executable, "-m", "odradek.cli", "dev", *args, "--data-dir", str(self.data_dir)]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise RuntimeError(f"odradek dev {' '.join(args)} exited {proc.returncode}: "
                               f"{(proc.stderr or proc.stdout).strip()}")
        return proc.stdout

    def status(self) -> dict:
        return json.loads(self.dev("status", "--json"))

    def view(self) -> dict | None:
        """The active controller's view of the cluster (brokers, partitions, ISR), or None."""
        from odradek.dev.cluster import active_cluster
        return active_cluster(self.state())   # the saved state: controllers and their TLS settings

    def names(self, status: dict | None = None) -> list[str]:
        st = status or self.status()
        return ([f"broker-{b}" for b in sorted(st.get("brokers", {}), key=int)]
                + [f"controller-{i}" for i in range(len(st.get("controllers", [])))]
                + (["zookeeper"] if st.get("zookeeper") else []))

    def down(self) -> list[str]:
        st = self.status()
        return [n for n in self.names(st) if n not in st.get("pids", {})]

    def active_controller(self) -> str | None:
        st = self.status()
        url = st.get("controller_url")
        return f"controller-{st['controllers'].index(url)}" if url in st.get("controllers", []) else None

    def kill(self, name: str) -> None:
        self.dev("kill", name)

    def start(self, name: str) -> None:
        self.dev("start", name.removeprefix("broker-") if name.startswith("broker-") else name)

    def state(self) -> dict:
        return json.loads((self.data_dir / "cluster.json").read_text())

    def signal(self, name: str, sig: int) -> bool:
        """Send ``sig`` to the process ``name`` if it is still the recorded one; False if gone."""
        rec = ProcessRecord.from_json(self.state()["processes"][name])
        if not alive(rec):
            return False
        os.kill(rec.pid, sig)
        return True


class Nemesis(threading.Thread):
    def __init__(self, cluster: DevCluster, kafka: KafkaAccess, topic: str, history: History, stop: threading.Event,
                 *, faults: tuple[str, ...] = FAULTS, kills: int = 20, interval: float = 2.5,
                 downtime: float = 2.0, wait_isr: bool = True, recovery_timeout: float = 60.0,
                 max_unrecovered: int = 3, seed: int | None = None, session_timeout: float = 10.0,
                 disk=None, partitioner=None, transactional_ids: tuple[str, ...] = ()) -> None:
        super().__init__(name="nemesis", daemon=True)
        unknown = set(faults) - set(FAULTS)
        if unknown or not faults:
            raise ValueError(f"faults must be among {FAULTS}, got {faults}")
        self.cluster, self.kafka, self.topic, self.history = cluster, kafka, topic, history
        self.stop_event = stop
        self.faults, self.kills, self.interval, self.downtime = tuple(faults), kills, interval, downtime
        self.wait_isr, self.recovery_timeout = wait_isr, recovery_timeout
        self.max_unrecovered, self.unrecovered_in_a_row = max_unrecovered, 0
        self.session_timeout = session_timeout  # the brokers' ZooKeeper session timeout, seconds
        self.disk, self.partitioner = disk, partitioner
        self.transactional_ids = transactional_ids  # whose coordinators the ``coordinator`` fault kills
        self.paused: set[str] = set()
        self.rng = random.Random(seed)
        self.deck: list[str] = []
        self.done = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while self.done < self.kills and not self.stop_event.is_set():
                if self.stop_event.wait(self.rng.uniform(0.5, 1.5) * self.interval):
                    break
                self.fault()
                if self.max_unrecovered and self.unrecovered_in_a_row >= self.max_unrecovered:
                    log.warning("nemesis: %d faults in a row not recovered from; no more faults",
                                self.unrecovered_in_a_row)
                    self.history.info("nemesis", "stop", None,
                                      error=f"{self.unrecovered_in_a_row} faults in a row not recovered from")
                    break
        except BaseException as e:
            log.exception("nemesis failed")
            self.error = e

    def choose(self) -> tuple[str, str, str] | None:
        """(kind, process name, why) of the next fault, or None when no target is available."""
        if not self.deck:
            self.deck = list(self.faults)
            self.rng.shuffle(self.deck)
        kind = self.deck.pop()
        target = KINDS[kind].target(self)
        return None if target is None else (kind, *target)

    def fault(self) -> None:
        target = self.choose()
        if target is None:
            self.history.info("nemesis", "fault", None, error="no target available")
            return
        kind, name, why = target
        self.done += 1
        before = self.incarnation(name) if KINDS[kind].fresh else None
        log.info("nemesis %d/%d: %s %s (%s)", self.done, self.kills, kind, name, why)
        self.history.invoke("nemesis", "fault", name, data={"kind": kind, "why": why})
        try:
            done = KINDS[kind].act(self, name)
        except Exception as e:
            self.history.info("nemesis", "fault", name, data={"kind": kind}, error=repr(e))
            raise
        self.history.ok("nemesis", "fault", name, data={"kind": kind, **done})
        self.await_recovery(name, before, KINDS[kind].fresh)

    def incarnation(self, name: str) -> int | None:
        """What must change for ``name`` to count as back: a broker's registration epoch (the
        znode's czxid; a crashed broker stays registered until its ZooKeeper session expires),
        the controller epoch for a controller. None when unknown."""
        try:
            view = self.cluster.view()
        except Exception:
            return None
        if view is None or name == "zookeeper":
            return None
        if name.startswith("controller-"):
            return view.get("controller_epoch")
        broker_id = int(name.removeprefix("broker-"))
        return next((b.get("epoch") for b in view.get("brokers", []) if b["id"] == broker_id), None)

    def restart(self, name: str, before: int | None) -> None:
        self.history.invoke("nemesis", "start", name)
        self.cluster.start(name)
        self.history.ok("nemesis", "start", name)
        self.await_recovery(name, before, name != "zookeeper")

    def await_recovery(self, name: str, before: int | None, fresh: bool) -> None:
        started = time.monotonic()
        recovered = self.wait_recovered(name, before, fresh)
        took = round(time.monotonic() - started, 3)
        self.unrecovered_in_a_row = 0 if recovered else self.unrecovered_in_a_row + 1
        if recovered:
            self.history.ok("nemesis", "recovered", name, data={"seconds": took})
            log.info("nemesis: %s back after %.1fs", name, took)
        else:
            self.history.info("nemesis", "recovered", name, error=f"not recovered after {took}s")
            log.warning("nemesis: %s not recovered after %.1fs", name, took)

    def wait_recovered(self, name: str, before: int | None, fresh: bool = True) -> bool:
        # a failing check counts as "not yet": the controller may be between instances
        def check() -> bool:
            self.start_casualties()
            return self.recovered(name, before) if fresh else self.whole()
        try:
            return wait_until(check, self.recovery_timeout, f"{name} to recover", 0.2)
        except TimeoutError as e:
            log.debug("%s", e)
            return False

    def start_casualties(self) -> None:
        """Start every process that is down once a fault has done its act: none of them was
        meant to stay down (a broker whose log directory went offline on the full disk exits,
        sometimes long after the disk is freed)."""
        for name in self.cluster.down():
            log.info("nemesis: %s is down, a casualty: starting it", name)
            self.history.invoke("nemesis", "start", name, data={"casualty": True})
            self.cluster.start(name)
            self.history.ok("nemesis", "start", name)

    def recovered(self, name: str, before: int | None) -> bool:
        """Running again, and seen as a new incarnation by the active controller (a broker
        registered afresh; a controller active, or another one, under a newer controller
        epoch), and the cluster whole."""
        if name not in self.cluster.status().get("pids", {}):
            return False
        view = self.cluster.view()
        if view is None:
            return False
        if name.startswith("controller-"):
            return (before is None or view.get("controller_epoch", -1) > before) and self.whole(view)
        broker_id = int(name.removeprefix("broker-"))
        epoch = next((b.get("epoch") for b in view.get("brokers", []) if b["id"] == broker_id), None)
        if epoch is None or (before is not None and epoch == before):
            return False
        return self.whole(view)

    def whole(self, view: dict | None = None) -> bool:
        """Every process running, every broker registered and (``wait_isr``) every partition
        of the topic led, with its ISR full."""
        status = self.cluster.status()
        if any(n not in status.get("pids", {}) for n in self.cluster.names(status)):
            return False
        view = view or self.cluster.view()
        if view is None:
            return False
        registered = {b["id"] for b in view.get("brokers", [])}
        if any(int(b) not in registered for b in status.get("brokers", {})):
            return False
        if not self.wait_isr:
            return True
        for t in view.get("topics", []):
            if t["name"] == self.topic:
                return all(len(p["isr"]) == len(p["replicas"]) and p["leader"] >= 0 for p in t["partitions"])
        return False

    def heal(self) -> list[str]:
        """Undo whatever fault is still in place (a paused process, a cut network, a filler
        file) and start every process of the cluster that is down; returns their names."""
        for name in list(self.paused):
            self.cluster.signal(name, signal.SIGCONT)
            self.paused.discard(name)
        if self.partitioner is not None:
            self.partitioner.heal()
        if self.disk is not None:
            self.disk.free()
        down = self.cluster.down()
        if "zookeeper" in down:  # first: nothing else registers without it
            down.remove("zookeeper")
            down.insert(0, "zookeeper")
        for name in down:
            log.info("heal: starting %s", name)
            self.restart(name, self.incarnation(name))
        self.history.ok("nemesis", "heal", down)
        return down
