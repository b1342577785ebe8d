"""The ``odradek`` command: one entry point for every part (the container's entrypoint)."""

from __future__ import annotations

import sys

from odradek import extras
from odradek.startup import skip_dev_only_imports

USAGE = """usage: odradek <command> [options]

commands:
  broker       run a broker                     (odradek broker --help)
  controller   run a controller instance        (odradek controller --help)
  dev          a local cluster of processes     (odradek dev up|down|status --help)
  gateway      the HTTP gateway                 (odradek gateway --help)
  groups       consumer groups: list, describe, reset-offsets (odradek groups --help)
  users        SCRAM users: list, add, remove    (odradek users --help)
  acls         Kafka ACLs: list, add, remove     (odradek acls --help)
  maintenance  a broker's maintenance mode: enable, disable, status (odradek maintenance --help)
  produce      stdin's lines to a topic         (odradek produce TOPIC --help), through the gateway
  consume      print a topic's records          (odradek consume TOPIC --help), through the gateway
  operator     the Kubernetes operator (kopf)   (odradek operator --help)
  rebalance    move partitions to balance brokers, add/remove brokers, change a replication factor
               (odradek rebalance --help)
  top          live view of brokers, controller, URP, topics, group lag (odradek top --help)
  verify       Jepsen-style safety check        (odradek verify --help)
"""


def run() -> int:
    """The command's entry point (a process of its own: ``odradek``, ``python -m odradek.cli``)."""
    skip_dev_only_imports()
    return main()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    try:
        return _dispatch(args[0], args[1:])
    except ModuleNotFoundError as e:
        extra = extras.extra_of((e.name or "").split(".")[0])
        if extra is None:
            raise
        print(extras.advice(extra, f"`odradek {args[0]}`", [e.name]), file=sys.stderr)
        return 2


def _dispatch(command: str, rest: list[str]) -> int:
    if command == "broker":
        from odradek.broker.cli import main as run
    elif command == "controller":
        from odradek.controller.cli import main as run
    elif command == "dev":
        from odradek.dev.cluster import main as run
    elif command == "gateway":
        from odradek.gateway.cli import main as run
    elif command == "groups":
        from odradek.groups_cli import main as run
    elif command == "users":
        from odradek.users_cli import main as run
    elif command == "acls":
        from odradek.acls_cli import main as run
    elif command == "maintenance":
        from odradek.maintenance_cli import main as run
    elif command == "produce":
        from odradek.client.cli import produce as run
    elif command == "consume":
        from odradek.client.cli import consume as run
    elif command == "operator":
        from odradek.operator.cli import main as run
    elif command == "rebalance":
        from odradek.rebalance.cli import main as run
    elif command == "top":
        from odradek.top import main as run
    elif command == "verify":
        from odradek.verify.cli import main as run
    else:
        print(f"odradek: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
        return 2
    return run(rest) or 0


if __name__ == "__main__":
    sys.exit(run())
