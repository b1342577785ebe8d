"""Analysis of a verify history: what the log did with what the producers sent.

``check(history)`` looks at the ``send`` operations (what was invoked, acknowledged, failed
or left indeterminate), the ``read`` operations (mid-run snapshots and the ``final`` read of
every partition from offset 0 to its high watermark) and the nemesis' ``fault`` operations,
and reports:

- **lost**: acknowledged (``ok``) values that the final read does not hold. An acknowledged
  value the final read could not reach (its partition's read was incomplete) is counted as
  ``unverifiable``, and an incomplete final read fails the run too.
- **duplicated**: a value at more than one (partition, offset). Without the idempotent
  producer, a retried batch whose first attempt was written is a legitimate duplicate; an
  idempotent producer's (``Report.idempotent_producers``) always fails the run.
- **reordered**: within one partition, a producer's value at a higher offset than a value
  that producer sent later (its sequence number is larger), for producers whose client keeps
  order under retries: idempotent ones (Kafka's guarantee of order under retries) and plain
  ones at ``max.in.flight.requests.per.connection=1`` that mute a partition while its batch is
  in flight (kafka-python, as Java's producer). Those reorders are the broker's and fail the
  run. A producer named in ``check``'s ``client_reorders`` (a plain librdkafka producer: its
  limit is per connection, not per partition, librdkafka#1969) can reorder by itself across a
  leader change: its reorders go to **reordered_by_client**, with the reason, reported and not
  failed. Only a value's first occurrence counts: a retried batch written twice repeats
  earlier values after later ones, which is duplication (above), not reordering.
- **phantom**: a value read (in any read) that no producer ever sent, or whose send
  certainly failed.
- **inconsistent**: an offset that changed meaning: two reads (snapshots or final) saw
  different values at the same (partition, offset); a snapshot saw an offset the final
  read (complete up to the high watermark) no longer has; a value acknowledged at one offset
  but found at another; offsets not strictly increasing within one read.
- **stale**: a snapshot ending below an offset acknowledged before it started (reported, not
  failed; ``attribution``).
- **per nemesis**: each anomaly counted under the kind of fault it happened during
  (``attribution``), a table per kind.
- **unavailability**: the longest time without any acknowledgement (across all producers,
  and per partition), bounded by the start and end of the workload.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field

from . import attribution
from .history import FAIL, INFO, INVOKE, OK, History, Op, parse_value, read_records

EXAMPLES = 20


@dataclass
class Gap:
    seconds: float
    start: float   # seconds since the workload started
    end: float
    faults: list[str] = field(default_factory=list)  # faults injected during (or just before) the gap


@dataclass
class Report:
    topic: str | None = None
    sent: int = 0
    acked: int = 0
    failed: int = 0
    indeterminate: int = 0
    indeterminate_found: int = 0        # indeterminate sends the final read holds anyway
    read: int = 0                       # records in the final read
    snapshots: int = 0
    final_incomplete: list[int] = field(default_factory=list)
    unverifiable: int = 0
    lost: list[dict] = field(default_factory=list)
    duplicated: list[dict] = field(default_factory=list)
    reordered: list[dict] = field(default_factory=list)
    reordered_by_client: list[dict] = field(default_factory=list)  # plain producers' own reorders (not failed)
    phantom: list[dict] = field(default_factory=list)
    inconsistent: list[dict] = field(default_factory=list)
    stale: list[dict] = field(default_factory=list)   # snapshots behind an acknowledgement (not failed)
    per_nemesis: dict[str, dict[str, int]] = field(default_factory=dict)
    gaps_in_offsets: int = 0            # holes in a partition's offsets (reported, not failed)
    longest_unavailability: Gap | None = None
    unavailability_per_partition: dict[int, Gap] = field(default_factory=dict)
    unavailability_per_producer: dict[str, Gap] = field(default_factory=dict)  # a stalled client shows here
    faults: dict[str, int] = field(default_factory=dict)
    unrecovered: list[dict] = field(default_factory=list)  # restarted processes the cluster never took back
    duration: float = 0.0
    per_producer: dict[str, dict[str, int]] = field(default_factory=dict)
    copied: int = 0                     # --transactional: the copier's committed outputs (verify.copier)
    copy: list[dict] = field(default_factory=list)   # its anomalies: offsets not atomic with the output
    copier: dict = field(default_factory=dict)
    idempotent_producers: list[str] = field(default_factory=list)  # their duplicates always fail

    def duplicated_by_idempotent(self) -> list[dict]:
        """Duplicates of an idempotent producer's values: the broker's fault whatever the run's mode."""
        return [d for d in self.duplicated if (parse_value(d["value"]) or ("",))[0] in self.idempotent_producers]

    def problems(self, fail_on_duplicates: bool = False) -> list[str]:
        """Why the run fails (empty: it passes)."""
        out = []
        if self.final_incomplete:
            out.append(f"final read incomplete for partitions {self.final_incomplete}")
        for name in ("lost", "reordered", "phantom", "inconsistent"):
            if getattr(self, name):
                out.append(f"{len(getattr(self, name))} {name}")
        if self.copy:
            out.append(f"{len(self.copy)} copy anomalies (offsets not committed atomically with the output)")
        if fail_on_duplicates and self.duplicated:
            out.append(f"{len(self.duplicated)} duplicated")
        elif self.duplicated_by_idempotent():
            out.append(f"{len(self.duplicated_by_idempotent())} duplicated by idempotent producers")
        if self.acked == 0:
            out.append("no send was acknowledged")
        return out

    def to_json(self, examples: int = EXAMPLES) -> dict:
        d = asdict(self)
        for name in ("lost", "duplicated", "reordered", "reordered_by_client", "phantom", "inconsistent", "stale",
                     "copy"):
            items = getattr(self, name)
            d[name] = {"count": len(items), "examples": items[:examples]}
        by_idempotent = self.duplicated_by_idempotent()
        d["duplicated_by_idempotent"] = {"count": len(by_idempotent), "examples": by_idempotent[:examples]}
        d["unavailability_per_partition"] = {str(p): asdict(g) for p, g in
                                             sorted(self.unavailability_per_partition.items())}
        d["unavailability_per_producer"] = {p: asdict(g) for p, g in
                                            sorted(self.unavailability_per_producer.items())}
        return d

    def summary(self, fail_on_duplicates: bool = False) -> str:
        lines = [f"topic {self.topic}: {self.duration:.1f}s, faults {dict(self.faults) or 'none'}",
                 f"  sent {self.sent}, acknowledged {self.acked}, failed {self.failed}, "
                 f"indeterminate {self.indeterminate} ({self.indeterminate_found} of them were written)",
                 f"  final read: {self.read} records; {self.snapshots} mid-run snapshots",
                 f"  lost (acknowledged, not read): {len(self.lost)}"
                 + (f"; unverifiable {self.unverifiable}" if self.unverifiable else ""),
                 f"  duplicated:   {len(self.duplicated)}",
                 f"  reordered:    {len(self.reordered)}"
                 + (f" (and {len(self.reordered_by_client)} by plain producers' clients, not failed)"
                    if self.reordered_by_client else ""),
                 f"  phantom:      {len(self.phantom)}",
                 f"  inconsistent offsets: {len(self.inconsistent)}",
                 f"  stale reads:  {len(self.stale)}"]
        if self.copier:
            lines.append(f"  copier: {self.copied} outputs committed, {self.copier}, anomalies {len(self.copy)}")
            lines += [f"  e.g. copy: {ex}" for ex in self.copy[:3]]
        lines += attribution.table_lines(self.per_nemesis)
        if self.unrecovered:
            lines.append(f"  NOT RECOVERED (availability, not safety): {len(self.unrecovered)} restarts, "
                         f"first {self.unrecovered[0]}")
        if self.gaps_in_offsets:
            lines.append(f"  holes in offsets: {self.gaps_in_offsets}")
        if self.longest_unavailability:
            g = self.longest_unavailability
            lines.append(f"  longest unavailability: {g.seconds:.2f}s (t={g.start:.1f}s..{g.end:.1f}s"
                         + (f", after {', '.join(g.faults)}" if g.faults else "") + ")")
        if self.unavailability_per_partition:
            worst = max(self.unavailability_per_partition.items(), key=lambda kv: kv[1].seconds)
            lines.append("  per partition: " + ", ".join(
                f"p{p} {g.seconds:.1f}s" for p, g in sorted(self.unavailability_per_partition.items()))
                + f" (worst p{worst[0]})")
        if self.unavailability_per_producer:
            lines.append("  per producer: " + ", ".join(
                f"{p} {g.seconds:.1f}s" for p, g in sorted(self.unavailability_per_producer.items())))
        for name in ("lost", "duplicated", "reordered", "reordered_by_client", "phantom", "inconsistent", "stale"):
            for ex in getattr(self, name)[:3]:
                lines.append(f"  e.g. {name}: {ex}")
        problems = self.problems(fail_on_duplicates)
        lines.append("FAIL: " + "; ".join(problems) if problems else "OK")
        return "\n".join(lines)


def check(history: History, topic: str | None = None, client_reorders: dict[str, str] | None = None) -> Report:
    """``client_reorders``: producer name -> why its client may reorder by itself (its reorders
    are then reported as ``reordered_by_client``, not failed); every other producer's order is checked."""
    ops = list(history)
    report = Report(topic=topic)
    sends = _sends(ops)
    reads = [op for op in ops if op.f == "read" and op.type == OK]
    final_op = next((op for op in reversed(reads) if op.value == "final"), None)
    snapshots = [op for op in reads if op is not final_op]
    report.snapshots = len(snapshots)

    # -- what the producers did ------------------------------------------------------------
    per_producer: dict[str, Counter] = defaultdict(Counter)
    for value, s in sends.items():
        report.sent += 1
        per_producer[s["producer"]]["sent"] += 1
        outcome = s["outcome"]
        if outcome == OK:
            report.acked += 1
        elif outcome == FAIL:
            report.failed += 1
        else:
            report.indeterminate += 1
        per_producer[s["producer"]][outcome or INFO] += 1
    report.per_producer = {p: dict(c) for p, c in sorted(per_producer.items())}

    # -- the final read --------------------------------------------------------------------
    final = read_records(final_op) if final_op else {}
    complete = set((final_op.data or {}).get("complete", [])) if final_op else set()
    partitions = sorted(set(final) | {s["partition"] for s in sends.values() if s["partition"] is not None})
    report.final_incomplete = [p for p in partitions if p not in complete]
    where: dict[str, list[tuple[int, int]]] = defaultdict(list)   # value -> [(partition, offset)]
    for p, recs in final.items():
        for o, v in recs:
            where[v].append((p, o))
        report.read += len(recs)
    final_at = {(p, o): v for p, recs in final.items() for o, v in recs}

    # lost / acknowledged at another offset
    for value, s in sends.items():
        if s["outcome"] != OK:
            if value in where:
                report.indeterminate_found += s["outcome"] != FAIL
            continue
        p, o = s["ack_partition"], s["ack_offset"]
        if value not in where:
            if p is not None and p not in complete:
                report.unverifiable += 1
            else:
                report.lost.append({"value": value, "partition": p, "offset": o, "acked_at": s["ack_wall"],
                                    "now_at_offset": final_at.get((p, o))})
            continue
        if o is not None and o >= 0 and (p, o) not in where[value]:
            report.inconsistent.append({"kind": "acknowledged-offset-moved", "value": value,
                                        "acked": [p, o], "read_at": where[value]})

    # duplicates
    for value, places in where.items():
        if len(places) > 1:
            report.duplicated.append({"value": value, "at": sorted(places)})

    # reordering within a partition, per producer, in offset order
    for p, recs in sorted(final.items()):
        highest: dict[str, tuple[int, int, str]] = {}  # producer -> (seq, offset, value)
        first_seen: set[str] = set()
        for o, v in recs:
            parsed = parse_value(v)
            if parsed is None or v in first_seen:
                continue
            first_seen.add(v)
            producer, seq = parsed
            top = highest.get(producer)
            if top is not None and seq < top[0]:
                found = {"partition": p, "producer": producer, "value": v, "offset": o,
                         "after": {"value": top[2], "offset": top[1]}}
                why = (client_reorders or {}).get(producer)
                if why is None:
                    report.reordered.append(found)
                else:
                    report.reordered_by_client.append({**found, "why": why})
            elif top is None or seq > top[0]:
                highest[producer] = (seq, o, v)

    # phantoms and offsets that changed meaning, across every read in order
    seen_at: dict[tuple[int, int], tuple[str, str]] = {}  # (partition, offset) -> (read label, value)
    phantom_seen: set[tuple[int, int, str]] = set()
    for op in snapshots + ([final_op] if final_op else []):
        label = str(op.value)
        for p, recs in read_records(op).items():
            last = -1
            for o, v in recs:
                if o <= last:
                    report.inconsistent.append({"kind": "offsets-not-increasing", "read": label,
                                                "partition": p, "offset": o, "previous": last})
                elif op is final_op and o > last + 1:
                    report.gaps_in_offsets += 1
                last = max(last, o)
                s = sends.get(v)
                if (s is None or s["outcome"] == FAIL) and (p, o, v) not in phantom_seen:
                    phantom_seen.add((p, o, v))
                    report.phantom.append({"value": v, "partition": p, "offset": o, "read": label,
                                           "why": "never sent" if s is None else "its send failed"})
                earlier = seen_at.get((p, o))
                if earlier is None:
                    seen_at[(p, o)] = (label, v)
                elif earlier[1] != v:
                    report.inconsistent.append({"kind": "offset-changed-value", "partition": p, "offset": o,
                                                "first": {"read": earlier[0], "value": earlier[1]},
                                                "then": {"read": label, "value": v}})
    for op in snapshots:
        for p, recs in read_records(op).items():
            if p not in complete:
                continue
            end = max((o for o, _ in final.get(p, [])), default=-1)
            vanished = [(o, v) for o, v in recs if o > end]
            for o, v in vanished:
                report.inconsistent.append({"kind": "offset-vanished", "partition": p, "offset": o,
                                            "value": v, "read": op.value, "final_end": end})

    report.stale = attribution.stale_reads(snapshots, sends)

    # -- availability ----------------------------------------------------------------------
    _availability(report, ops, sends)
    report.per_nemesis = attribution.per_nemesis(report, ops, sends, {str(op.value): op.mono for op in reads})
    return report


def _sends(ops: list[Op]) -> dict[str, dict]:
    """value -> {producer, partition, invoke, outcome, ack_partition, ack_offset, ack_mono, ack_wall}."""
    sends: dict[str, dict] = {}
    for op in ops:
        if op.f != "send":
            continue
        if op.type == INVOKE:
            sends[op.value] = {"producer": op.process, "partition": op.partition, "invoke": op.mono,
                               "outcome": None, "ack_partition": None, "ack_offset": None,
                               "ack_mono": None, "ack_wall": None}
            continue
        s = sends.get(op.value)
        if s is None:  # a completion without its invocation: keep it, as an acknowledgement
            s = sends[op.value] = {"producer": op.process, "partition": op.partition, "invoke": op.mono,
                                   "outcome": None, "ack_partition": None, "ack_offset": None,
                                   "ack_mono": None, "ack_wall": None}
        if op.type == OK:
            s.update(outcome=OK, ack_partition=op.partition, ack_offset=op.offset, ack_mono=op.mono,
                     ack_wall=op.wall)
        elif s["outcome"] != OK:
            s["outcome"] = op.type  # fail or info
    return sends


def _availability(report: Report, ops: list[Op], sends: dict[str, dict]) -> None:
    workload = [op for op in ops if op.f == "workload"]
    invokes = [s["invoke"] for s in sends.values()]
    start = min((op.mono for op in workload if op.type == INVOKE), default=min(invokes, default=0.0))
    end = max((op.mono for op in workload if op.type != INVOKE), default=max(invokes, default=start))
    report.duration = max(0.0, end - start)
    kills = attribution.fault_ops(ops)
    report.faults = dict(Counter((op.data or {}).get("kind", "kill") for op in kills))
    report.unrecovered = [{"process": op.value, "at": round(op.mono - start, 1), "error": op.error}
                          for op in ops if op.f == "recovered" and op.type == INFO]

    def longest(times: list[float]) -> Gap | None:
        points = [start] + sorted(t for t in times if start <= t <= end) + [end]
        best = max(((b - a, a, b) for a, b in zip(points, points[1:])), default=None)
        if best is None:
            return None
        seconds, a, b = best
        during = [f"{op.value}@{op.mono - start:.1f}s" for op in kills if a - 1.0 <= op.mono <= b]
        return Gap(round(seconds, 3), round(a - start, 3), round(b - start, 3), during)

    acks = [s["ack_mono"] for s in sends.values() if s["outcome"] == OK]
    report.longest_unavailability = longest(acks)
    by_partition: dict[int, list[float]] = defaultdict(list)
    for s in sends.values():
        if s["outcome"] == OK and s["ack_partition"] is not None:
            by_partition[s["ack_partition"]].append(s["ack_mono"])
    for p in {s["partition"] for s in sends.values() if s["partition"] is not None} | set(by_partition):
        gap = longest(by_partition.get(p, []))
        if gap is not None:
            report.unavailability_per_partition[p] = gap
    by_producer: dict[str, list[float]] = defaultdict(list)
    for s in sends.values():
        by_producer[s["producer"]].extend([s["ack_mono"]] if s["outcome"] == OK else [])
    for producer, times in by_producer.items():
        gap = longest(times)
        if gap is not None:
            report.unavailability_per_producer[producer] = gap
