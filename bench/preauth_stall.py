"""Authenticated produce latency while an unauthenticated client holds a 100 MiB frame (issue 30,
item 1): ``odradek dev up --security sasl_ssl`` (3 brokers, RF 3, min.insync.replicas 2).

    .venv/bin/python -m bench.preauth_stall [--records 200] [--timeout-ms 30000]

A topic of 3 partitions (a leader on every broker); confluent-kafka produces ``--records``
records one at a time (acks=all, each flushed before the next: sequential latencies) as the
cluster's SCRAM user, first with no attacker, then while one TLS connection per broker, without
any SASL exchange, has announced a 104,857,600-byte frame and sent all of it but its last MiB
and holds it. Prints p50/p99/max in ms and the records that failed (``_MSG_TIMED_OUT``) for
both phases, as JSON.
"""

from __future__ import annotations

import argparse
import json
import socket
import ssl
import struct
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from confluent_kafka import Producer

from odradek.dev.access import KafkaAccess
from odradek.dev.harness import start_cluster, stop_cluster

FRAME = 104857600
CHUNK = 1 << 20


def _attack(address: str, ca_file: str, outcome: dict) -> ssl.SSLSocket:
    host, port = address.rsplit(":", 1)
    sock = ssl.create_default_context(cafile=ca_file).wrap_socket(
        socket.create_connection((host, int(port)), timeout=5), server_hostname=host)
    sent = 0
    try:
        sock.sendall(struct.pack(">i", FRAME))
        for _ in range(FRAME // CHUNK - 1):   # all but the last MiB
            sock.sendall(b"\0" * CHUNK)
            sent += CHUNK
        outcome[address] = f"holding {sent} bytes of the frame"
    except OSError as e:   # closed by the broker (the fix) or the socket's timeout (it stopped reading)
        outcome[address] = f"after {sent} bytes: {e!r}"
    return sock


def _latencies(producer: Producer, topic: str, records: int, timeout_s: float) -> dict:
    took, failed = [], []
    for i in range(records):
        started = time.perf_counter()
        producer.produce(topic, f"r{i}".encode(), partition=i % 3,
                         on_delivery=lambda err, _msg: err and failed.append(str(err)))
        producer.flush(timeout_s + 5)
        took.append((time.perf_counter() - started) * 1000)
    took.sort()
    return {"records": records, "failed": len(failed), "first_error": failed[0] if failed else None,
            "p50_ms": round(took[len(took) // 2], 2), "p99_ms": round(took[int(len(took) * 0.99) - 1], 2),
            "max_ms": round(took[-1], 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200)
    ap.add_argument("--timeout-ms", type=int, default=30000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cluster = start_cluster(Path(tmp), brokers=3, replication_factor=3, min_insync_replicas=2,
                                extra=("--security", "sasl_ssl"))
        try:
            cluster.create_topic("stall", partitions=3, replication_factor=3)
            access = KafkaAccess(cluster.bootstrap, cluster.security)
            producer = Producer(access.confluent({"acks": "all", "linger.ms": 0,
                                                  "message.timeout.ms": args.timeout_ms}))
            producer.list_topics("stall", timeout=30)
            result = {"quiet": _latencies(producer, "stall", args.records, args.timeout_ms / 1000)}
            result["attack"] = {}
            with ExitStack() as held:
                for address in cluster.bootstrap.split(","):
                    held.enter_context(_attack(address, cluster.security["ca_file"], result["attack"]))
                result["attacked"] = _latencies(producer, "stall", args.records, args.timeout_ms / 1000)
            print(json.dumps(result, indent=2))
        finally:
            stop_cluster(cluster)


if __name__ == "__main__":
    main()
