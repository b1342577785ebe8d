"""The schema formats' cost through the gateway: REST v2 produce of the same records as Avro
(``application/vnd.kafka.avro.v2+json``: each record checked against its schema and encoded to
Confluent's wire format) and as plain JSON (``application/vnd.kafka.json.v2+json``), then the
registry's read paths a serializer calls: ``GET /schemas/ids/{id}`` and the lookup
``POST /subjects/{subject}`` (a schema's id by its text).

    .venv/bin/python -m bench.registry [--records 100000] [--batch 500] [--clients 4] [--lookups 2000]

A one-broker dev cluster with its gateway (which serves the registry). Prints and writes
bench/results/registry-<time>.json: records/s of each format and calls/s of each lookup.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import tempfile
import time
from pathlib import Path

import httpx

from bench.side_by_side import save_result
from odradek.dev.harness import start_cluster, stop_cluster

SCHEMA = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"}, {"name": "amount", "type": "double"}]})
AVRO, JSON_V2 = "application/vnd.kafka.avro.v2+json", "application/vnd.kafka.json.v2+json"
REGISTRY = "application/vnd.schemaregistry.v1+json"


def _records(batch: int) -> list[dict]:
    return [{"value": {"id": i, "customer": f"customer-{i % 97}", "amount": i * 0.25}} for i in range(batch)]


def _parallel(work, calls: int, clients: int) -> float:
    """Calls of ``work(client)`` per second, spread over ``clients`` threads."""
    def worker(n: int) -> None:
        with httpx.Client(timeout=120) as c:
            for _ in range(n):
                work(c)
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        list(pool.map(worker, [calls // clients] * clients))
    return (calls // clients) * clients / (time.perf_counter() - started)


def _produce(url: str, topic: str, content_type: str, body: dict, batches: int, clients: int, batch: int) -> float:
    payload = json.dumps(body).encode()

    def post(c: httpx.Client) -> None:
        c.post(f"{url}/topics/{topic}", content=payload, headers={"content-type": content_type}).raise_for_status()
    return round(_parallel(post, batches, clients) * batch)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--batch", type=int, default=500)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--lookups", type=int, default=2000)
    args = p.parse_args()
    batches = max(args.clients, args.records // args.batch)
    with tempfile.TemporaryDirectory(prefix="registry-bench-") as tmp:
        cluster = start_cluster(Path(tmp), brokers=1, gateway=True)
        try:
            url = cluster.gateway
            for topic in ("orders-avro", "orders-json"):
                cluster.create_topic(topic, partitions=3)
            first = httpx.post(f"{url}/topics/orders-avro", headers={"content-type": AVRO}, timeout=120,
                               json={"value_schema": SCHEMA, "records": _records(1)})
            assert first.status_code == 200, first.text
            schema_id = first.json()["value_schema_id"]
            records = _records(args.batch)
            result = {
                "records": batches * args.batch, "batch": args.batch, "clients": args.clients,
                "avro_records_per_s": _produce(url, "orders-avro", AVRO, {"value_schema_id": schema_id,
                                                                         "records": records},
                                               batches, args.clients, args.batch),
                "json_records_per_s": _produce(url, "orders-json", JSON_V2, {"records": records},
                                               batches, args.clients, args.batch),
                "schema_by_id_per_s": round(_parallel(
                    lambda c: c.get(f"{url}/schemas/ids/{schema_id}").raise_for_status(),
                    args.lookups, args.clients)),
                "lookup_by_text_per_s": round(_parallel(
                    lambda c: c.post(f"{url}/subjects/orders-avro-value", json={"schema": SCHEMA},
                                     headers={"content-type": REGISTRY}).raise_for_status(),
                    args.lookups, args.clients)),
            }
        finally:
            stop_cluster(cluster)
    result["avro_vs_json"] = round(result["avro_records_per_s"] / result["json_records_per_s"], 2)
    save_result("registry", result)


if __name__ == "__main__":
    main()
