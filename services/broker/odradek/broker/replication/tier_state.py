"""A follower's way past the leader's local log start (Kafka's ReplicaFetcherTierStateMachine,
KIP-405).

A partition the leader answered OFFSET_MOVED_TO_TIERED_STORAGE is marked ``tiered`` by the
fetcher; before its next fetch, ``build_remote_state`` asks the leader its local log start
offset (ListOffsets v9, EARLIEST_LOCAL, as a replica), then rebuilds the log from the store
(``storage.remote_follower.rebuild``: the remote segment below that offset, its leader-epoch
checkpoint and producer snapshot) and lets the partition fetch from there. Without tiered
storage on this broker, or with the store failing, the partition backs off and tries again.

Event-loop thread (the fetcher's task).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from odradek.broker.metrics import stats as st
from odradek.broker.storage.remote_follower import rebuild
from odradek.broker.storage.remote_metadata import RemoteStorageException
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make
from kio.static.constants import EntityType

if TYPE_CHECKING:
    from odradek.broker.replication.client import KafkaClient
    from odradek.broker.replication.fetcher import FetchState, ReplicaFetcher

log = logging.getLogger(__name__)

LIST_OFFSETS_VERSION = 9
EARLIEST_LOCAL = -4


async def build_remote_state(fetcher: "ReplicaFetcher", client: "KafkaClient", states: list["FetchState"],
                             timeout_s: float) -> None:
    """Each of ``states`` rebuilt from the store at the leader's local log start, or delayed."""
    starts = await _leader_local_starts(fetcher, client, states, timeout_s)
    for state in states:
        lg = fetcher._current(state)
        remote = fetcher.manager.remote(state.topic)
        found = starts.get((state.topic, state.partition))
        if lg is None or remote is None or found is None:
            if remote is None and lg is not None:
                log.warning("%s: behind the leader's local log start but tiered storage is off here", lg.name)
            fetcher._delay([state])
            continue
        reader, topic_id = remote
        stats = fetcher.manager.topic_stats   # Kafka's BuildRemoteLogAuxState meters
        stats.count(state.topic, st.BUILD_AUX_REQUESTS)
        try:
            await rebuild(reader, topic_id, lg, found, state.leader_log_start)
        except (RemoteStorageException, OSError) as e:
            stats.count(state.topic, st.BUILD_AUX_ERRORS)
            log.warning("%s: cannot rebuild from remote storage (%s); retrying", lg.name, e)
            fetcher._delay([state])
            continue
        state.tiered = state.truncating = False


async def _leader_local_starts(fetcher: "ReplicaFetcher", client: "KafkaClient", states: list["FetchState"],
                               timeout_s: float) -> dict[tuple[str, int], int]:
    s = Schemas(ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, EntityType.request)
    by_topic: dict[str, list] = {}
    for state in states:
        by_topic.setdefault(state.topic, []).append(make(
            s.ListOffsetsPartition, partition_index=state.partition, current_leader_epoch=state.leader_epoch,
            timestamp=EARLIEST_LOCAL))
    request = make(s.ListOffsetsRequest, replica_id=fetcher.manager.broker_id, isolation_level=0,
                   topics=tuple(make(s.ListOffsetsTopic, name=t, partitions=tuple(ps)) for t, ps in by_topic.items()))
    response = await client.request(ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, request, timeout=timeout_s)
    found = {}
    for topic in response.topics:
        for p in topic.partitions:
            if p.error_code == ErrorCode.none and p.offset >= 0:
                found[(topic.name, p.partition_index)] = p.offset
            else:
                log.info("%s-%d: ListOffsets EARLIEST_LOCAL from broker %d: %s", topic.name, p.partition_index,
                         fetcher.source, ErrorCode(p.error_code).name.upper())
    return found
