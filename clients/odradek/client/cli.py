"""``odradek produce TOPIC`` and ``odradek consume TOPIC``: the quick way to try a cluster,
through its HTTP gateway (``--gateway URL``, ``$ODRADEK_GATEWAY``, or the dev cluster's)."""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
from pathlib import Path

from odradek.client import GatewayClient, GatewayError

BATCH = 500


def _gateway(args: argparse.Namespace) -> GatewayClient:
    """The client of the gateway ``args`` name, or the dev cluster's (with its token and CA
    under ``--security sasl_ssl``)."""
    url = args.gateway or os.environ.get("ODRADEK_GATEWAY")
    token, ca_file = args.token, args.gateway_ca
    if not url:
        state = args.data_dir / "cluster.json"
        try:
            saved = json.loads(state.read_text())
        except (OSError, ValueError):
            saved = {}
        url, security = saved.get("gateway"), saved.get("security") or {}
        token, ca_file = token or security.get("gateway_token"), ca_file or security.get("ca_file")
        if not url:
            raise SystemExit(f"no gateway: pass --gateway URL, set ODRADEK_GATEWAY, or start one with "
                             f"`odradek dev up` (looked in {state})")
    return GatewayClient(url, token, ca_file=ca_file)


def _common(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("topic")
    ap.add_argument("--gateway", help="the gateway's URL")
    ap.add_argument("--data-dir", type=Path, default=Path("var/dev"), help="a dev cluster's data directory")
    ap.add_argument("--token", default=os.environ.get("ODRADEK_TOKEN"), help="bearer token, if auth is on")
    ap.add_argument("--gateway-ca", default=os.environ.get("ODRADEK_GATEWAY_CA"),
                    help="PEM CA file that an https gateway's certificate is checked against")


def produce(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="odradek produce", description="Send stdin's lines as records.")
    _common(ap)
    ap.add_argument("--key-separator", help="split each line into KEY<sep>VALUE")
    ap.add_argument("--partition", type=int)
    args = ap.parse_args(argv)

    def record(line: str) -> dict:
        key, value = (line.split(args.key_separator, 1) if args.key_separator and args.key_separator in line
                      else (None, line))
        return {"key": key.encode() if key is not None else None, "value": value.encode(),
                "partition": args.partition}
    failed = sent = 0
    with _gateway(args) as gw:
        batch: list[dict] = []
        for line in sys.stdin:
            batch.append(record(line.rstrip("\n")))
            if len(batch) >= BATCH:
                failed += _send(gw, args.topic, batch)
                sent, batch = sent + len(batch), []
        failed += _send(gw, args.topic, batch)
        sent += len(batch)
    print(f"{sent - failed} records written to {args.topic}" + (f", {failed} failed" if failed else ""),
          file=sys.stderr)
    return 1 if failed else 0


def _send(gw: GatewayClient, topic: str, batch: list[dict]) -> int:
    try:
        results = gw.produce(topic, batch)
    except GatewayError as e:
        raise SystemExit(f"odradek produce: {e}") from None
    for r in results:
        if r.error_code is not None:
            print(f"error: {r.message}", file=sys.stderr)
    return sum(r.error_code is not None for r in results)


def consume(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="odradek consume", description="Print a topic's records (no group).")
    _common(ap)
    ap.add_argument("--from-beginning", action="store_true", help="start at the log start (default: the end)")
    ap.add_argument("--partition", type=int, help="one partition (default: every one, in turn)")
    ap.add_argument("--max-records", type=int, help="stop after this many")
    ap.add_argument("--print-key", action="store_true")
    args = ap.parse_args(argv)
    shown = 0
    try:
        with _gateway(args) as gw:
            parts = [args.partition] if args.partition is not None else gw.partitions(args.topic)
            positions = {p: gw.offsets(args.topic, p)[0 if args.from_beginning else 1] for p in parts}
            while args.max_records is None or shown < args.max_records:
                idle = True
                for p in parts:
                    records, positions[p] = gw.read_json(args.topic, p, positions[p])
                    for r in records[: None if args.max_records is None else args.max_records - shown]:
                        value = base64.b64decode(r["value"]).decode(errors="replace") if r["value"] else ""
                        key = base64.b64decode(r["key"]).decode(errors="replace") if r["key"] else ""
                        print(f"{key}\t{value}" if args.print_key else value, flush=True)
                        shown += 1
                    idle = idle and not records
                if idle:
                    time.sleep(0.2)
    except GatewayError as e:
        raise SystemExit(f"odradek consume: {e}") from None
    except KeyboardInterrupt:
        pass
    return 0
