"""The inter-broker client's seam: ``KafkaClient`` frames requests on what its ``Connector``
opens (TLS and SASL are the connector's, ``replication.connector``), in one process against
a loopback server answering SaslHandshake like a SASL listener."""

from __future__ import annotations

import asyncio

import pytest
from kio.static.constants import EntityType

from odradek.broker.replication.client import KafkaClient
from odradek.broker.replication.connector import ClientSecurity
from odradek.broker.replication.wire import read_frame
from odradek.errors import ErrorCode
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas, decode_request, encode_response, make


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


async def _handshake_server(seen: list):
    """Answers SaslHandshake v1 with UNSUPPORTED_SASL_MECHANISM, recording what it was asked."""
    async def serve(reader, writer):
        try:
            while True:
                header, body = decode_request(memoryview(await read_frame(reader)))
                seen.append((header.api_key, body.mechanism))
                s = Schemas(ApiKey.SASL_HANDSHAKE, 1)
                writer.write(encode_response(ApiKey.SASL_HANDSHAKE, 1, header.correlation_id, make(
                    s.SaslHandshakeResponse, error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=("PLAIN",))))
        except asyncio.IncompleteReadError:
            writer.close()
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


class _Opened:
    """A connector that opens plain connections and counts them."""

    def __init__(self) -> None:
        self.opened: list[tuple[str, int, str]] = []

    async def open(self, host, port, *, client_id, timeout):
        self.opened.append((host, port, client_id))
        return await asyncio.open_connection(host, port)


def test_the_client_sends_its_requests_on_what_its_connector_opened():
    async def scenario():
        seen: list = []
        server, port = await _handshake_server(seen)
        connector = _Opened()
        client = KafkaClient("127.0.0.1", port, client_id="t", security=connector)
        try:
            s = Schemas(ApiKey.SASL_HANDSHAKE, 1, EntityType.request)
            for _ in range(2):
                answer = await client.request(ApiKey.SASL_HANDSHAKE, 1, make(s.SaslHandshakeRequest, mechanism="X"),
                                              timeout=5)
                assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
            assert connector.opened == [("127.0.0.1", port, "t")], "one connection, opened by the connector"
            assert seen == [(ApiKey.SASL_HANDSHAKE, "X")] * 2
        finally:
            client.close()
            server.close()
    run(scenario())


def test_a_refused_sasl_handshake_closes_the_connection_with_a_connection_error():
    async def scenario():
        seen: list = []
        server, port = await _handshake_server(seen)
        client = KafkaClient("127.0.0.1", port, client_id="t",
                             security=ClientSecurity("INTERNAL", mechanism="SCRAM-SHA-512", username="u", password="p"))
        try:
            with pytest.raises(ConnectionError, match="SASL handshake"):
                await client.connect()
            assert not client.connected and seen == [(ApiKey.SASL_HANDSHAKE, "SCRAM-SHA-512")]
        finally:
            server.close()
    run(scenario())


async def _answering_server(answer):
    """Each request frame is answered by ``await answer(writer, encoded SaslHandshake response)``."""
    async def serve(reader, writer):
        try:
            while True:
                header, _ = decode_request(memoryview(await read_frame(reader)))
                s = Schemas(ApiKey.SASL_HANDSHAKE, 1)
                await answer(writer, encode_response(ApiKey.SASL_HANDSHAKE, 1, header.correlation_id, make(
                    s.SaslHandshakeResponse, error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=("PLAIN",))))
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def test_an_answer_in_pieces_is_read_whole_and_an_unanswered_request_times_out_closing_the_connection():
    async def scenario():
        async def in_pieces(writer, frame):
            for piece in (frame[:3], frame[3:9], frame[9:]):
                writer.write(piece)
                await writer.drain()
                await asyncio.sleep(0.01)

        async def never(_writer, _frame):
            await asyncio.sleep(5)

        s = Schemas(ApiKey.SASL_HANDSHAKE, 1, EntityType.request)
        request = make(s.SaslHandshakeRequest, mechanism="X")
        for answer, timeout in ((in_pieces, 5), (never, 0.2)):
            server, port = await _answering_server(answer)
            client = KafkaClient("127.0.0.1", port, client_id="t", security=_Opened())
            try:
                if answer is in_pieces:
                    assert (await client.request(ApiKey.SASL_HANDSHAKE, 1, request, timeout=timeout)).mechanisms == ("PLAIN",)
                else:
                    started = asyncio.get_running_loop().time()
                    with pytest.raises(ConnectionError, match="TimeoutError"):
                        await client.request(ApiKey.SASL_HANDSHAKE, 1, request, timeout=timeout)
                    assert asyncio.get_running_loop().time() - started < 2 and not client.connected
            finally:
                client.close()
                server.close()
    run(scenario())
