"""Transaction APIs: InitProducerId with a transactional id, AddPartitionsToTxn (client
versions 0-3 and the brokers' batched, ``verify_only`` form 4-5 of KIP-890), AddOffsetsToTxn,
EndTxn, TxnOffsetCommit, DescribeTransactions, ListTransactions, in Kafka 3.9's versions.

Only translation between wire versions and the broker's ``TransactionCoordinator``
(``ctx.txn.coordinator``, see ``odradek.broker.txn``) and, for TxnOffsetCommit, the group
coordinator. Authorization as in Kafka's KafkaApis: WRITE on the TRANSACTIONAL_ID for the
producer's requests (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), WRITE on each topic added
(TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED), READ on the group for
offsets, DESCRIBE on the id for the admin APIs (ListTransactions filters silently).
"""

from __future__ import annotations

import asyncio
import datetime
import time

from odradek.broker.context import BrokerContext
from odradek.broker.handlers.answer import ZERO
from odradek.broker.group.config import OFFSETS_TOPIC
from odradek.broker.group.records import OffsetValue
from odradek.broker.security.acl import Operation, ResourceType
from odradek.broker.security.authorizer import allowed
from odradek.broker.txn.metadata import NO_EPOCH, NO_PRODUCER_ID, TxnState
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make

E = ErrorCode
_UTC = datetime.timezone.utc
_NO_TIME = datetime.datetime.fromtimestamp(-0.001, _UTC)   # written as Kafka's -1


def _txn_allowed(ctx: BrokerContext, tid: str, op: Operation = Operation.WRITE, log_denied: bool = True) -> bool:
    return allowed(ctx, op, ResourceType.TRANSACTIONAL_ID, tid, log_denied)


async def _guard(call) -> ErrorCode:
    """The coordinator's answer, or the routing error it raised (NOT_COORDINATOR...)."""
    try:
        return await call
    except KafkaError as e:
        return e.code


# -- InitProducerId (the transactional half; handlers/producer_ids.py the idempotent one) ----------
async def init_transactional(ctx: BrokerContext, header, req) -> tuple[ErrorCode, int, int]:
    if not _txn_allowed(ctx, req.transactional_id):
        return E.transactional_id_authorization_failed, -1, -1
    pid, epoch = getattr(req, "producer_id", NO_PRODUCER_ID), getattr(req, "producer_epoch", NO_EPOCH)
    if (pid == NO_PRODUCER_ID) != (epoch == NO_EPOCH):
        return E.invalid_request, -1, -1
    timeout_ms = int(req.transaction_timeout.total_seconds() * 1000)
    try:
        error, pid, epoch = await ctx.txn.coordinator.init_producer_id(
            req.transactional_id, timeout_ms, None if pid == NO_PRODUCER_ID else (pid, epoch))
        return _fenced_for(header.api_version, 4, error), pid, epoch
    except KafkaError as e:  # routing, or no producer id block reachable (retriable for the client)
        return (e.code if e.retriable or e.code in (E.not_coordinator,) else E.coordinator_not_available), -1, -1


# -- AddPartitionsToTxn ---------------------------------------------------------------------------
def _topic_errors(ctx: BrokerContext, wanted: dict[str, list[int]], authorize: bool = True
                  ) -> dict[tuple[str, int], ErrorCode]:
    """Kafka's checks before the coordinator: unauthorized (client versions only) or unknown partitions."""
    errors = {}
    for topic, partitions in wanted.items():
        meta = ctx.replicas.topic(topic)
        for p in partitions:
            if authorize and not allowed(ctx, Operation.WRITE, ResourceType.TOPIC, topic):
                errors[(topic, p)] = E.topic_authorization_failed
            elif meta is None or not 0 <= p < len(meta.partitions):
                errors[(topic, p)] = E.unknown_topic_or_partition
    return errors


def _fenced_for(version: int, first_fenced_version: int, error: ErrorCode) -> ErrorCode:
    """Versions older than PRODUCER_FENCED's (KIP-588) get INVALID_PRODUCER_EPOCH instead, as Kafka."""
    return E.invalid_producer_epoch if error == E.producer_fenced and version < first_fenced_version else error


async def _add_to_txn(ctx: BrokerContext, version: int, tid: str, producer_id: int, epoch: int,
                      wanted: dict[str, list[int]], verify_only: bool = False) -> dict[tuple[str, int], ErrorCode]:
    """One transaction's partitions: added (or, ``verify_only``, checked) with an error each.
    Versions 0-3 come from producers (WRITE on the id and the topics); 4+ from brokers."""
    tps = [(t, p) for t, ps in wanted.items() for p in ps]
    client = version < 4
    if client and not _txn_allowed(ctx, tid):
        return dict.fromkeys(tps, E.transactional_id_authorization_failed)
    if errors := _topic_errors(ctx, wanted, authorize=client):
        return {tp: errors.get(tp, E.operation_not_attempted) for tp in tps}
    if verify_only:
        try:
            return ctx.txn.coordinator.verify_partitions(tid, producer_id, epoch, set(tps))
        except KafkaError as e:
            return dict.fromkeys(tps, e.code)
    error = await _guard(ctx.txn.coordinator.add_partitions(tid, producer_id, epoch, set(tps)))
    return dict.fromkeys(tps, _fenced_for(version, 2, error))


def _topic_results(s, wanted: dict[str, list[int]], results: dict[tuple[str, int], ErrorCode]) -> tuple:
    return tuple(make(s.AddPartitionsToTxnTopicResult, name=t, results_by_partition=tuple(
        make(s.AddPartitionsToTxnPartitionResult, partition_index=p, partition_error_code=results[(t, p)])
        for p in ps)) for t, ps in wanted.items())


async def add_partitions_to_txn(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.ADD_PARTITIONS_TO_TXN, header.api_version)
    if header.api_version >= 4:
        return await _add_partitions_batch(ctx, s, header.api_version, req)
    wanted = {t.name: list(t.partitions) for t in req.v3_and_below_topics}
    results = await _add_to_txn(ctx, header.api_version, req.v3_and_below_transactional_id,
                                req.v3_and_below_producer_id, req.v3_and_below_producer_epoch, wanted)
    return make(s.AddPartitionsToTxnResponse, throttle_time=ZERO,
                results_by_topic_v3_and_below=_topic_results(s, wanted, results))


async def _add_partitions_batch(ctx: BrokerContext, s, version: int, req):
    """Versions 4+ (KIP-890 part 1): a partition leader's batch of transactions, usually
    ``verify_only``; CLUSTER_ACTION on the cluster or the whole request fails."""
    if not allowed(ctx, Operation.CLUSTER_ACTION, ResourceType.CLUSTER):
        return make(s.AddPartitionsToTxnResponse, throttle_time=ZERO, error_code=E.cluster_authorization_failed,
                    results_by_transaction=())
    wanted = [{t.name: list(t.partitions) for t in txn.topics} for txn in req.transactions]
    results = await asyncio.gather(*(
        _add_to_txn(ctx, version, txn.transactional_id, txn.producer_id, txn.producer_epoch, w, txn.verify_only)
        for txn, w in zip(req.transactions, wanted)))
    return make(s.AddPartitionsToTxnResponse, throttle_time=ZERO, error_code=E.none, results_by_transaction=tuple(
        make(s.AddPartitionsToTxnResult, transactional_id=txn.transactional_id, topic_results=_topic_results(s, w, r))
        for txn, w, r in zip(req.transactions, wanted, results)))


async def add_offsets_to_txn(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.ADD_OFFSETS_TO_TXN, header.api_version)
    if not _txn_allowed(ctx, req.transactional_id):
        error = E.transactional_id_authorization_failed
    elif not allowed(ctx, Operation.READ, ResourceType.GROUP, req.group_id):
        error = E.group_authorization_failed
    else:
        offsets_partition = (OFFSETS_TOPIC, ctx.groups.partition_of(req.group_id))
        error = _fenced_for(header.api_version, 2, await _guard(ctx.txn.coordinator.add_partitions(
            req.transactional_id, req.producer_id, req.producer_epoch, {offsets_partition})))
    return make(s.AddOffsetsToTxnResponse, throttle_time=ZERO, error_code=error)


async def end_txn(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.END_TXN, header.api_version)
    if not _txn_allowed(ctx, req.transactional_id):
        error = E.transactional_id_authorization_failed
    else:
        error = _fenced_for(header.api_version, 2, await _guard(ctx.txn.coordinator.end_txn(
            req.transactional_id, req.producer_id, req.producer_epoch, req.committed)))
    return make(s.EndTxnResponse, throttle_time=ZERO, error_code=error)


# -- TxnOffsetCommit ------------------------------------------------------------------------------
async def txn_offset_commit(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.TXN_OFFSET_COMMIT, header.api_version)
    tps = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    results: dict[tuple[str, int], ErrorCode] = {}
    if not _txn_allowed(ctx, req.transactional_id):
        results = dict.fromkeys(tps, E.transactional_id_authorization_failed)
    elif not allowed(ctx, Operation.READ, ResourceType.GROUP, req.group_id):
        results = dict.fromkeys(tps, E.group_authorization_failed)
    else:
        now = int(time.time() * 1000)
        wanted = {}
        for t in req.topics:
            meta = ctx.replicas.topic(t.name)
            readable = allowed(ctx, Operation.READ, ResourceType.TOPIC, t.name)
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                if not readable:
                    results[tp] = E.topic_authorization_failed
                elif meta is None or not 0 <= p.partition_index < len(meta.partitions):
                    results[tp] = E.unknown_topic_or_partition
                else:
                    wanted[tp] = OffsetValue(p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                                             p.committed_metadata or "", now)
        try:
            results.update(await ctx.groups.txn_commit(
                req.group_id, req.producer_id, req.producer_epoch, getattr(req, "generation_id", -1),
                getattr(req, "member_id", ""), getattr(req, "group_instance_id", None), wanted))
        except KafkaError as e:
            results.update(dict.fromkeys(wanted, e.code))
    topics: dict[str, list] = {}
    for t, p in tps:
        topics.setdefault(t, []).append(make(s.TxnOffsetCommitResponsePartition, partition_index=p,
                                             error_code=results[(t, p)]))
    return make(s.TxnOffsetCommitResponse, throttle_time=ZERO, topics=tuple(
        make(s.TxnOffsetCommitResponseTopic, name=n, partitions=tuple(ps)) for n, ps in topics.items()))


# -- admin ------------------------------------------------------------------------------------------
def _described(ctx: BrokerContext, s, tid: str):
    empty = dict(transaction_state="", transaction_timeout=ZERO, transaction_start_time=_NO_TIME, producer_id=-1,
                 producer_epoch=-1, topics=())
    if not _txn_allowed(ctx, tid, Operation.DESCRIBE):
        return make(s.TransactionState, error_code=E.transactional_id_authorization_failed, transactional_id=tid,
                    **empty)
    try:
        md = ctx.txn.coordinator.describe(tid)
    except KafkaError as e:
        return make(s.TransactionState, error_code=e.code, transactional_id=tid, **empty)
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(md.partitions):
        if allowed(ctx, Operation.DESCRIBE, ResourceType.TOPIC, t, log_denied=False):
            by_topic.setdefault(t, []).append(p)
    return make(s.TransactionState, error_code=E.none, transactional_id=tid, transaction_state=md.state.kafka_name,
                transaction_timeout=datetime.timedelta(milliseconds=md.timeout_ms),
                transaction_start_time=(datetime.datetime.fromtimestamp(md.start_ms / 1000, _UTC)
                                        if md.start_ms >= 0 else _NO_TIME),
                producer_id=md.producer_id, producer_epoch=md.producer_epoch,
                topics=tuple(make(s.TopicData, topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()))


async def describe_transactions(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.DESCRIBE_TRANSACTIONS, header.api_version)
    return make(s.DescribeTransactionsResponse, throttle_time=ZERO,
                transaction_states=tuple(_described(ctx, s, tid) for tid in req.transactional_ids))


async def list_transactions(ctx: BrokerContext, header, req):
    s = Schemas(ApiKey.LIST_TRANSACTIONS, header.api_version)
    names = {st.kafka_name: st for st in TxnState}
    unknown = tuple(f for f in req.state_filters if f not in names)
    states = {names[f] for f in req.state_filters if f in names}
    pids = set(req.producer_id_filters)
    duration = getattr(req, "duration_filter", -1)
    now = int(time.time() * 1000)
    loading, txns = ctx.txn.coordinator.listing()
    listed = tuple(
        make(s.TransactionState, transactional_id=md.transactional_id, producer_id=md.producer_id,
             transaction_state=md.state.kafka_name)
        for md in txns
        if (not req.state_filters or md.state in states) and (not pids or md.producer_id in pids)
        and (duration < 0 or (md.state == TxnState.ONGOING and now - md.start_ms >= duration))
        and _txn_allowed(ctx, md.transactional_id, Operation.DESCRIBE, log_denied=False))
    return make(s.ListTransactionsResponse, throttle_time=ZERO,
                error_code=E.coordinator_load_in_progress if loading else E.none,
                unknown_state_filters=unknown, transaction_states=listed)


# api key: (min version, max version, handler), merged into the broker's table
# (Apache Kafka 3.9's ranges; the last versions only add TRANSACTION_ABORTABLE, which this
# coordinator answers only to a broker's verify_only AddPartitionsToTxn, as Kafka 3.9)
TABLE = {
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5, add_partitions_to_txn),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4, add_offsets_to_txn),
    ApiKey.END_TXN: (0, 4, end_txn),
    ApiKey.TXN_OFFSET_COMMIT: (0, 4, txn_offset_commit),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0, describe_transactions),
    ApiKey.LIST_TRANSACTIONS: (0, 1, list_transactions),
}
