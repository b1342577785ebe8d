"""The quota tree read in one walk (quotas.store) and installed in both enforcers."""

from __future__ import annotations

import asyncio

from odradek.broker.quotas.connections import ConnectionRates
from odradek.broker.quotas.manager import ClientQuotaManager
from odradek.broker.quotas.store import QuotaStore
from odradek.broker.zk.configs import EntityConfigs
from odradek.cluster.zk_data import DEFAULT, ENTITY_CONFIG
from tests.security.test_zk_data import FakeZnodes


class CountingConfigs(EntityConfigs):
    def __init__(self, znodes) -> None:
        super().__init__(znodes)
        self.listed: list[str] = []

    def entities(self, path: str) -> list[str]:
        self.listed.append(path)
        return super().entities(path)


def _quotas() -> CountingConfigs:
    configs = CountingConfigs(FakeZnodes())
    sanitize = ENTITY_CONFIG.sanitize
    for path, config in ((f"users/{sanitize('bob')}", {"producer_byte_rate": "1024", "SCRAM-SHA-512": "x"}),
                         (f"users/{sanitize(None)}/clients/{sanitize('app')}", {"request_percentage": "50.5"}),
                         (f"clients/{sanitize(None)}", {"consumer_byte_rate": "2048", "nope": "1"}),
                         ("ips/127.0.0.1", {"connection_creation_rate": "10"}),
                         (f"ips/{sanitize(None)}", {"connection_creation_rate": "5"}),
                         ("users/carol", {"producer_byte_rate": "fast"})):
        configs.alter(*path.split("/", 1), lambda _c, config=config: config)
    return configs


def test_one_walk_feeds_the_quota_manager_and_the_connection_rates():
    configs = _quotas()
    manager, rates = ClientQuotaManager(), ConnectionRates()
    store = QuotaStore(configs, (manager.install, rates.install))
    asyncio.run(store.reload())
    assert configs.listed.count("users") == 1 and configs.listed.count("ips") == 1   # the tree walked once
    assert manager.entities.resolve("producer_byte_rate", "bob", "any") == (("bob", ""), 1024.0)
    assert manager.entities.resolve("request_percentage", "eve", "app") == (("eve", "app"), 50.5)
    assert manager.entities.resolve("consumer_byte_rate", "eve", "x") == (("", "x"), 2048.0)
    assert rates.ip_rates == {"127.0.0.1": 10, DEFAULT: 5}


def test_the_snapshot_names_entities_as_describe_client_quotas_does():
    entries = dict(QuotaStore(_quotas()).read().entries)
    assert entries[(("user", "bob"),)] == {"producer_byte_rate": 1024.0}          # SCRAM keys are not quotas
    assert entries[(("user", None), ("client-id", "app"))] == {"request_percentage": 50.5}
    assert entries[(("ip", "127.0.0.1"),)] == {"connection_creation_rate": 10.0}
    assert (("user", "carol"),) not in entries                                        # not a number: skipped


def test_without_zookeeper_nothing_is_in_force():
    assert QuotaStore(None).read().entries == ()
