"""The Metadata handler alone, in-process: time per all-topics request (handler + encoding).

    .venv/bin/python -m bench.metadata_handler --partitions 1000 [--versions 1,9,12]

A snapshot of ``--partitions`` partitions (topics of 10, RF 3 on 3 live brokers) behind a
minimal broker context (no authorizer); each version's request is answered once (warming any
cache), then ``--runs`` times: milliseconds per request, steady state. The same script runs
on any commit whose handler takes ``(ctx, header, request)``, so before/after figures come
from one command (docs/performance.md, "Scale").
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from types import SimpleNamespace

from kio.static.constants import EntityType

from odradek.broker.handlers import metadata
from odradek.broker.metadata_cache import MetadataCache
from odradek.cluster.model import BrokerInfo, ClusterMetadata, PartitionState, TopicMetadata
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, encode_response, make


class Replicas:
    """What the handler reads of the ReplicaManager (tests/protocol uses it too)."""

    def __init__(self, snapshot: ClusterMetadata) -> None:
        self.metadata = snapshot
        self._topics = {t.name: t for t in snapshot.topics}
        self._live = {b.id: b for b in snapshot.brokers}

    def topic(self, name):
        return self._topics.get(name)

    def is_live(self, broker_id):
        return broker_id in self._live

    def live_brokers(self):
        return sorted(self._live.values(), key=lambda b: b.id)

    def topic_by_id(self, topic_id):
        return next((t for t in self._topics.values() if t.topic_id == topic_id), None)


def snapshot(partitions: int) -> ClusterMetadata:
    brokers = tuple(BrokerInfo(id=i, host="127.0.0.1", port=9090 + i, internal_url="http://127.0.0.1")
                    for i in (1, 2, 3))
    topics = tuple(TopicMetadata(name=f"scale-{t:05d}", topic_id=str(uuid.UUID(int=t + 1)), partitions=tuple(
        PartitionState(partition=p, replicas=(1, 2, 3), leader=1 + p % 3, leader_epoch=1, isr=(1, 2, 3))
        for p in range(10))) for t in range(partitions // 10))
    return ClusterMetadata(cluster_id="bench", controller_id="c", controller_epoch=1, brokers=brokers, topics=topics)


async def per_request_ms(ctx, version: int, runs: int) -> float:
    s = Schemas(ApiKey.METADATA, version, EntityType.request)
    request = make(s.MetadataRequest, topics=None, allow_auto_topic_creation=False,
                   include_cluster_authorized_operations=False, include_topic_authorized_operations=False)
    header = SimpleNamespace(api_version=version, api_key=ApiKey.METADATA)
    encode_response(ApiKey.METADATA, version, 1, await metadata.metadata(ctx, header, request))
    started = time.perf_counter()
    for _ in range(runs):
        encode_response(ApiKey.METADATA, version, 1, await metadata.metadata(ctx, header, request))
    return 1000 * (time.perf_counter() - started) / runs


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.metadata_handler", description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--versions", default="1,9,12")
    ap.add_argument("--runs", type=int, default=50)
    args = ap.parse_args(argv)
    ctx = SimpleNamespace(replicas=Replicas(snapshot(args.partitions)), authorizer=None, cluster_id="bench",
                          config=SimpleNamespace(auto_create_topics=False), metadata_cache=MetadataCache())
    load = open("/proc/loadavg").read().split()[:3]
    for version in map(int, args.versions.split(",")):
        ms = asyncio.run(per_request_ms(ctx, version, args.runs))
        print(f"Metadata v{version}, {args.partitions} partitions: {ms:.2f} ms per request (load {' '.join(load)})")


if __name__ == "__main__":
    main()
