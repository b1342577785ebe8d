"""Reads across the registry's replicas (``Registry.fresh``, ``routes._fresh``): a read that would
answer "not found" catches up with the ``_schemas`` log first, so a schema written through another
replica and not yet applied here is found; what is truly absent is still "not found", after one
catch-up; the message browser catches up once for a page naming an id it lacks. On a stand-in log
whose records arrive only when the registry catches up. No processes."""

from __future__ import annotations

import asyncio
import base64
import json
from types import SimpleNamespace

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from odradek.gateway import edge, framed
from odradek.gateway.errors import GatewayError
from odradek.gateway.registry import routes
from odradek.gateway.registry import state as st
from odradek.gateway.registry.errors import SchemaNotFound, StoreTimeout, SubjectNotFound
from odradek.gateway.registry.schemas import AVRO, Schema
from odradek.gateway.registry.service import Registry

LONG = '{"type":"long"}'


class BehindLog:
    """A replica's log that has not applied what another replica wrote: ``pending`` records are
    applied by ``caught_up``, as the reader would by the log's end."""

    def __init__(self, pending: list[tuple[bytes, bytes]], reachable: bool = True):
        self.state = st.RegistryState()
        self.pending, self.reachable, self.catch_ups = pending, reachable, 0

    async def caught_up(self, timeout: float) -> None:
        self.catch_ups += 1
        if not self.reachable:
            raise StoreTimeout("Timed out waiting for _schemas")
        for key, value in self.pending:
            self.state.apply(key, value)
        self.pending = []


def _written_elsewhere(subject: str, schema_id: int) -> list[tuple[bytes, bytes]]:
    version = st.Version(subject, 1, schema_id)
    return [(st.schema_key(subject, 1), st.schema_value(version, Schema(AVRO, LONG)))]


def test_a_schema_written_through_another_replica_is_found_by_id_by_version_and_by_lookup():
    log = BehindLog(_written_elsewhere("orders-value", 7))
    registry = Registry(log)
    assert asyncio.run(registry.fresh(lambda: registry.version("orders-value", 1))).id == 7
    assert asyncio.run(registry.fresh(lambda: registry.schema(7))).text == LONG
    assert asyncio.run(registry.fresh(lambda: registry.lookup("orders-value", Schema(AVRO, LONG)))).id == 7
    assert log.catch_ups == 1      # found at once after the first catch-up


def test_what_is_absent_is_not_found_after_one_catch_up_and_a_found_read_costs_none():
    log = BehindLog(_written_elsewhere("orders-value", 7))
    registry = Registry(log)
    with pytest.raises(SubjectNotFound):
        asyncio.run(registry.fresh(lambda: registry.versions("payments-value")))
    assert log.catch_ups == 1
    asyncio.run(registry.fresh(lambda: registry.schema(7)))
    assert log.catch_ups == 1


def test_a_not_found_that_cannot_be_checked_answers_the_store_timeout_not_a_wrong_404():
    registry = Registry(BehindLog(_written_elsewhere("orders-value", 7), reachable=False))
    with pytest.raises(StoreTimeout):
        asyncio.run(registry.fresh(lambda: registry.schema(7)))
    with pytest.raises(SchemaNotFound):      # without ``fresh``: this replica's own (stale) view
        registry.schema(7)


def test_the_read_routes_answer_what_another_replica_wrote_and_404_what_nobody_did():
    app = FastAPI()
    routes.install(app)
    app.add_exception_handler(GatewayError, edge.domain_error)
    app.state.tokens, app.state.registry = None, Registry(BehindLog(_written_elsewhere("orders-value", 7)))
    with TestClient(app) as client:
        assert client.get("/subjects/orders-value/versions/1").json()["id"] == 7
        assert client.get("/schemas/ids/7/schema").json() == {"type": "long"}
        assert client.get("/subjects/payments-value/versions/1").json()["error_code"] == 40401
        assert client.get("/schemas/ids/8").json()["error_code"] == 40403
        assert client.get("/config/orders-value").json()["error_code"] == 40408


def test_the_message_browser_decodes_a_record_whose_schema_another_replica_registered_catching_up_once():
    log = BehindLog(_written_elsewhere("orders-value", 7))
    app = SimpleNamespace(state=SimpleNamespace(registry=Registry(log), tokens=None))
    request = SimpleNamespace(app=app, headers={})
    framed_long = base64.b64encode(b"\0" + (7).to_bytes(4, "big") + b"\x54").decode()      # zigzag 42
    unknown = base64.b64encode(b"\0" + (8).to_bytes(4, "big") + b"\x02").decode()
    page = json.dumps([{"value": framed_long}, {"value": unknown}, {"value": base64.b64encode(b"x").decode()}])
    records = json.loads(asyncio.run(framed.decoded_body(request, "orders", page.encode())))
    assert records[0]["value_schema"] == {"id": 7, "type": "AVRO", "subject": "orders-value", "version": 1,
                                          "data": 42}
    assert "value_schema" not in records[1] and "value_schema" not in records[2]
    assert log.catch_ups == 1


def test_a_gateway_stopping_while_kafka_is_unreachable_ends_the_registry_start_at_once():
    """The start waits up to 30 s for the cluster's metadata, in one-second tries: ``close`` ends it
    within a try, so the gateway's shutdown is not held by a Kafka at nowhere."""
    from confluent_kafka import KafkaException

    from odradek.gateway.registry.log import LogSettings, SchemasLog

    async def run() -> None:
        schemas = SchemasLog(LogSettings("127.0.0.1:1", {}, "http://127.0.0.1:1"))
        start = asyncio.create_task(schemas.start())
        await asyncio.sleep(0.5)        # inside its first metadata try
        assert not start.done()
        await schemas.close()
        with pytest.raises(KafkaException):
            await asyncio.wait_for(start, 10)   # long before the start's own 30 s

    asyncio.run(run())
