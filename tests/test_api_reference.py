"""The README's list of served Kafka APIs is generated from the dispatcher's table
(``odradek.broker.api_reference``): drift fails here, and the list names every API that
ApiVersions advertises (the SASL exchange included) under a heading, by Kafka's own name."""

from __future__ import annotations

import re
from pathlib import Path

from kio.static.constants import EntityType

from odradek.broker.api_reference import GROUPS, main, render, served
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import Schemas

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_lists_the_served_apis():
    assert main([str(README), "--check"]) == 0, \
        "README.md's list of Kafka APIs drifted: run `python -m odradek.broker.api_reference README.md`"


def test_every_advertised_api_is_listed_under_a_heading_by_kafkas_name():
    ranges = served()
    assert {ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.CREATE_ACLS,
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS} <= set(ranges)
    assert set(ranges) == {k for _, _, keys in GROUPS for k in keys}, "an API without a heading: add it to GROUPS"
    text = render()
    for key, (lo, hi) in ranges.items():
        # kio's modules name the message definition they come from (".../DescribeAclsRequest.json")
        kafka_name = re.search(r"(\w+)Request\.json", Schemas(key, hi, EntityType.request).module.__doc__)[1]
        entry = f"{kafka_name} {lo}" + (f"-{hi}" if hi != lo else "")
        assert f" {entry}," in text or f" {entry}\n" in text, entry
