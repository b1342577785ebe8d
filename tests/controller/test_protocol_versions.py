"""The control plane's protocol versions (``odradek.cluster.versions``): the configured version,
what a process uses with a peer, and the transport's header on both sides (an in-process
aiohttp server: no processes)."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from odradek.cluster import control_plane as cp
from odradek.cluster import versions
from odradek.cluster.control_plane_http import client_session, send, send_blocking, serve, server_app
from odradek.config.broker import INTER_BROKER_PROTOCOL_VERSION
from odradek.errors import ErrorCode, KafkaError


def test_the_configured_version_is_one_this_release_speaks():
    assert INTER_BROKER_PROTOCOL_VERSION.typed_default == versions.CURRENT == 2
    assert [INTER_BROKER_PROTOCOL_VERSION.parse(v) for v in ("1", "2")] == [1, 2]
    for bad in ("0", "3"):
        with pytest.raises(ValueError):
            INTER_BROKER_PROTOCOL_VERSION.parse(bad)


def test_a_peer_is_used_at_the_lower_of_both_versions_and_newer_senders_are_refused():
    assert versions.of({}) == 1, "no header: a release before the header"
    assert versions.of({versions.HEADER: "2"}) == 2
    with pytest.raises(KafkaError) as e:
        versions.of({versions.HEADER: "two"})
    assert e.value.code == ErrorCode.invalid_request
    assert (versions.usable(2, 1), versions.usable(1, 2), versions.usable(2, 2)) == (1, 1, 2)
    versions.check_sender(versions.CURRENT)
    with pytest.raises(KafkaError) as e:
        versions.check_sender(versions.CURRENT + 1)
    assert e.value.code == ErrorCode.unsupported_version


def test_maintenance_needs_the_version_that_reads_its_znode():
    versions.require(2, versions.MAINTENANCE, "maintenance mode")
    with pytest.raises(KafkaError) as e:
        versions.require(1, versions.MAINTENANCE, "maintenance mode")
    assert e.value.code == ErrorCode.unsupported_version and "inter.broker.protocol.version 2" in e.value.message


def test_requests_and_answers_carry_their_senders_version():
    async def scenario():
        async def health(request: web.Request) -> web.Response:  # echoes the sender's version
            return web.json_response({"active": False, "id": str(versions.of(request.headers)), "url": None,
                                      "epoch": None, "zookeeper": None})
        runner, (host, port) = await serve(server_app({cp.HEALTH: health}, version=1), "127.0.0.1", 0, None, "test")
        url = f"http://{host}:{port}"
        try:
            async with client_session(version=1) as session:
                status, body = await send(session, url, cp.health(), 5)
                assert (status, body["id"]) == (200, "1")
            async with client_session() as session:  # tools: this release's version
                async with session.get(url + cp.HEALTH.path()) as resp:
                    assert (await resp.json())["id"] == str(versions.CURRENT)
                    assert resp.headers[versions.HEADER] == "1", "the server announces its configured version"
            async with client_session(version=versions.CURRENT + 1) as session:
                status, body = await send(session, url, cp.health(), 5)
                assert (status, body["error_code"]) == (400, int(ErrorCode.unsupported_version))
            status, body = await asyncio.to_thread(send_blocking, url, cp.health(), 5)
            assert (status, body["id"]) == (200, str(versions.CURRENT))
        finally:
            await runner.cleanup()
    asyncio.run(scenario())


def test_the_controller_takes_the_brokers_key():
    from odradek.controller.cli import parse_args
    assert parse_args(["--zookeeper", "x:1"]).protocol_version == versions.CURRENT
    assert parse_args(["--zookeeper", "x:1", "--config", "inter.broker.protocol.version=1"]).protocol_version == 1
    with pytest.raises(SystemExit):
        parse_args(["--zookeeper", "x:1", "--config", "inter.broker.protocol.version=3"])
