"""A handler answers with its throttle (``Answer``): the dispatcher raises the response's
``throttle_time`` to it and the connection gate mutes the connection for it (KIP-219)."""

from __future__ import annotations

import asyncio
import datetime
import io
import struct

from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_writer
from kio.index import load_request_schema

from odradek.broker.dispatch import Dispatcher
from odradek.broker.handlers.answer import ZERO, Answer
from odradek.broker.quotas.manager import ClientQuotaManager
from odradek.broker.security.gate import ConnectionGate
from odradek.broker.security.listeners import Listener
from odradek.broker.security.sasl import SaslServer
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, make


def _frame(api_key: int, version: int, body) -> bytes:
    buf = io.BytesIO()
    entity_writer(RequestHeader)(buf, RequestHeader(request_api_key=api_key, request_api_version=version,
                                                    correlation_id=5, client_id="c"))
    entity_writer(type(body))(buf, body)
    return buf.getvalue()


def _describe_cluster_frame() -> bytes:
    request = load_request_schema(ApiKey.DESCRIBE_CLUSTER, 0)(include_cluster_authorized_operations=False)
    return _frame(ApiKey.DESCRIBE_CLUSTER, 0, request)


async def _throttled(header, request):
    s = Schemas(ApiKey.DESCRIBE_CLUSTER, header.api_version)
    return Answer(make(s.DescribeClusterResponse, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None,
                       cluster_id="c", controller_id=1, brokers=(), cluster_authorized_operations=0), 250)


def test_the_dispatcher_raises_the_response_throttle_and_returns_it():
    dispatcher = Dispatcher({ApiKey.DESCRIBE_CLUSTER: (0, 0, _throttled)}, quotas=ClientQuotaManager())
    answer = asyncio.run(dispatcher.handle(_describe_cluster_frame()))
    assert answer.throttle_ms == 250
    (piece,) = answer.body
    # size, correlation id, the flexible header's empty tags, throttle_time_ms
    assert struct.unpack(">iibi", bytes(piece[:13]))[1:] == (5, 0, 250)


def test_the_gate_mutes_the_connection_for_the_answers_throttle():
    class Connection:
        muted: list[float] = []

        def throttle(self, seconds: float) -> None:
            self.muted.append(seconds)

    class Transport:
        def get_extra_info(self, name):
            return ("127.0.0.1", 1) if name == "peername" else None

    dispatcher = Dispatcher({ApiKey.DESCRIBE_CLUSTER: (0, 0, _throttled)},
                            advertised={ApiKey.SASL_HANDSHAKE: (0, 1)})
    listener = Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 0, "127.0.0.1", None)
    gate = ConnectionGate(listener, dispatcher, SaslServer([], {}, None, 0), ())
    gate.connection = Connection()
    gate.bind(Transport())
    pieces = asyncio.run(gate(_describe_cluster_frame()))
    assert len(pieces) == 1 and gate.connection.muted == [0.25]


def test_an_unthrottled_answer_and_a_plain_body_mute_nothing():
    async def plain(header, request):
        return (await _throttled(header, request)).body
    answer = asyncio.run(Dispatcher({ApiKey.DESCRIBE_CLUSTER: (0, 0, plain)}).handle(_describe_cluster_frame()))
    assert answer.throttle_ms == 0 and answer.body
    assert datetime.timedelta(0) == ZERO
