"""Produce and consume MB/s over PLAINTEXT and SASL_SSL (SCRAM-SHA-512), and new authenticated
connections per second, for Odradek and Apache Kafka 3.9 configured the same way, in one run.

    .venv/bin/python -m bench.tls_throughput [--mb 256] [--size 1024] [--handshakes 300] [--first odradek]

Each system is one broker with a PLAINTEXT listener and a SASL_SSL listener (a CA from ``odradek.certs``;
PEM keystore; PLAIN and SCRAM-SHA-256/512 enabled; Kafka: a KRaft node from
``bench.apache_kafka`` with its start scripts' JVM options). A SCRAM-SHA-512 user (4096
iterations) is made with AlterUserScramCredentials. For each listener confluent-kafka produces
``--mb`` MiB of ``--size``-byte records (acks=1, no compression, linger 5 ms) into a fresh topic
and consumes them back from the beginning. Handshakes: ``--handshakes`` new connections, 8 at
a time, each TLS + SaslHandshake + SCRAM-SHA-512 (two SaslAuthenticate round trips), then
closed (the broker's own inter-broker client, ``odradek.broker.replication.client``, on both).
The ratio is SASL_SSL / PLAINTEXT MB/s; the issue asks Odradek's to be no worse than Kafka's.

Over TLS a Fetch cannot use sendfile: Odradek reads the segment regions and writes them through
the TLS transport (docs/security.md). Results: JSON on stdout and in bench/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import ssl
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer

from bench.apache_kafka import KafkaCluster, SaslSsl
from odradek.certs import CertificateAuthority
from odradek.dev.harness import start_cluster, stop_cluster
from tests.security.conftest import listener_endpoints
from tests.support.kafka_tools import Endpoint

RESULTS = Path(__file__).resolve().parent / "results"
USER, PASSWORD = "bench", "bench-secret"
ADMIN = {"admin": "admin-secret"}
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret";')
CONCURRENCY = 8


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


def handshakes_per_s(address: str, ca_file: str, count: int) -> float:
    """New TLS + SCRAM-SHA-512 connections per second, CONCURRENCY at a time."""
    from odradek.broker.replication.client import KafkaClient
    from odradek.broker.replication.connector import ClientSecurity
    host, port = address.rsplit(":", 1)
    security = ClientSecurity("SECURE", ssl.create_default_context(cafile=ca_file), "SCRAM-SHA-512", USER, PASSWORD)

    async def one(gate: asyncio.Semaphore) -> None:
        async with gate:
            client = KafkaClient(host, int(port), client_id="bench-handshakes", security=security,
                                 connect_timeout=30)
            await client.connect()
            client.close()

    async def run() -> float:
        gate = asyncio.Semaphore(CONCURRENCY)
        started = time.perf_counter()
        await asyncio.gather(*(one(gate) for _ in range(count)))
        return count / (time.perf_counter() - started)
    return asyncio.run(run())


def add_scram_user(plaintext_bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    admin = AdminClient({"bootstrap.servers": plaintext_bootstrap})
    upsert = UserScramCredentialUpsertion(USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                          PASSWORD.encode())
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=60)


def measure(name: str, plaintext: str, secure: str, create_topic, ca_file: str, a) -> dict:
    total = a.mb * 1024 * 1024
    add_scram_user(plaintext)
    sasl_ssl = {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": USER,
                "sasl.password": PASSWORD, "ssl.ca.location": ca_file}
    out: dict = {}
    for listener, bootstrap, conf in (("PLAINTEXT", plaintext, {}), ("SASL_SSL", secure, sasl_ssl)):
        topic = f"bench-{name}-{listener.lower().replace('_', '-')}"
        create_topic(topic)
        out[listener] = {"produce_MBps": round(produce(bootstrap, topic, total, a.size, conf), 1),
                         "consume_MBps": round(consume(bootstrap, topic, total, conf), 1)}
        print(f"  {name} {listener}: {out[listener]}", flush=True)
    out["ratio_SASL_SSL_to_PLAINTEXT"] = {
        k: round(out["SASL_SSL"][k] / out["PLAINTEXT"][k], 2) for k in ("produce_MBps", "consume_MBps")}
    out["scram_sha_512_handshakes_per_s"] = round(handshakes_per_s(secure.split(",")[0], ca_file, a.handshakes), 1)
    print(f"  {name} handshakes/s: {out['scram_sha_512_handshakes_per_s']}", flush=True)
    return out


def run_odradek(root: Path, ca_file: str, a) -> dict:
    extra = {"listeners": "SECURE://127.0.0.1:0", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL",
             "inter.broker.listener.name": "PLAINTEXT", "listener.name.secure.plain.sasl.jaas.config": PLAIN_JAAS,
             "ssl.keystore.location": str(root / "broker.pem")}
    cluster = start_cluster(root / "odradek", brokers=1,
                            extra=tuple(x for k, v in extra.items() for x in ("--config", f"{k}={v}")))
    try:
        endpoints = listener_endpoints(root / "odradek", 1)
        return measure("odradek", endpoints["PLAINTEXT"][0], endpoints["SECURE"][0],
                       Endpoint("odradek", endpoints["PLAINTEXT"][0]).create_topic, ca_file, a)
    finally:
        stop_cluster(cluster)


def run_kafka(root: Path, ca_file: str, a) -> dict:
    cluster = KafkaCluster(root / "kafka", nodes=1, sasl_ssl=SaslSsl(root / "broker.pem", ADMIN)).start()
    try:
        return measure("kafka", cluster.bootstrap, cluster.secure_bootstrap,
                       Endpoint("kafka", cluster.bootstrap).create_topic, ca_file, a)
    finally:
        cluster.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--handshakes", type=int, default=300)
    ap.add_argument("--first", choices=("kafka", "odradek"), default="kafka", help="which system runs first")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ca = CertificateAuthority.create()
        ca.write_ca(root / "ca.pem")
        ca.write_issued(root / "broker.pem", "127.0.0.1")
        runs = {"kafka": run_kafka, "odradek": run_odradek}
        order = [a.first, *(n for n in runs if n != a.first)]
        results = {name: runs[name](root, str(root / "ca.pem"), a) for name in order}
    report = {"mb": a.mb, "record_bytes": a.size, "handshakes": a.handshakes, "handshake_concurrency": CONCURRENCY,
              "order": order, **results}
    text = json.dumps(report, indent=1)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"tls-{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d-%H%M}.json").write_text(text + "\n")


if __name__ == "__main__":
    main()
