"""``odradek rebalance``: plan with the balancer, print the proposal, execute it in batches
through Kafka's admin API under a replication throttle, like ``kafka-reassign-partitions``.

    odradek rebalance [--data-dir DIR | --bootstrap-server HOST:PORT [--command-config FILE]]
                      [--add-brokers IDS | --remove-brokers IDS] [--dry-run] [--throttle BYTES_PER_S]
                      [--concurrency N] [--json]
    odradek rebalance --topic T --replication-factor N ...   (a replication-factor change)
    odradek rebalance --status | --stop
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path

from odradek.balance import PlanError, Proposal, change_replication_factor, plan
from odradek.dev import access

from . import executor
from .kafka_port import KafkaPort, sizes_from_metrics


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
    mode.add_argument("--status", action="store_true", help="list the running reassignments")
    mode.add_argument("--stop", action="store_true",
                      help="cancel every running reassignment and remove the replication throttles")
    ap.add_argument("--topic", help="the topic of --replication-factor")
    ap.add_argument("--dry-run", action="store_true", help="print the proposal, move nothing")
    ap.add_argument("--throttle", type=int, metavar="BYTES_PER_S",
                    help="replication throttle of the moving replicas (Kafka's throttled rates and replicas), "
                         "removed when done")
    ap.add_argument("--concurrency", type=int, default=5, help="partitions moving at once (default %(default)s)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds for the whole plan")
    ap.add_argument("--json", action="store_true", help="print the proposal and result as JSON")
    return ap


def _metrics_urls(args) -> list[str]:
    """A dev cluster's brokers' /metrics (for partition sizes); none with --bootstrap-server."""
    if args.bootstrap_server:
        return []
    from odradek.dev.cluster import STATE_FILE
    path = Path(args.data_dir).resolve() / STATE_FILE
    state = json.loads(path.read_text()) if path.exists() else {}
    return [url for name, url in state.get("metrics", {}).items() if name.startswith("broker-")]


def _proposal(port: KafkaPort, args) -> Proposal:
    sizes = port.sizes()
    if sizes is None and (urls := _metrics_urls(args)):
        sizes = sizes_from_metrics(urls)
    model = port.model(sizes)
    if args.replication_factor is not None:
        if not args.topic:
            raise PlanError("--replication-factor needs --topic")
        proposal = change_replication_factor(model, args.topic, args.replication_factor)
    elif args.add_brokers:
        proposal = plan(model, "add-brokers", args.add_brokers)
    elif args.remove_brokers:
        proposal = plan(model, "remove-brokers", args.remove_brokers)
    else:
        proposal = plan(model, "full")
    if sizes is None:
        return Proposal(proposal.mode, proposal.moves, proposal.before, proposal.after,
                        (*proposal.notes, "partition sizes unknown (DescribeLogDirs refused, no broker metrics): "
                                          "bytes are not counted"))
    return proposal


def _status(port: KafkaPort, args) -> int:
    running = sorted(port.ongoing())
    if args.json:
        print(json.dumps({"reassignments": [{"topic": t, "partition": p} for t, p in running]}))
    else:
        print("\n".join(f"{t}-{p} moving" for t, p in running) or "no reassignment running")
    return 0


def _stop(port: KafkaPort) -> int:
    running = sorted(port.ongoing())
    if running:
        port.reassign(dict.fromkeys(running))
    topics = sorted({t for t, _ in running})
    for t in topics:
        port.alter_topic_configs(t, dict.fromkeys(executor.TOPIC_REPLICAS))
    for b in port.model(topics=topics or None).broker_ids():
        port.alter_broker_configs(b, dict.fromkeys(executor.BROKER_RATES))
    print(f"{len(running)} reassignments cancelled; throttles removed")
    return 0


def _run(port: KafkaPort, args) -> int:
    if args.status:
        return _status(port, args)
    if args.stop:
        return _stop(port)
    running = port.ongoing()
    if running:   # as kafka-reassign-partitions refuses: the replica lists are mid-move
        print(f"odradek rebalance: {len(running)} reassignments are running; wait (--status) or cancel them "
              f"(--stop) first", file=sys.stderr)
        return 1
    proposal = _proposal(port, args)
    if args.json and args.dry_run:
        print(json.dumps(proposal.to_json(), indent=2))
    elif not args.json:
        print(proposal.summary())
    if args.dry_run or not proposal.moves:
        return 0
    report = (lambda line: None) if args.json else (lambda line: print(line, flush=True))
    stop = threading.Event()   # Ctrl-C or SIGTERM: cancel the running moves, remove the throttle
    saved = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        progress = executor.execute(port, proposal, concurrency=args.concurrency, throttle=args.throttle,
                                    report=_changes_only(report), should_stop=stop.is_set, timeout=args.timeout)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    if args.json:
        print(json.dumps({**proposal.to_json(), "moved": progress.done, "errors": list(progress.errors)}, indent=2))
    else:
        print(f"done: {progress.done}/{progress.total} partitions moved, {proposal.bytes_to_move} bytes; "
              f"preferred leaders elected" + "".join(f"\nrefused: {e}" for e in progress.errors))
    return 1 if progress.errors else 0


def _changes_only(report):
    last = [None]

    def out(line: str) -> None:
        if line != last[0]:
            last[0] = line
            report(line)
    return out


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    port = KafkaPort(access.from_arguments(args))
    try:
        return _run(port, args)
    except PlanError as e:
        print(f"odradek rebalance: {e}", file=sys.stderr)
        return 2
    except executor.StopRequested as e:
        print(f"odradek rebalance: {e}", file=sys.stderr)
        return 1
    finally:
        port.close()
