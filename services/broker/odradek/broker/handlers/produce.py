"""Produce: append each partition's record batch on the leader.

acks=0 gets no response; if any partition failed, the connection is closed so the client
notices, as Kafka does. acks=1 answers after the leader's write. (acks=all is the same as
acks=1 while every partition has one replica.)
"""

from __future__ import annotations

import datetime

from odradek.broker.dispatch import ZERO
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.codec import Schemas, make
from odradek.protocol.connection import ConnectionClosed

_UTC = datetime.timezone.utc


async def produce(broker, header, req):
    s = Schemas(0, header.api_version)
    failed = False
    topics = []
    for td in req.topic_data:
        results = []
        for pd in td.partition_data:
            result = _append(broker, s, td.name, pd)
            failed |= result.error_code != ErrorCode.none
            results.append(result)
        topics.append(make(s.TopicProduceResponse, name=td.name, partition_responses=tuple(results)))
    if req.acks == 0:
        if failed:
            raise ConnectionClosed("acks=0 produce failed; closing so the producer notices")
        return None
    return make(s.ProduceResponse, responses=tuple(topics), throttle_time=ZERO)


def _append(broker, s, topic: str, pd):
    try:
        if not pd.records:
            raise KafkaError(ErrorCode.invalid_record, "produce request without a record batch")
        info = broker.replicas.append(topic, pd.index, memoryview(bytearray(pd.records)))
    except KafkaError as e:
        return make(s.PartitionProduceResponse, index=pd.index, error_code=e.code, base_offset=-1,
                    log_append_time=None, log_start_offset=-1, record_errors=(), error_message=e.message)
    append_time = (datetime.datetime.fromtimestamp(info.log_append_time_ms / 1000, _UTC)
                   if info.log_append_time_ms >= 0 else None)
    return make(s.PartitionProduceResponse, index=pd.index, error_code=ErrorCode.none,
                base_offset=info.first_offset, log_append_time=append_time,
                log_start_offset=info.log_start_offset, record_errors=(), error_message=None)
