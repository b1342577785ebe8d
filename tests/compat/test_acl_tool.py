"""Kafka's ``kafka-acls`` (kafka.admin.AclCommand) adds, lists and removes ACLs on Odradek with
the same output as on Apache Kafka: LITERAL and PREFIXED patterns, a MATCH listing, a removal.

Kafka (KRaft here) applies a new ACL on its brokers a moment after CreateAcls returns, so each
listing is compared once it shows what was asked; entries within one resource are compared as
sets (neither system promises an order). The ACLs stay: their names are this test's own."""

from __future__ import annotations

import re

from odradek.dev.waiting import wait_until
from tests.support.kafka_tools import ACL_COMMAND


def acls(endpoint, *args: str) -> str:
    proc = endpoint.tool(ACL_COMMAND, *args)
    assert proc.returncode == 0, f"exited {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc.stdout


def blocks(text: str) -> dict[str, set[str]]:
    """'<header> `ResourcePattern(...)`:' -> its entry lines, for each block the tool printed."""
    out: dict[str, set[str]] = {}
    header = None
    for line in text.splitlines():
        if re.match(r"^\S.*ResourcePattern\(.*\)`:\s*$", line):
            header = line.strip()
            out[header] = set()
        elif header is not None and line.strip().startswith("(principal="):
            out[header].add(line.strip())
    return out


def adding(text: str) -> dict[str, set[str]]:
    """The "Adding ACLs for resource" blocks (the listing the tool prints next may lag on Kafka)."""
    return {k: v for k, v in blocks(text).items() if k.startswith("Adding")}


def listing(endpoint, *filter_args: str, entries: int) -> dict[str, set[str]]:
    """``--list`` with this filter, once it shows ``entries`` ACLs."""
    found: dict[str, set[str]] = {}

    def complete() -> bool:
        found.clear()
        found.update(blocks(acls(endpoint, "--list", *filter_args)))
        return sum(len(v) for v in found.values()) == entries
    wait_until(complete, 30, f"{endpoint.name}: {entries} ACLs listed", interval=0.3)
    return dict(found)


def test_kafka_acls_add_list_remove(both, topic):
    family = f"{topic}-fam-"
    out: dict[str, dict] = {}
    for e in both:
        added = acls(e, "--add", "--allow-principal", "User:ana", "--operation", "Read", "--operation", "Describe",
                     "--topic", topic)
        prefixed = acls(e, "--add", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.9", "--operation",
                        "Write", "--topic", family, "--resource-pattern-type", "prefixed")
        group = acls(e, "--add", "--allow-principal", "User:ana", "--operation", "Read", "--group", f"{topic}-app")
        literal = listing(e, "--topic", topic, entries=2)
        matched = listing(e, "--topic", f"{family}1", "--resource-pattern-type", "match", entries=1)
        acls(e, "--remove", "--allow-principal", "User:ana", "--operation", "Read", "--topic", topic, "--force")
        after = listing(e, "--topic", topic, entries=1)
        out[e.name] = {"added": adding(added), "prefixed": adding(prefixed), "group": adding(group),
                       "literal": literal, "matched": matched, "after": after}
    assert all(out["kafka"].values()), out["kafka"]  # every step printed what it did
    assert out["odradek"] == out["kafka"]
