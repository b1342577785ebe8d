"""Produce: append each partition's record batch on the leader.

acks=0 gets no response; if any partition failed, the connection is closed so the client
notices, as Kafka does. acks=1 answers after the leader's write. acks=all (-1) is refused
with NOT_ENOUGH_REPLICAS when the ISR is below min.insync.replicas; otherwise, after the
write, the request is parked in the partition's purgatory until the high watermark passes
its last offset (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below the minimum
meanwhile, NOT_LEADER_OR_FOLLOWER if leadership moved), or REQUEST_TIMED_OUT at the
request's timeout; these answers keep the append's base offset, append time and log start offset,
as Kafka's DelayedProduce does.

A partition's failure is answered with a null error_message, as Kafka does, except for the
refusals Kafka words (``CustomMessageError``: record errors, a failed transaction verification).

Before any append, Kafka 3.9's checks: a request with transactional batches needs a
transactional.id the producer may WRITE, else every partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED
(a topic writer could otherwise open a transaction that pins the last stable offset of every
read_committed consumer); a client never appends to an internal topic (INVALID_TOPIC_EXCEPTION,
the super user included); and, with
``transaction.partition.verification.enable`` (KIP-890 part 1), the first transactional batch of
a transaction on a partition is appended only once the transaction coordinator confirms the
partition was added to it (``txn.verification``; INVALID_TXN_STATE "Partition was not added to
the transaction" otherwise), later ones go straight to the log.
"""

from __future__ import annotations

import asyncio
import datetime
import time

from odradek.broker.context import BrokerContext
from odradek.broker.handlers.answer import ZERO, Answer
from odradek.broker.handlers.produce_encoding import PartitionProduceResponse, ProduceResponse, TopicProduceResponse
from odradek.broker.handlers.leader_hints import PRODUCE_ERRORS, PRODUCE_FROM, Hints
from odradek.broker.metrics.stats import FAILED_PRODUCE, remote_time
from odradek.broker.replication import deadlines
from odradek.broker.security.acl import Operation, ResourceType
from odradek.config.quotas import PRODUCER_BYTE_RATE
from odradek.broker.quotas.throttling import record_bytes
from odradek.broker.security.authorizer import allowed
from odradek.broker.security.session import current
from odradek.broker.txn.verification import produce_error
from odradek.errors import CustomMessageError, ErrorCode, KafkaError, ProduceRecordsError, RecordValidationError
from odradek.protocol.connection import ConnectionClosed
from odradek.records import HEADER_SIZE, MAGIC, BatchHeader, Compression, read_header

ABORTABLE_FROM = 11   # Produce versions answered TRANSACTION_ABORTABLE (KIP-890 part 2)
ZSTD_FROM = 7         # Produce versions that may carry ZStandard batches (KIP-110)
_CODEC_BITS = 0x07    # a batch's attributes: its codec (an unknown one is the log's CORRUPT_MESSAGE)
# the append failures Kafka answers without the partition's log start offset (-1); any other
# failure of the append carries it (ReplicaManager.appendToLocalLog), e.g. INVALID_RECORD
_NO_LOG_START = frozenset({ErrorCode.unknown_topic_or_partition, ErrorCode.not_leader_or_follower,
                           ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.corrupt_message,
                           ErrorCode.kafka_storage_error, ErrorCode.invalid_topic_exception})
_UNVERIFIED: tuple[dict, dict] = ({}, {})   # no transactional id: nothing to verify (read only)


async def produce(ctx: BrokerContext, header, req):
    entries = {(td.name, pd.index): pd.records for td in req.topic_data for pd in td.partition_data}
    firsts = {key: _first_batch(records) for key, records in entries.items()}
    refusal = _refusal(ctx, req.transactional_id, firsts)
    if refusal is not None:   # Kafka's whole-request answer: every partition the same error
        results = {key: _failure(key[1], refusal.code, refusal.message) for key in entries}
    else:
        results = await _produce(ctx, req, entries, firsts, header.api_version)
    throttle = record_bytes(ctx.quotas, PRODUCER_BYTE_RATE, header, current().request_bytes)  # 0: no quota
    failed = any(r.error_code != ErrorCode.none for r in results.values())
    if req.acks == 0:
        if failed:
            raise ConnectionClosed("acks=0 produce failed; closing so the producer notices")
        return Answer(None, throttle)   # no response, but the connection is muted all the same
    hints = Hints(ctx) if header.api_version >= PRODUCE_FROM else None
    topics: dict[str, list] = {}
    for key in entries:
        topics.setdefault(key[0], []).append(_hinted(results[key], key, hints))
    return Answer(ProduceResponse(header.api_version, tuple(
        TopicProduceResponse(name, tuple(parts)) for name, parts in topics.items()),
        datetime.timedelta(milliseconds=throttle) if throttle else ZERO, hints.node_endpoints() if hints is not None else ()),
        throttle)


def _hinted(result: PartitionProduceResponse, key: tuple[str, int], hints: Hints | None) -> PartitionProduceResponse:
    """``result`` with its partition's current leader when it says NOT_LEADER_OR_FOLLOWER (v10+)."""
    if hints is None or result.error_code not in PRODUCE_ERRORS:
        return result
    hints.note(key[0], *key)
    return result._replace(current_leader=hints.leader(*key))


async def _produce(ctx: BrokerContext, req, entries: dict, firsts: dict, version: int) -> dict:
    """Each partition's answer: authorized, verified (KIP-890), appended and, for acks=all, replicated."""
    results: dict[tuple[str, int], object] = {}
    waits: dict[tuple[str, int], tuple[asyncio.Future, object]] = {}
    denied = _denied_topics(ctx, {name for name, _ in entries}) if ctx.authorizer is not None else {}
    for key in entries:
        if key[0] in denied:
            results[key] = _failure(key[1], denied[key[0]], None)
    if version < ZSTD_FROM:
        _refuse_zstd(ctx, firsts, results)
    guards, unverified = await _verify(ctx, req.transactional_id, {k: b for k, b in firsts.items() if k not in results},
                                       version >= ABORTABLE_FROM) if req.transactional_id is not None else _UNVERIFIED
    for key, records in entries.items():
        if key in results:
            continue
        try:
            if key in unverified:
                raise unverified[key]
            info = _append(ctx, key, records, req.acks, guards.get(key))
            ctx.topic_stats.produced(key[0], info.valid_bytes, info.records_count)
            if req.acks == -1:
                waits[key] = (ctx.replicas.replicated(key[0], key[1], info.last_offset), info)
            else:
                results[key] = _appended(key[1], info)
        except KafkaError as e:
            if ctx.replicas.topic(key[0]) is not None:  # no series for names a client made up
                ctx.topic_stats.failed(key[0], FAILED_PRODUCE)
            records = e.record_errors if isinstance(e, RecordValidationError) else ()
            if records:
                ctx.topic_stats.no_key_compacted_records += e.keyless
            log_start = -1 if key in unverified else _log_start_after(ctx, key, e)
            message = e.message if isinstance(e, CustomMessageError) else None   # Kafka words only these
            results[key] = _failure(key[1], e.code, message, records, log_start)
    if waits:
        parked = time.monotonic()
        await _await_replication(waits, results, req.timeout)
        remote_time(time.monotonic() - parked)
    return results


def _log_start_after(ctx: BrokerContext, key: tuple[str, int], error: KafkaError) -> int:
    """The log start offset Kafka answers with a partition whose append failed with ``error``:
    the replica's if this broker hosts one, unless Kafka answers that failure with -1."""
    if error.code in _NO_LOG_START or isinstance(error, ProduceRecordsError):
        return -1
    try:
        return ctx.replicas.replica(*key).log.log_start_offset
    except KafkaError:
        return -1


def _first_batch(records) -> BatchHeader | None:
    """The header of a partition's first v2 batch if it is whole (Kafka looks at the first batch
    of each partition for the request's transactional and idempotent flags), or None."""
    if records is None or len(records) < HEADER_SIZE:
        return None
    header = read_header(records)
    return header if header.magic == MAGIC and HEADER_SIZE <= header.size <= len(records) else None


def _refuse_zstd(ctx: BrokerContext, firsts: dict, results: dict) -> None:
    """Kafka 3.9's answer to a ZStandard batch in Produce v3-v6, for partitions of known
    topics not already refused: UNSUPPORTED_COMPRESSION_TYPE (an old magic comes first, as no batch)."""
    for key, h in firsts.items():
        if h is not None and h.attributes & _CODEC_BITS == Compression.ZSTD and key not in results:
            meta = ctx.replicas.topic(key[0])
            if meta is not None and 0 <= key[1] < len(meta.partitions):
                results[key] = _failure(key[1], ErrorCode.unsupported_compression_type, None)


def _transactional(firsts: dict) -> dict:
    return {key: h for key, h in firsts.items() if h is not None and h.is_transactional and h.producer_id >= 0}


def _refusal(ctx: BrokerContext, transactional_id: str | None, firsts: dict) -> KafkaError | None:
    """Kafka 3.9's checks of the whole request (KafkaApis.handleProduceRequest, then
    ReplicaManager's partitionEntriesForVerification): transactional records need a
    transactional.id the producer may WRITE; one producer id for all of them."""
    transactional = _transactional(firsts)
    if not transactional:
        return None
    if transactional_id is None or not allowed(ctx, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return KafkaError(ErrorCode.transactional_id_authorization_failed, "Transactional Id authorization failed.")
    if ctx.txn.verifier.enabled and len({h.producer_id for h in transactional.values()}) > 1:
        return KafkaError(ErrorCode.invalid_producer_id_mapping,
                          "Transactional records contained more than one producer ID")
    return None


async def _verify(ctx: BrokerContext, transactional_id: str | None, firsts: dict,
                  abortable: bool = False) -> tuple[dict, dict]:
    """KIP-890 part 1: ({partition: guard to append with}, {partition: the KafkaError to answer})
    for the partitions whose transactional batch must first be verified with the coordinator
    (those whose producer has no transaction open on the partition yet)."""
    verifier = ctx.txn.verifier
    guards: dict[tuple[str, int], object] = {}
    errors: dict[tuple[str, int], KafkaError] = {}
    if transactional_id is None or not verifier.enabled:
        return guards, errors
    transactional = _transactional(firsts)
    for key, h in transactional.items():
        try:
            guard = ctx.replicas.start_verification(key[0], key[1], h.producer_id, h.producer_epoch)
        except KafkaError as e:
            errors[key] = e
            continue
        if guard is not None:
            guards[key] = guard
    if guards:
        first = transactional[next(iter(guards))]
        answers = await verifier.verify(transactional_id, first.producer_id, first.producer_epoch, set(guards))
        for key, code in answers.items():
            if (error := produce_error(code, abortable)) is not None:
                errors[key] = error
                guards.pop(key, None)
    return guards, errors


def _denied_topics(ctx: BrokerContext, names: set[str]) -> dict[str, ErrorCode]:
    """Topics this producer may not write to, with Kafka's code."""
    return {name: ErrorCode.topic_authorization_failed for name in names
            if not allowed(ctx, Operation.WRITE, ResourceType.TOPIC, name)}


def _append(ctx: BrokerContext, key: tuple[str, int], records, acks: int, guard):
    if not records:
        raise ProduceRecordsError(ErrorCode.invalid_record, "produce request without a record batch")
    # read-only, as kio decoded it: the log writes stamped copies of the batch headers, not a copy of the records
    return ctx.replicas.append(key[0], key[1], memoryview(records), acks=acks, guard=guard)


async def _await_replication(waits, results, timeout) -> None:
    seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else timeout / 1000
    futures = [f for f, _ in waits.values()]
    if len(futures) == 1:  # the single record's path: woken by the future itself, not through
        await _one(futures[0], seconds)  # asyncio.wait's callback and waiter (a loop iteration more)
    else:
        await asyncio.wait(futures, timeout=max(seconds, 0))
    for key, (future, info) in waits.items():
        if not future.done() or future.cancelled():
            future.cancel()   # the high watermark did not reach the batch within the request's timeout
            results[key] = _appended(key[1], info, ErrorCode.request_timed_out)
        else:
            results[key] = _appended(key[1], info, future.result())


async def _one(future: asyncio.Future, seconds: float) -> None:
    """Wait for ``future`` at most ``seconds``, after which it is cancelled (read as timed out),
    on the loop's shared deadline timer (``replication.deadlines``): ``asyncio.timeout``'s
    context manager and task bookkeeping, or a timer of its own scheduled and cancelled, cost
    the single record's path a few microseconds more."""
    deadlines.on(future.get_loop()).expire(future, seconds, deadlines.cancel)   # no get_running_loop's getpid
    try:
        await future
    except asyncio.CancelledError:
        if asyncio.current_task().cancelling():   # the request itself is cancelled (connection closed)
            raise


def _appended(index: int, info, code: ErrorCode = ErrorCode.none) -> PartitionProduceResponse:
    """The answer for an appended batch: its offset, append time and the log start offset, kept with
    the error of an acks=all wait (Kafka's DelayedProduce only sets the code of the append's answer)."""
    return PartitionProduceResponse(index, code, info.first_offset, info.log_append_time_ms, info.log_start_offset)


def _failure(index: int, code: ErrorCode, message: str | None, record_errors: tuple = (),
             log_start_offset: int = -1) -> PartitionProduceResponse:
    return PartitionProduceResponse(index, code, log_start_offset=log_start_offset, error_message=message,
                                    record_errors=record_errors)
