"""``odradek maintenance enable|disable|status ID``: one broker's maintenance mode (Redpanda's
``rpk cluster maintenance``), through the active controller's control-plane routes
(``control_plane.*MAINTENANCE``, docs/control-plane.md).

Enable moves the broker's leaderships to other in-sync replicas and keeps it from being
elected while it lasts (it keeps running and replicating); disable elects its preferred
leaderships back. The controllers are a dev cluster's (``--data-dir``, with its control-plane
certificate when secured) or given with ``--controller``; a standby's NOT_CONTROLLER moves on
to the next.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from odradek.cluster import control_plane as cp
from odradek.cluster.control_plane_http import call_blocking
from odradek.cluster.control_plane_tls import ControlPlaneTls
from odradek.errors import ErrorCode, KafkaError

TIMEOUT_S = 30.0  # enabling writes every moved leadership
CALLS = {"enable": cp.enable_maintenance, "disable": cp.disable_maintenance, "status": cp.maintenance}


def _controllers(args: argparse.Namespace) -> tuple[list[str], ControlPlaneTls | None]:
    if args.controller:
        return args.controller, None
    path = args.data_dir.resolve() / "cluster.json"
    if not path.exists():
        raise SystemExit(f"no dev cluster in {args.data_dir} (no cluster.json): give --controller")
    state = json.loads(path.read_text())
    return state.get("controllers", []), ControlPlaneTls.from_settings(state.get("cluster_security", {}))


def call(urls: list[str], request: cp.Request, tls: ControlPlaneTls | None) -> cp.Maintenance:
    """The active controller's answer; raises the last ``KafkaError`` or ``OSError``."""
    failure: Exception = KafkaError(ErrorCode.not_controller, "no controller given")
    for url in urls:
        try:
            return call_blocking(url, request, TIMEOUT_S, tls)
        except KafkaError as e:
            if e.code != ErrorCode.not_controller:
                raise
            failure = e
        except OSError as e:
            failure = e
    raise failure


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="odradek maintenance", description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=sorted(CALLS))
    p.add_argument("broker", type=int, help="the broker id")
    p.add_argument("--data-dir", type=Path, default=Path("var/dev"), help="a dev cluster's data directory")
    p.add_argument("--controller", action="append", help="a controller's URL (repeatable; instead of --data-dir)")
    p.add_argument("--json", action="store_true", help="print the answer as JSON")
    args = p.parse_args(argv)
    urls, tls = _controllers(args)
    try:
        answer = call(urls, CALLS[args.command](args.broker), tls)
    except KafkaError as e:
        print(f"odradek maintenance: {e.code.name.upper()}: {e.message}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"odradek maintenance: no controller reachable: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(answer.to_json()))
    else:
        print(f"broker {answer.broker}: maintenance {'on' if answer.maintenance else 'off'}, "
              f"leads {answer.leaders} partitions that have other replicas")
    return 0
