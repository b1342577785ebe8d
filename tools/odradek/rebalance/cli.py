"""``odradek rebalance``: ask for a proposal (the balancer, Cruise Control's goals), print it,
execute it in batches under a replication throttle and follow its progress until done.

    odradek rebalance [--data-dir DIR | --bootstrap-server HOST:PORT [--command-config FILE]]
                      [--add-brokers IDS | --remove-brokers IDS] [--dry-run] [--throttle BYTES_PER_S]
                      [--concurrency N] [--json]
    odradek rebalance --topic T --replication-factor N ...   (a replication-factor change)
    odradek rebalance --status | --stop

With ``--data-dir`` the controller plans and executes (``targets.ControllerTarget``): Ctrl-C
leaves the execution running there and says how to stop it. With ``--bootstrap-server`` this
process runs the same executor over Kafka's admin API (``targets.InProcessTarget``): Ctrl-C
stops it (running moves cancelled, throttle removed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from odradek.cluster import control_plane_rebalance as cpr
from odradek.dev import access
from odradek.errors import KafkaError

from .targets import ControllerTarget, InProcessTarget

def _ids(text: str) -> list[int]:
    try:
        return sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"broker ids must be integers separated by commas: {text!r}") from None


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="odradek rebalance",
                                 description="Move partitions so brokers share replicas, leaders and bytes "
                                             "(Cruise Control's goals; docs/rebalancing.md)")
    access.add_arguments(ap)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--add-brokers", type=_ids, metavar="IDS", help="move replicas onto these new brokers only")
    mode.add_argument("--remove-brokers", type=_ids, metavar="IDS", help="move every replica off these brokers")
    mode.add_argument("--replication-factor", type=int, metavar="N", help="change --topic's replication factor")
    mode.add_argument("--status", action="store_true", help="the running (or last) rebalance's progress")
    mode.add_argument("--stop", action="store_true",
                      help="stop the running rebalance: moves in flight cancelled, throttles removed")
    ap.add_argument("--topic", help="the topic of --replication-factor")
    ap.add_argument("--dry-run", action="store_true", help="print the proposal, move nothing")
    ap.add_argument("--throttle", type=int, metavar="BYTES_PER_S",
                    help="replication throttle of the moving replicas (Kafka's throttled rates and replicas), "
                         "removed when done")
    ap.add_argument("--concurrency", type=int, default=cpr.DEFAULT_CONCURRENCY,
                    help="partitions moving at once (default %(default)s)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds to follow the progress")
    ap.add_argument("--json", action="store_true", help="print the proposal and result as JSON")
    return ap


def _request(args) -> cpr.ProposalRequest:
    if args.replication_factor is not None:
        if not args.topic:
            raise SystemExit("odradek rebalance: --replication-factor needs --topic")
        return cpr.ProposalRequest("full", (), {args.topic: args.replication_factor})
    if args.add_brokers:
        return cpr.ProposalRequest("add-brokers", tuple(args.add_brokers))
    if args.remove_brokers:
        return cpr.ProposalRequest("remove-brokers", tuple(args.remove_brokers))
    return cpr.ProposalRequest("full")


def summary(p: cpr.ProposalView) -> str:
    replicas = sum(len(set(m.after) - set(m.before)) for m in p.moves)
    lines = [f"proposal {p.id} ({p.mode}): {len(p.moves)} partitions to reassign, {replicas} replicas to move, "
             f"{p.bytes_to_move} bytes to copy",
             "broker  replicas before->after  leaders before->after  bytes before->after"]
    for b in p.brokers:
        x, y = b.before, b.after
        lines.append(f"{b.id:>6}  {x.replicas:>8} -> {y.replicas:<8}  {x.leaders:>7} -> {y.leaders:<7}  "
                     f"{x.bytes:>12} -> {y.bytes}")
    lines.extend(f"note: {n}" for n in p.notes)
    return "\n".join(lines)


def progress(s: cpr.RebalanceStatus) -> str:
    return (f"{s.state}: {s.moves_done}/{s.moves_total} partitions moved ({s.bytes_moved}/{s.bytes_total} bytes), "
            f"{s.moves_in_progress} moving" + (f"; {s.error}" if s.error else ""))


def _follow(target, args, status: cpr.RebalanceStatus) -> cpr.RebalanceStatus:
    """Poll until the execution ends, printing each change of its progress."""
    last, deadline = None, time.monotonic() + args.timeout
    while status.running:
        if not args.json and (line := progress(status)) != last:
            print(line, flush=True)
            last = line
        if time.monotonic() > deadline:
            raise SystemExit(f"odradek rebalance: not done after {args.timeout:.0f} s: {progress(status)}")
        time.sleep(target.interval)
        status = target.poll()
    return status


def _interrupted(target, args, status: cpr.RebalanceStatus | None) -> int:
    if target.resumable:
        where = f"--data-dir {args.data_dir}"
        print(f"\nodradek rebalance: the rebalance keeps running in the controller; follow it with "
              f"`odradek rebalance {where} --status`, stop it with `odradek rebalance {where} --stop`",
              file=sys.stderr)
        return 130
    if status is not None and status.running:   # in-process: nobody else would step it
        print("\nodradek rebalance: stopping: moves in flight cancelled, throttle removed", file=sys.stderr)
        target.stop()
        status = _follow(target, argparse.Namespace(json=True, timeout=600.0), target.poll())
        print(progress(status), file=sys.stderr)
    return 130


def _run(target, args) -> int:
    if args.status or args.stop:
        status = target.stop() if args.stop else target.poll()
        print(json.dumps(status.to_json()) if args.json else progress(status))
        return 0
    proposal = target.propose(_request(args))
    print(json.dumps(proposal.to_json(), indent=2) if args.json and args.dry_run else
          "" if args.json else summary(proposal), flush=True)
    if args.dry_run or not proposal.moves:
        return 0
    status = None
    try:
        status = target.execute(cpr.ExecuteRequest(proposal.id, proposal.moves, args.throttle, args.concurrency))
        status = _follow(target, args, status)
    except KeyboardInterrupt:
        return _interrupted(target, args, status)
    if args.json:
        print(json.dumps({"proposal": proposal.to_json(), "status": status.to_json()}, indent=2))
    else:
        print(progress(status) + ("; preferred leaders elected" if status.state == "completed" else ""))
    return 0 if status.state == "completed" and not status.error else 1


def _kafka_status_or_stop(args) -> int:
    from .kafka_port import KafkaPort
    port = KafkaPort(access.from_arguments(args))
    try:
        running = sorted(port.cancel_all() if args.stop else port.ongoing_now())
    finally:
        port.close()
    if args.json:
        print(json.dumps({"reassignments": [{"topic": t, "partition": p} for t, p in running]}))
    elif args.stop:
        print(f"{len(running)} reassignments cancelled; throttles removed")
    else:
        print("\n".join(f"{t}-{p} moving" for t, p in running) or "no reassignment running")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.bootstrap_server:
        if args.status or args.stop:   # no executor state outlives an in-process run: Kafka's own view
            return _kafka_status_or_stop(args)
        from .kafka_port import KafkaPort   # kafka-python: the 'rebalance' extra
        target = InProcessTarget(KafkaPort(access.from_arguments(args)))
    else:
        target = ControllerTarget(args.data_dir)
    try:
        return _run(target, args)
    except KafkaError as e:
        print(f"odradek rebalance: {e.code.name.upper()}: {e.message}", file=sys.stderr)
        return 2
    finally:
        target.close()
