"""The gateway's two fast paths on one machine: batched produce of 1 KiB records (NDJSON
streaming produce and REST Proxy v2 binary) and the Arrow range read, from one gateway process.

    python -m bench.gateway [--records 200000] [--batch 2000] [--clients 4]

Issue 6's goals: produce >= 50,000 records/s and >= 5x Karapace's REST proxy (v2 binary, same
cluster, same batches; the column says why when scripts/karapace.sh could not install Karapace),
Arrow range read >= 200 MB/s.
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import datetime
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.side_by_side import RESULTS, cpu_seconds

VALUE = base64.b64encode(b"x" * 1024).decode()


def ndjson_produce(url: str, topic: str, records: int, batch: int, clients: int) -> dict:
    body = ("\n".join(json.dumps({"value": VALUE}) for _ in range(batch))).encode()

    def worker(n: int) -> int:
        with httpx.Client(base_url=url, timeout=120) as c:
            for _ in range(n):
                r = c.post(f"/topics/{topic}/records", content=body, headers={"content-type": "application/x-ndjson"})
                r.raise_for_status()
        return n * batch
    return _timed(worker, records // batch, clients)


def v2_produce(url: str, topic: str, records: int, batch: int, clients: int) -> dict:
    body = json.dumps({"records": [{"value": VALUE} for _ in range(batch)]}).encode()

    def worker(n: int) -> int:
        with httpx.Client(base_url=url, timeout=120) as c:
            for _ in range(n):
                r = c.post(f"/topics/{topic}", content=body,
                           headers={"content-type": "application/vnd.kafka.binary.v2+json"})
                r.raise_for_status()
        return n * batch
    return _timed(worker, records // batch, clients)


def _timed(worker, requests: int, clients: int) -> dict:
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        done = sum(pool.map(worker, [requests // clients] * clients))
    seconds = time.perf_counter() - started
    return {"records": done, "seconds": round(seconds, 2), "records_s": round(done / seconds),
            "mb_s": round(done * 1024 / seconds / 1e6, 1)}


def arrow_read(url: str, topic: str, partitions: int) -> dict:
    import pyarrow as pa
    import pyarrow.compute as pc
    total_bytes = rows = 0
    started = time.perf_counter()
    with httpx.Client(base_url=url, timeout=120) as c:
        for p in range(partitions):
            end = c.get(f"/topics/{topic}/partitions/{p}/offsets").json()["end_offset"]
            offset = 0
            while offset < end:
                r = c.get(f"/topics/{topic}/partitions/{p}/records", params={"offset": offset, "end": end,
                          "max_bytes": 32 << 20}, headers={"accept": "application/vnd.apache.arrow.stream"})
                table = pa.ipc.open_stream(r.content).read_all()
                rows += table.num_rows
                # counted from Arrow's buffers: a client-side to_pylist() would be the figure measured
                total_bytes += pc.sum(pc.binary_length(table.column("value"))).as_py() or 0
                offset = int(r.headers["odradek-next-offset"])
    seconds = time.perf_counter() - started
    return {"records": rows, "seconds": round(seconds, 2), "mb_s": round(total_bytes / seconds / 1e6, 1)}


def karapace_produce(cluster, root: Path, args) -> dict:
    from tests.gateway.test_karapace_parity import install_karapace, start_karapace, stop_process
    python, why_not = install_karapace()
    if python is None:
        return {"not_measured": why_not}
    cluster.create_topic("gw-karapace", partitions=6)
    proc, url = start_karapace(python, cluster.bootstrap, root)
    try:
        return v2_produce(url, "gw-karapace", args.records, args.batch, args.clients)
    finally:
        stop_process(proc)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=4)
    args = ap.parse_args(argv)
    from odradek.dev.harness import start_cluster, stop_cluster
    with tempfile.TemporaryDirectory(prefix="odradek-gw-bench-") as root:
        c = start_cluster(Path(root), brokers=1, gateway=True)
        try:
            gateway_pid = c.pids["gateway"]
            c.create_topic("gw-ndjson", partitions=6)
            c.create_topic("gw-v2", partitions=6)
            cpu0 = cpu_seconds([gateway_pid])
            results = {"ndjson_produce": ndjson_produce(c.gateway, "gw-ndjson", args.records, args.batch, args.clients),
                       "v2_binary_produce": v2_produce(c.gateway, "gw-v2", args.records, args.batch, args.clients)}
            results["karapace_v2_binary_produce"] = karapace_produce(c, Path(root), args)
            results["arrow_range_read"] = arrow_read(c.gateway, "gw-ndjson", 6)
            results["gateway_cpu_s"] = round(cpu_seconds([gateway_pid]) - cpu0, 1)
        finally:
            stop_cluster(c)
    for name, r in results.items():
        print(f"{name:20} {r}")
    stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M")
    out = RESULTS / f"gateway-{stamp}.json"
    out.write_text(json.dumps({"measured": stamp, "args": vars(args), "results": results}, indent=2) + "\n")
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
