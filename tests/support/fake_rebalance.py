"""A stand-in for the controller's rebalance routes (docs/control-plane.md, "Rebalance"), over the
``topics`` a ``FakeController`` reports, for the operator tests.

A tiny planner (remove-brokers: each replica on a broker to remove goes to the least loaded
other broker; add-brokers: replicas go from the most loaded brokers to the new ones up to the
mean; replication factors: replicas added on the least loaded brokers or dropped from the end)
and an executor a test steps: each poll (GET) makes one batch of ``concurrency`` moves, unless
``hold`` is set. Errors as
the controller's: BROKER_NOT_AVAILABLE, INVALID_REPLICATION_FACTOR, REASSIGNMENT_IN_PROGRESS,
INVALID_REPLICA_ASSIGNMENT (a stale move).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter
from typing import Callable

PATH = "/internal/v1/rebalance"


def _error(status: int, code: int, name: str, message: str) -> tuple[int, dict]:
    return status, {"error_code": code, "error": name, "message": message}


class FakeRebalancer:
    def __init__(self, topics: Callable[[], list[dict]]) -> None:
        self._topics = topics
        self.brokers = [0, 1, 2]            # the live brokers
        self.proposals: list[dict] = []     # the proposal requests received
        self.executions: list[dict] = []    # the execution requests received
        self.hold = False                   # True: polls make no progress
        self.proposal_error: tuple[int, dict] | None = None
        self.state: dict = self._idle()
        self._lock = threading.Lock()

    @staticmethod
    def _idle() -> dict:
        return {"id": None, "state": "idle", "moves_total": 0, "moves_done": 0, "moves_in_progress": 0,
                "bytes_total": 0, "bytes_moved": 0, "throttle_bytes_per_s": None, "started_ms": None,
                "finished_ms": None, "error": None}

    def answer(self, method: str, path: str, body: dict | None) -> tuple[int, dict]:
        with self._lock:
            if (method, path) == ("POST", PATH + "/proposals"):
                self.proposals.append(body)
                return self.proposal_error or self._propose(body)
            if (method, path) == ("POST", PATH):
                self.executions.append(body)
                return self._execute(body)
            if (method, path) == ("GET", PATH):
                self._step()
                return 200, dict(self.state)
            if (method, path) == ("DELETE", PATH):
                if self.state["state"] in ("executing", "stopping"):
                    self.state.update(state="stopped", moves_in_progress=0)
                return 200, dict(self.state)
            return _error(404, 42, "INVALID_REQUEST", path)

    # -- the planner ---------------------------------------------------------------------------
    def _partitions(self) -> list[tuple[str, dict]]:
        return [(t["name"], p) for t in self._topics() for p in t["partitions"]]

    def _propose(self, body: dict) -> tuple[int, dict]:
        mode, brokers = body.get("mode"), list(body.get("brokers") or [])
        live = sorted(set(self.brokers) | (set(brokers) if mode == "add-brokers" else set()))
        unknown = [b for b in brokers if b not in live]
        if unknown:
            return _error(404, 8, "BROKER_NOT_AVAILABLE", f"no broker {unknown[0]}")
        targets = [b for b in live if mode != "remove-brokers" or b not in brokers]
        load = Counter({b: 0 for b in live})
        for _, p in self._partitions():
            load.update(p["replicas"])
        moves = []
        for topic, p in self._partitions():
            after = self._place(topic, p, mode, brokers, targets, load, body.get("replication_factors") or {})
            if isinstance(after, tuple):
                return after
            if after != p["replicas"]:
                moves.append({"topic": topic, "partition": p["partition"], "before": p["replicas"], "after": after,
                              "bytes": 1000})
        pid = hashlib.sha256(json.dumps(moves, sort_keys=True).encode()).hexdigest()[:16]
        before, after = Counter(), Counter()
        changed = {(m["topic"], m["partition"]): m["after"] for m in moves}
        for topic, p in self._partitions():
            before.update(p["replicas"])
            after.update(changed.get((topic, p["partition"]), p["replicas"]))
        return 200, {"id": pid, "mode": mode, "moves": moves, "bytes_to_move": 1000 * len(moves),
                     "brokers": [{"id": b, "before": {"replicas": before[b], "leaders": 0, "bytes": 0},
                                  "after": {"replicas": after[b], "leaders": 0, "bytes": 0}} for b in live],
                     "notes": []}

    def _place(self, topic: str, p: dict, mode: str, brokers: list[int], targets: list[int], load: Counter,
               factors: dict) -> list[int] | tuple[int, dict]:
        replicas = list(p["replicas"])

        def least(exclude: list[int]) -> int:
            return min((b for b in targets if b not in exclude), key=lambda b: (load[b], b))
        if topic in factors:
            want = factors[topic]
            if not 1 <= want <= len(targets):
                return _error(400, 38, "INVALID_REPLICATION_FACTOR", f"replication factor {want}: "
                              f"{len(targets)} live brokers")
            while len(replicas) < want:
                b = least(replicas)
                load[b] += 1
                replicas.append(b)
            return replicas[:want]
        if mode == "remove-brokers":
            for i, b in enumerate(replicas):
                if b in brokers:
                    new = least(replicas)
                    load[b], load[new] = load[b] - 1, load[new] + 1
                    replicas[i] = new
        elif mode == "add-brokers":
            mean = sum(load.values()) // len(load)
            for b in brokers:
                if load[b] < mean and b not in replicas:
                    i = max(range(len(replicas)), key=lambda j: load[replicas[j]])
                    load[replicas[i]], load[b] = load[replicas[i]] - 1, load[b] + 1
                    replicas[i] = b
        return replicas

    # -- the executor --------------------------------------------------------------------------
    def _execute(self, body: dict) -> tuple[int, dict]:
        if self.state["state"] in ("executing", "stopping"):
            return _error(409, 60, "REASSIGNMENT_IN_PROGRESS", f"rebalance {self.state['id']} is executing")
        current = {(t, p["partition"]): p["replicas"] for t, p in self._partitions()}
        for m in body["moves"]:
            if current.get((m["topic"], m["partition"])) != m["before"]:
                return _error(400, 39, "INVALID_REPLICA_ASSIGNMENT",
                              f"{m['topic']}-{m['partition']} is no longer on {m['before']}: the proposal is stale")
        self.state = {**self._idle(), "id": body["proposal_id"], "state": "executing",
                      "moves_total": len(body["moves"]), "bytes_total": 1000 * len(body["moves"]),
                      "throttle_bytes_per_s": body.get("throttle_bytes_per_s"), "started_ms": 1}
        self._moves, self._concurrency = list(body["moves"]), body.get("concurrency") or 5
        if not self._moves:
            self.state.update(state="completed", finished_ms=2)
        return 202, dict(self.state)

    def _step(self) -> None:
        """One batch: up to ``concurrency`` moves."""
        if self.state["state"] != "executing" or self.hold:
            return
        done = self.state["moves_done"]
        for move in self._moves[done:done + self._concurrency]:
            for topic, p in self._partitions():
                if (topic, p["partition"]) == (move["topic"], move["partition"]):
                    p.update(replicas=list(move["after"]), isr=list(move["after"]), leader=move["after"][0])
        done = min(done + self._concurrency, len(self._moves))
        self.state.update(moves_done=done, bytes_moved=1000 * done)
        if done == self.state["moves_total"]:
            self.state.update(state="completed", finished_ms=2)
