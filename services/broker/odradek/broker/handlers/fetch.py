"""Fetch: whole record batches below the high watermark, sent from the segment files.

Long poll: when fewer than ``min_bytes`` are ready, the request waits (no busy loop) until
an append wakes it or ``max_wait`` passes. Byte limits follow KIP-74: ``max_bytes`` for the
response and ``partition_max_bytes`` per partition, except that the first batch of the
first non-empty partition is always sent whole so that a consumer can always progress.
No fetch sessions are created (session id 0), which every client handles by sending full
fetch requests.
"""

from __future__ import annotations

import time

from odradek.broker.dispatch import ZERO
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.codec import Schemas, make
from odradek.protocol.connection import FileRegion
from odradek.protocol.regions import encode_with_regions, marker

FETCH = 1


async def fetch(broker, header, req):
    deadline = time.monotonic() + req.max_wait.total_seconds()
    while True:
        results, total, failed = _collect(broker, req)
        remaining = deadline - time.monotonic()
        if total >= req.min_bytes or failed or remaining <= 0:
            break
        await broker.replicas.wait_for_data(remaining)
    return _encode(header, results)


def _collect(broker, req):
    """Per topic: [(partition, error, hw, log_start, FileRegion | None)], bytes, any error."""
    budget = req.max_bytes
    total = 0
    failed = False
    results = []
    for topic in req.topics:
        parts = []
        for p in topic.partitions:
            try:
                lp = broker.replicas.leader(topic.topic, p.partition)
                log = lp.log
                region = None
                limit = min(p.partition_max_bytes, budget - total)
                if limit > 0 or total == 0:
                    chunk = log.read(p.fetch_offset, max(limit, 0), max_offset=log.high_watermark,
                                     min_one_batch=total == 0)
                    if chunk.size:
                        region = FileRegion(chunk.fd, chunk.position, chunk.size)
                        total += chunk.size
                parts.append((p.partition, ErrorCode.none, log.high_watermark, log.log_start_offset, region))
            except KafkaError as e:
                failed = True
                hw, start = _offsets(broker, topic.topic, p.partition)
                parts.append((p.partition, e.code, hw, start, None))
        results.append((topic.topic, parts))
    return results, total, failed


def _offsets(broker, topic: str, partition: int) -> tuple[int, int]:
    log = broker.replicas.logs.get(topic, partition)
    return (log.high_watermark, log.log_start_offset) if log is not None else (-1, -1)


def _encode(header, results):
    s = Schemas(FETCH, header.api_version)
    regions: list[FileRegion] = []
    topics = []
    for name, parts in results:
        datas = []
        for partition, error, hw, start, region in parts:
            records = b""
            if region is not None:
                records = marker(len(regions))
                regions.append(region)
            datas.append(make(s.PartitionData, partition_index=partition, error_code=error,
                              high_watermark=hw, last_stable_offset=hw, log_start_offset=start,
                              aborted_transactions=None,
                              preferred_read_replica=-1, records=records))
        topics.append(make(s.FetchableTopicResponse, topic=name, partitions=tuple(datas)))
    body = make(s.FetchResponse, throttle_time=ZERO, error_code=ErrorCode.none, session_id=0,
                responses=tuple(topics))
    return encode_with_regions(FETCH, header.api_version, header.correlation_id, body, regions,
                               flexible=header.api_version >= 12)
