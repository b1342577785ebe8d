"""The nemesis: crashes (SIGKILL) and restarts processes of a dev cluster at random moments.

Faults, among those enabled, dealt from a shuffled deck (every kind once per round, in random
order, so a short run with several kinds still has each of them):

- ``leader``: the broker leading a random partition of the topic (from a Metadata request);
- ``controller``: the active controller;
- ``broker``: a random broker.

One fault at a time: kill, stay down a random time (0..``downtime``), start again with
``odradek dev start``, then wait until the process is back (the broker registered afresh, with
a new registration epoch, and with ``wait_isr`` every partition's ISR full again; a controller
active under a newer controller epoch) before the next fault, so at most one process is ever
down: a minority for a 3-broker cluster. Every kill, start and
recovery is recorded in the history with its times.
"""

from __future__ import annotations

import json
import logging
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

from odradek.dev.harness import partition_leaders
from odradek.dev.waiting import wait_until

from .history import History

log = logging.getLogger("odradek.verify")

FAULTS = ("leader", "controller", "broker")


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
        return active_cluster({"controllers": self.status().get("controllers", [])})

    def names(self, status: dict | None = None) -> list[str]:
        st = status or self.status()
        return ([f"broker-{b}" for b in sorted(st.get("brokers", {}), key=int)]
                + [f"controller-{i}" for i in range(len(st.get("controllers", [])))])

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


class Nemesis(threading.Thread):
    def __init__(self, cluster: DevCluster, bootstrap: str, topic: str, history: History, stop: threading.Event,
                 *, faults: tuple[str, ...] = FAULTS, kills: int = 20, interval: float = 2.5,
                 downtime: float = 2.0, wait_isr: bool = True, recovery_timeout: float = 60.0,
                 max_unrecovered: int = 3, seed: int | None = None) -> None:
        super().__init__(name="nemesis", daemon=True)
        unknown = set(faults) - set(FAULTS)
        if unknown or not faults:
            raise ValueError(f"faults must be among {FAULTS}, got {faults}")
        self.cluster, self.bootstrap, self.topic, self.history = cluster, bootstrap, topic, history
        self.stop_event = stop
        self.faults, self.kills, self.interval, self.downtime = tuple(faults), kills, interval, downtime
        self.wait_isr, self.recovery_timeout = wait_isr, recovery_timeout
        self.max_unrecovered, self.unrecovered_in_a_row = max_unrecovered, 0
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
        if kind == "controller":
            name = self.cluster.active_controller()
            return (kind, name, "active controller") if name else None
        if kind == "leader":
            leaders = {p: l for p, l in partition_leaders(self.bootstrap, self.topic).items() if l >= 0}
            if not leaders:
                return None
            p = self.rng.choice(sorted(leaders))
            return kind, f"broker-{leaders[p]}", f"leader of partition {p}"
        brokers = [n for n in self.cluster.names() if n.startswith("broker-")]
        return kind, self.rng.choice(brokers), "random broker"

    def fault(self) -> None:
        target = self.choose()
        if target is None:
            self.history.info("nemesis", "kill", None, error="no target available")
            return
        kind, name, why = target
        self.done += 1
        before = self.incarnation(name)
        log.info("nemesis %d/%d: kill -9 %s (%s)", self.done, self.kills, name, why)
        self.history.invoke("nemesis", "kill", name, data={"kind": kind, "why": why})
        self.cluster.kill(name)
        self.history.ok("nemesis", "kill", name, data={"kind": kind})
        self.stop_event.wait(self.rng.uniform(0, self.downtime))
        self.restart(name, before)

    def incarnation(self, name: str) -> int | None:
        """What must change for ``name`` to count as back: a broker's registration epoch (the
        znode's czxid; a crashed broker stays registered until its ZooKeeper session expires),
        the controller epoch for a controller. None when unknown."""
        try:
            view = self.cluster.view()
        except Exception:
            return None
        if view is None:
            return None
        if name.startswith("controller-"):
            return view.get("controller_epoch")
        broker_id = int(name.removeprefix("broker-"))
        return next((b.get("epoch") for b in view.get("brokers", []) if b["id"] == broker_id), None)

    def restart(self, name: str, before: int | None) -> None:
        self.history.invoke("nemesis", "start", name)
        self.cluster.start(name)
        self.history.ok("nemesis", "start", name)
        started = time.monotonic()
        recovered = self.wait_recovered(name, before)
        took = round(time.monotonic() - started, 3)
        self.unrecovered_in_a_row = 0 if recovered else self.unrecovered_in_a_row + 1
        if recovered:
            self.history.ok("nemesis", "recovered", name, data={"seconds": took})
            log.info("nemesis: %s back after %.1fs", name, took)
        else:
            self.history.info("nemesis", "recovered", name, error=f"not recovered after {took}s")
            log.warning("nemesis: %s not recovered after %.1fs", name, took)

    def wait_recovered(self, name: str, before: int | None) -> bool:
        # a failing check counts as "not yet": the controller may be between instances
        try:
            return wait_until(lambda: self.recovered(name, before), self.recovery_timeout, f"{name} to recover", 0.2)
        except TimeoutError as e:
            log.debug("%s", e)
            return False

    def recovered(self, name: str, before: int | None) -> bool:
        """Running again, and seen as a new incarnation by the active controller (a broker
        registered afresh and, with ``wait_isr``, every partition's ISR full; a controller
        active, or another one, under a newer controller epoch)."""
        if name not in self.cluster.status().get("pids", {}):
            return False
        view = self.cluster.view()
        if view is None:
            return False
        if name.startswith("controller-"):
            return before is None or view.get("controller_epoch", -1) > before
        broker_id = int(name.removeprefix("broker-"))
        epoch = next((b.get("epoch") for b in view.get("brokers", []) if b["id"] == broker_id), None)
        if epoch is None or (before is not None and epoch == before):
            return False
        if not self.wait_isr:
            return True
        for t in view.get("topics", []):
            if t["name"] == self.topic:
                return all(len(p["isr"]) == len(p["replicas"]) and p["leader"] >= 0 for p in t["partitions"])
        return False

    def heal(self) -> list[str]:
        """Start every process of the cluster that is down; returns their names."""
        down = self.cluster.down()
        for name in down:
            log.info("heal: starting %s", name)
            self.restart(name, self.incarnation(name))
        self.history.ok("nemesis", "heal", down)
        return down
