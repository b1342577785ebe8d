"""``odradek verify --data-dir DIR [options]``: one verify run against a running dev cluster.

Exit status: 0 when nothing was lost, reordered, inconsistent or phantom (and, with
``--fail-on-duplicates``, nothing duplicated); 1 when the checker found any of those; 2 when
the run could not be carried out (no cluster, replication refused, a fault not recovered).
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from pathlib import Path

from odradek.dev import netns

from .faults import FAULTS, NEMESES
from .runner import Config, ReplicationUnavailable, RunError, run
from .workload import CLIENTS


def _names(allowed: tuple[str, ...], mixed: tuple[str, ...] = ()):
    def parse(text: str) -> tuple[str, ...]:
        if mixed and text.strip() == "mixed":
            return mixed
        names = tuple(n.strip() for n in text.split(",") if n.strip())
        bad = [n for n in names if n not in allowed]
        if bad or not names:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list among {', '.join(allowed)}")
        return names
    return parse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="odradek verify", description=(
        "Produce unique values with acks=all while killing, pausing, cutting off or filling the disk "
        "of brokers, controllers and ZooKeeper; "
        "then read everything back and report lost, duplicated, reordered, phantom and "
        "inconsistent records and the longest unavailability."))
    p.add_argument("--data-dir", type=Path, default=Path("var/dev"), help="the dev cluster's data directory")
    p.add_argument("--topic", help="topic to create (default verify-<random>)")
    p.add_argument("--partitions", type=int, default=6)
    p.add_argument("--replication-factor", type=int, default=3)
    p.add_argument("--min-insync", type=int, default=None, help="min.insync.replicas (default min(2, RF))")
    p.add_argument("--producers", type=int, default=3)
    p.add_argument("--clients", type=_names(CLIENTS), default=CLIENTS,
                   help="producer clients, used in turn (default confluent,kafka-python)")
    p.add_argument("--rate", type=float, default=100.0, help="values per second per producer")
    p.add_argument("--kills", type=int, default=20, help="how many faults")
    p.add_argument("--nemesis", "--faults", dest="faults", type=_names(FAULTS, NEMESES),
                   default=("leader", "controller", "broker"),
                   help=f"kinds of fault, dealt from a shuffled deck: {','.join(NEMESES)}, or 'mixed' "
                        "(all of them); issue 3's leader,controller,broker (SIGKILLs) are the default")
    p.add_argument("--session-timeout", type=float, default=None,
                   help="the brokers' ZooKeeper session timeout, seconds (pauses go below and beyond it)")
    p.add_argument("--interval", type=float, default=2.5, help="mean seconds between faults")
    p.add_argument("--downtime", type=float, default=2.0, help="a killed process stays down 0..N seconds")
    p.add_argument("--no-wait-isr", dest="wait_isr", action="store_false",
                   help="after a restart wait only for the broker to register, not for full ISRs")
    p.add_argument("--recovery-timeout", type=float, default=60.0,
                   help="seconds a restarted process has to be back (registered afresh, ISRs full)")
    p.add_argument("--max-unrecovered", type=int, default=3,
                   help="stop faulting after N faults in a row not recovered from (0: never stop)")
    p.add_argument("--duration", type=float, default=0.0, help="run at least this many seconds")
    p.add_argument("--settle", type=float, default=3.0, help="seconds of workload after healing")
    p.add_argument("--snapshot-interval", type=float, default=5.0, help="mid-run reads every N seconds (0: none)")
    p.add_argument("--snapshot-tail", type=int, default=2000,
                   help="a mid-run snapshot reads each partition's last N offsets (0: all of it)")
    p.add_argument("--delivery-timeout", type=float, default=60.0, help="producer delivery timeout, seconds")
    p.add_argument("--seed", type=int)
    p.add_argument("--client-debug", default="", metavar="CONTEXTS",
                   help="librdkafka debug contexts for the confluent producers (e.g. broker,topic,msg), "
                        "logged to OUT/rdkafka.log")
    p.add_argument("--out", type=Path, help="where to write history.jsonl and report.json "
                                            "(default DATA_DIR/verify/TOPIC)")
    p.add_argument("--fail-on-duplicates", action="store_true",
                   help="duplicates fail the run (default: reported only, until the idempotent producer)")
    p.add_argument("--idempotent", action="store_true",
                   help="producers with enable.idempotence=true; duplicates then fail the run")
    p.add_argument("--idempotent-producers", type=int, default=0, metavar="N",
                   help="the last N producers idempotent beside plain ones (their duplicates fail the run)")
    p.add_argument("--transactional", action="store_true",
                   help="transactional producers (transactions of 20, every 7th aborted), read_committed reads "
                        "and a consume-transform-produce copier (offsets sent to its transactions): committed "
                        "values lost, aborted ones read, duplicates and offsets not atomic with the copy's output "
                        "fail the run; add the 'coordinator' fault to kill transaction coordinators")
    p.add_argument("--command-config", type=Path, metavar="PROPERTIES",
                   help="Kafka client properties (security.protocol, sasl.*, ssl.truststore.location) for the "
                        "clients; default: the dev cluster's own security block (`odradek dev status --json`)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return p


def enter_netns(data_dir: Path, argv: list[str]) -> None:
    """A cluster started with ``odradek dev up --netns`` is reachable only inside its network
    namespace: run this command there."""
    state = data_dir.resolve() / "cluster.json"
    name = json.loads(state.read_text()).get("netns") if state.exists() else None
    if name:
        netns.enter(name, ["verify", *argv])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    enter_netns(args.data_dir, argv)
    # SIGTERM (a test's or a supervisor's deadline) unwinds like an error, so the run still
    # removes its small disk and its network rules
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    logging.basicConfig(level=args.log_level, stream=sys.stderr, format="%(asctime)s %(message)s")
    if args.log_level != "DEBUG":  # the clients' own reconnection chatter
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
    cfg = Config(data_dir=args.data_dir, topic=args.topic, partitions=args.partitions,
                 replication_factor=args.replication_factor, min_insync=args.min_insync,
                 producers=args.producers, clients=args.clients, rate=args.rate, kills=args.kills,
                 interval=args.interval, downtime=args.downtime, faults=args.faults, wait_isr=args.wait_isr,
                 recovery_timeout=args.recovery_timeout, max_unrecovered=args.max_unrecovered,
                 duration=args.duration, settle=args.settle,
                 snapshot_interval=args.snapshot_interval, snapshot_tail=args.snapshot_tail,
                 delivery_timeout=args.delivery_timeout,
                 **({"session_timeout": args.session_timeout} if args.session_timeout else {}),
                 seed=args.seed, out=args.out, client_debug=args.client_debug, idempotent=args.idempotent,
                 idempotent_producers=args.idempotent_producers, transactional=args.transactional,
                 command_config=args.command_config)
    fail_on_duplicates = args.fail_on_duplicates or args.idempotent or args.transactional
    try:
        report, _ = run(cfg)
    except (ReplicationUnavailable, RunError) as e:
        print(f"odradek verify: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({**report.to_json(), "problems": report.problems(fail_on_duplicates)}, indent=2))
    else:
        print(report.summary(fail_on_duplicates))
    return 1 if report.problems(fail_on_duplicates) else 0
