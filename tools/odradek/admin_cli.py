"""What the Kafka-protocol admin commands (``odradek groups``, ``users``, ``acls``) share:
their tables and running one subcommand with an admin client (JSON out, Kafka errors to stderr)."""

from __future__ import annotations

import json
import sys
from typing import Callable

from confluent_kafka import KafkaException


def table(rows: list[list[object]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip() for r in [header, *rows])


def run(prog: str, commands: dict[str, Callable], args, admin) -> int:
    """``commands[args.command](admin, args)``; its answer as JSON with ``--json``; 1 on a Kafka error."""
    try:
        answer = commands[args.command](admin, args)
    except KafkaException as e:
        print(f"{prog}: {e.args[0] if e.args else e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(answer, indent=2))
    return 0
