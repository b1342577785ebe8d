"""Every version of every group API we advertise: a request built from kio's schema goes
through its handler and the answer encodes (catches fields or classes a version lacks)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import types
import typing

import pytest

from odradek.broker.config import BrokerConfig
from odradek.broker.context import BrokerContext
from odradek.broker.handlers import consumer_groups, groups
from odradek.cluster.model import BrokerInfo
from odradek.protocol.codec import RequestHeader, encode_response
from kio.index import load_request_schema
from tests.groups.test_offsets import Replicas

_VALUES = {"group_id": "g", "key": "g", "coordinator_keys": ("g", "h"), "groups_names": ("g",),
           "groups": ("g",), "name": "t", "protocol_type": "consumer", "key_type": 0,
           "generation_id": -1, "generation_id_or_member_epoch": -1, "member_id": "", "committed_offset": 5}


def _build(cls):
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in _VALUES and not (f.name == "groups" and "Group" in str(hints[f.name])):
            kwargs[f.name] = _VALUES[f.name]
            continue
        kwargs[f.name] = _value(hints[f.name])
    return cls(**kwargs)


def _value(tp):
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return _value(next(a for a in args if a is not type(None)))
    if origin is tuple:
        inner = args[0]
        return (_build(inner),) if dataclasses.is_dataclass(inner) else (_value(inner),)
    if dataclasses.is_dataclass(tp):
        return _build(tp)
    if isinstance(tp, type) and issubclass(tp, datetime.timedelta):
        return tp.parse(datetime.timedelta(seconds=10))
    if isinstance(tp, type) and issubclass(tp, bool):
        return False
    if isinstance(tp, type) and issubclass(tp, int):
        return tp(0)
    if isinstance(tp, type) and issubclass(tp, bytes):
        return b"\x00\x01\x00\x00\x00\x01\x00\x01t"
    return "x"


TABLE = {**groups.TABLE, **consumer_groups.TABLE}
CASES = [(key, v) for key, (lo, hi, _) in sorted(TABLE.items()) for v in range(lo, hi + 1)]


@pytest.mark.parametrize("api_key,version", CASES)
def test_every_advertised_version_answers_and_encodes(tmp_path, api_key, version):
    async def scenario():
        replicas = Replicas(tmp_path)
        replicas.subscribe = lambda listener: None
        replicas.live_brokers = lambda: [BrokerInfo(1, "h", 1, "http://unused")]
        replicas.append = lambda *a, **k: None
        config = BrokerConfig(1, tmp_path, "unused", group_settings={"group.initial.rebalance.delay.ms": "0",
                                                                    "group.min.session.timeout.ms": "10"})
        ctx = BrokerContext.create(config, replicas, controller=None)
        await asyncio.sleep(0.01)  # the loads of the offsets partitions
        request = _build(load_request_schema(api_key, version))
        header = RequestHeader(api_key, version, 7, "client")
        body = await asyncio.wait_for(TABLE[api_key][2](ctx, header, request), 5)
        encode_response(api_key, version, 7, body)
        ctx.close()
    asyncio.run(scenario())
