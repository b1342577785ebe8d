"""Kafka's ``kafka-configs`` (kafka.admin.ConfigCommand) sets, describes and removes client
quotas on Odradek with the same output as on Apache Kafka: a user, a client id, a user's
client id and the default client id (AlterClientQuotas / DescribeClientQuotas), and the
refusals of an unknown key and of a fractional byte rate.

Kafka (KRaft here) applies quotas a moment after AlterClientQuotas returns, so a describe is
compared once it shows what was asked. The entities are this test's own (a random suffix)."""

from __future__ import annotations

import uuid

from odradek.dev.waiting import wait_until
from tests.support.kafka_tools import CONFIG_COMMAND


def configs(endpoint, *args: str, expect_ok: bool = True):
    proc = endpoint.tool(CONFIG_COMMAND, *args)
    if expect_ok:
        assert proc.returncode == 0, (f"exited {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\n"
                                      f"stderr:\n{proc.stderr[-3000:]}")
    return proc


def described(endpoint, entity: list[str], wanted: str) -> str:
    """``--describe`` of one entity, once its output contains ``wanted``."""
    out = {}

    def shows() -> bool:
        out["text"] = configs(endpoint, "--describe", *entity).stdout.strip()
        return wanted in out["text"]
    wait_until(shows, 30, f"{endpoint.name}: {entity} described with {wanted}", interval=0.3)
    return out["text"]


def test_kafka_configs_client_quotas(both):
    suffix = uuid.uuid4().hex[:6]
    user, client = f"quota-user-{suffix}", f"quota-app-{suffix}"
    entities = {
        "user": ["--entity-type", "users", "--entity-name", user],
        "client": ["--entity-type", "clients", "--entity-name", client],
        "user+client": ["--entity-type", "users", "--entity-name", user, "--entity-type", "clients",
                        "--entity-name", client],
    }
    out: dict[str, dict[str, str]] = {}
    for e in both:
        o = out[e.name] = {}
        o["add user"] = configs(e, "--alter", "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152",
                                *entities["user"]).stdout.strip()
        o["describe user"] = described(e, entities["user"], "producer_byte_rate=1048576")
        configs(e, "--alter", "--add-config", "request_percentage=50.5", *entities["client"])
        o["describe client"] = described(e, entities["client"], "request_percentage=50.5")
        configs(e, "--alter", "--add-config", "producer_byte_rate=4096", *entities["user+client"])
        o["describe user+client"] = described(e, entities["user+client"], "producer_byte_rate=4096")
        o["delete"] = configs(e, "--alter", "--delete-config", "consumer_byte_rate", *entities["user"]).stdout.strip()
        o["describe after delete"] = described(e, entities["user"], "producer_byte_rate=1048576")
        bad_key = configs(e, "--alter", "--add-config", "producer_rate=5", *entities["client"], expect_ok=False)
        o["unknown key"] = f"{bad_key.returncode != 0} {'producer_rate' in bad_key.stdout + bad_key.stderr}"
        fractional = configs(e, "--alter", "--add-config", "producer_byte_rate=10.5", *entities["client"],
                             expect_ok=False)
        o["fractional"] = f"{fractional.returncode != 0}"
        for entity in entities.values():  # leave nothing behind in the shared clusters
            configs(e, "--alter", "--delete-config", "producer_byte_rate,consumer_byte_rate,request_percentage",
                    *entity, expect_ok=False)
    assert "consumer_byte_rate" not in out["odradek"]["describe after delete"]
    assert out["odradek"] == out["kafka"]
