"""Produce and consume MB/s on one broker, PLAINTEXT against SSL (TLS 1.2+), with confluent-kafka.

    .venv/bin/python -m bench.tls_throughput [--mb 256] [--size 1024]

Starts a one-broker dev cluster with a PLAINTEXT listener and an SSL listener (a ``trustme``
CA), then for each listener produces ``--mb`` MiB of ``--size``-byte records (acks=1, lz4 off,
linger 5 ms) into a fresh topic and consumes them back from the beginning; prints MB/s.
Over SSL a Fetch cannot use sendfile: the broker reads the segment regions and writes them
through the TLS transport (docs/security.md).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import trustme
from confluent_kafka import Consumer, Producer

from odradek.dev.harness import start_cluster, stop_cluster
from tests.security.conftest import listener_endpoints


def produce(bootstrap: str, topic: str, total: int, size: int, conf: dict) -> float:
    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "batch.size": 1_000_000,
                  "queue.buffering.max.kbytes": 1_048_576, **conf})
    value = b"x" * size
    started = time.perf_counter()
    for _ in range(total // size):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    assert p.flush(120) == 0
    return total / (time.perf_counter() - started) / 1e6


def consume(bootstrap: str, topic: str, total: int, conf: dict) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "fetch.max.bytes": 52_428_800, **conf})
    c.subscribe([topic])
    got, started = 0, None
    while got < total:
        for msg in c.consume(1000, 1.0):
            if msg.error() is None:
                started = started or time.perf_counter()
                got += len(msg.value())
    elapsed = time.perf_counter() - started
    c.close()
    return total / elapsed / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--size", type=int, default=1024)
    a = ap.parse_args()
    total = a.mb * 1024 * 1024
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ca = trustme.CA()
        ca.cert_pem.write_to_path(str(root / "ca.pem"))
        ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(root / "broker.pem"))
        extra = ("--config", "listeners=TLS://127.0.0.1:0", "--config",
                 "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,TLS:SSL",
                 "--config", "inter.broker.listener.name=PLAINTEXT",
                 "--config", f"ssl.keystore.location={root / 'broker.pem'}")
        cluster = start_cluster(root / "cluster", brokers=1, extra=extra)
        try:
            endpoints = listener_endpoints(root / "cluster", 1)
            runs = {"PLAINTEXT": (endpoints["PLAINTEXT"][0], {}),
                    "SSL": (endpoints["TLS"][0], {"security.protocol": "SSL", "ssl.ca.location": str(root / "ca.pem")})}
            results = {}
            for name, (bootstrap, conf) in runs.items():
                topic = f"bench-{name.lower()}"
                cluster.create_topic(topic)
                results[name] = {"produce_MBps": round(produce(bootstrap, topic, total, a.size, conf), 1),
                                 "consume_MBps": round(consume(bootstrap, topic, total, conf), 1)}
            print(json.dumps({"mb": a.mb, "record_bytes": a.size, **results}, indent=1))
        finally:
            stop_cluster(cluster)


if __name__ == "__main__":
    main()
