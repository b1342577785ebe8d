"""The control-plane contract of the controller's rebalance executor (docs/control-plane.md,
"Rebalance"): its routes and their bodies, frozen dataclasses with ``to_json``/``from_json``
(a request's ``from_json`` raises INVALID_REQUEST). Callers: the operator (OdradekRebalance,
autoRebalance, OdradekTopic replication-factor changes) and ``odradek rebalance --data-dir``.

- ``PROPOSALS`` (POST): a ``ProposalRequest`` in, a ``ProposalView`` out; changes nothing.
- ``EXECUTE`` (POST): an ``ExecuteRequest`` (a proposal's moves) in, 202 ``RebalanceStatus``.
- ``STATUS`` (GET) and ``STOP`` (DELETE): the ``RebalanceStatus``.

``RebalanceStatus.state``: ``idle`` (none ever ran), ``executing``, ``stopping``, ``stopped``,
``completed``, ``failed``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Mapping

from odradek.cluster.control_plane_base import PREFIX, Request, Route, _bad, _field, _ids

MODES = ("full", "add-brokers", "remove-brokers")
STATES = ("idle", "executing", "stopping", "stopped", "completed", "failed")
RUNNING_STATES = ("executing", "stopping")
DEFAULT_CONCURRENCY = 5


@dataclass(frozen=True, slots=True)
class ProposalRequest:
    mode: str = "full"
    brokers: tuple[int, ...] = ()
    replication_factors: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"mode": self.mode, "brokers": list(self.brokers), "replication_factors": dict(self.replication_factors)}

    @classmethod
    def from_json(cls, body: Mapping) -> "ProposalRequest":
        mode = _field(body, "mode", str, "full")
        if mode not in MODES:
            raise _bad(f"'mode' must be one of {', '.join(MODES)}, got {mode!r}")
        brokers = _ids(_field(body, "brokers", list, []), "'brokers' must be a list of broker ids")
        if mode != "full" and not brokers:
            raise _bad(f"mode {mode} needs 'brokers'")
        factors = _field(body, "replication_factors", dict, {}, nullable=True)
        if not all(isinstance(t, str) and isinstance(n, int) and not isinstance(n, bool) for t, n in factors.items()):
            raise _bad("'replication_factors' must map topic names to integers")
        return cls(mode, brokers, dict(factors))


@dataclass(frozen=True, slots=True)
class MoveView:
    """One partition's reassignment ``before`` -> ``after``; ``bytes`` its new replicas copy."""

    topic: str
    partition: int
    before: tuple[int, ...]
    after: tuple[int, ...]
    bytes: int = 0

    def to_json(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "before": list(self.before),
                "after": list(self.after), "bytes": self.bytes}

    @classmethod
    def from_json(cls, d: Mapping) -> "MoveView":
        if not isinstance(d, Mapping):
            raise _bad("each move must be an object")
        before = _ids(_field(d, "before", list), "'before' must be a list of broker ids")
        after = _ids(_field(d, "after", list), "'after' must be a list of broker ids")
        if not after or len(set(after)) != len(after):
            raise _bad("a move's 'after' must name distinct brokers")
        return cls(_field(d, "topic", str), _field(d, "partition", int), before, after, _field(d, "bytes", int, 0))


def proposal_id(moves: tuple[MoveView, ...]) -> str:
    """The hex digest of the moves: the same plan has the same id on every controller."""
    canonical = json.dumps([m.to_json() for m in moves], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Load:
    replicas: int = 0
    leaders: int = 0
    bytes: int = 0

    def to_json(self) -> dict:
        return {"replicas": self.replicas, "leaders": self.leaders, "bytes": self.bytes}

    @classmethod
    def from_json(cls, d: Mapping) -> "Load":
        return cls(int(d["replicas"]), int(d["leaders"]), int(d["bytes"]))


@dataclass(frozen=True, slots=True)
class BrokerLoads:
    id: int
    before: Load
    after: Load

    def to_json(self) -> dict:
        return {"id": self.id, "before": self.before.to_json(), "after": self.after.to_json()}

    @classmethod
    def from_json(cls, d: Mapping) -> "BrokerLoads":
        return cls(int(d["id"]), Load.from_json(d["before"]), Load.from_json(d["after"]))


@dataclass(frozen=True, slots=True)
class ProposalView:
    id: str
    mode: str
    moves: tuple[MoveView, ...]
    bytes_to_move: int
    brokers: tuple[BrokerLoads, ...]
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"id": self.id, "mode": self.mode, "moves": [m.to_json() for m in self.moves],
                "bytes_to_move": self.bytes_to_move, "brokers": [b.to_json() for b in self.brokers],
                "notes": list(self.notes)}

    @classmethod
    def from_json(cls, d: Mapping) -> "ProposalView":
        return cls(d["id"], d["mode"], tuple(MoveView.from_json(m) for m in d["moves"]), int(d["bytes_to_move"]),
                   tuple(BrokerLoads.from_json(b) for b in d["brokers"]), tuple(d.get("notes", ())))


@dataclass(frozen=True, slots=True)
class ExecuteRequest:
    proposal_id: str
    moves: tuple[MoveView, ...]
    throttle_bytes_per_s: int | None = None
    concurrency: int = DEFAULT_CONCURRENCY

    def to_json(self) -> dict:
        return {"proposal_id": self.proposal_id, "moves": [m.to_json() for m in self.moves],
                "throttle_bytes_per_s": self.throttle_bytes_per_s, "concurrency": self.concurrency}

    @classmethod
    def from_json(cls, body: Mapping) -> "ExecuteRequest":
        moves = tuple(MoveView.from_json(m) for m in _field(body, "moves", list))
        keys = [(m.topic, m.partition) for m in moves]
        if len(set(keys)) != len(keys):
            raise _bad("a partition appears more than once in 'moves'")
        throttle = _field(body, "throttle_bytes_per_s", int, None, nullable=True)
        if throttle is not None and throttle <= 0:
            raise _bad("'throttle_bytes_per_s' must be positive (or null: no throttle)")
        concurrency = _field(body, "concurrency", int, DEFAULT_CONCURRENCY, nullable=True)
        if concurrency < 1:
            raise _bad("'concurrency' must be at least 1")
        return cls(_field(body, "proposal_id", str, "", nullable=True) or proposal_id(moves), moves, throttle,
                   concurrency)


@dataclass(frozen=True, slots=True)
class RebalanceStatus:
    id: str | None = None
    state: str = "idle"
    moves_total: int = 0
    moves_done: int = 0
    moves_in_progress: int = 0
    bytes_total: int = 0
    bytes_moved: int = 0
    throttle_bytes_per_s: int | None = None
    started_ms: int | None = None
    finished_ms: int | None = None
    error: str | None = None

    @property
    def running(self) -> bool:
        return self.state in RUNNING_STATES

    def to_json(self) -> dict:
        return {"id": self.id, "state": self.state, "moves_total": self.moves_total, "moves_done": self.moves_done,
                "moves_in_progress": self.moves_in_progress, "bytes_total": self.bytes_total,
                "bytes_moved": self.bytes_moved, "throttle_bytes_per_s": self.throttle_bytes_per_s,
                "started_ms": self.started_ms, "finished_ms": self.finished_ms, "error": self.error}

    @classmethod
    def from_json(cls, d: Mapping) -> "RebalanceStatus":
        return cls(d.get("id"), d["state"], int(d["moves_total"]), int(d["moves_done"]),
                   int(d["moves_in_progress"]), int(d["bytes_total"]), int(d["bytes_moved"]),
                   d.get("throttle_bytes_per_s"), d.get("started_ms"), d.get("finished_ms"), d.get("error"))


PROPOSALS = Route("POST", PREFIX + "/rebalance/proposals", ProposalView.from_json)
EXECUTE = Route("POST", PREFIX + "/rebalance", RebalanceStatus.from_json)
STATUS = Route("GET", PREFIX + "/rebalance", RebalanceStatus.from_json)
STOP = Route("DELETE", PREFIX + "/rebalance", RebalanceStatus.from_json)
REBALANCE_ROUTES = (PROPOSALS, EXECUTE, STATUS, STOP)


def propose(req: ProposalRequest) -> Request[ProposalView]:
    return Request(PROPOSALS, PROPOSALS.path(), req.to_json())


def execute(req: ExecuteRequest) -> Request[RebalanceStatus]:
    return Request(EXECUTE, EXECUTE.path(), req.to_json())


def status() -> Request[RebalanceStatus]:
    return Request(STATUS, STATUS.path())


def stop() -> Request[RebalanceStatus]:
    return Request(STOP, STOP.path())
