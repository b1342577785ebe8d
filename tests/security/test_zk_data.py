"""Every znode kind stated once (odradek.cluster.zk_data): what a writer encodes its readers
decode, in Kafka's formats; and the broker's ports over a ZooKeeper stand-in."""

from __future__ import annotations

import json

import pytest

from odradek.broker.security.acl_store import AclStore
from odradek.broker.security.acl import Entry, Operation, Pattern, PatternType, Permission, ResourceType
from odradek.broker.security.scram_store import ScramStore, credential_from_password
from odradek.broker.zk.configs import EntityConfigs
from odradek.broker.zk.znodes import NoZooKeeper, Znodes
from odradek.cluster.model import BrokerInfo
from odradek.cluster.zk_data import (ACL_CHANGE, BROKER, CONFIG_CHANGE, CONTROLLER, ENTITY_CONFIG, LOG_DIR_EVENT,
                                     QUOTA_ENTITY, SCRAM_CREDENTIAL, ControllerInfo, LogDirEvent, ScramCredential)


class FakeZnodes(Znodes):
    """Znodes over a dict: path -> (data, version); sequential children numbered from 0."""

    def __init__(self) -> None:
        super().__init__(lambda: None)
        self.nodes: dict[str, tuple[bytes, int]] = {}
        self.seq = 0

    def get(self, path):
        return self.nodes.get(path)

    def children(self, path):
        prefix = path.rstrip("/") + "/"
        return sorted({p[len(prefix):].split("/")[0] for p in self.nodes if p.startswith(prefix)})

    def ensure(self, path):
        pass

    def put(self, path, data, version):
        found = self.nodes.get(path)
        if (found is None) != (version < 0) or (found is not None and found[1] != version):
            return False
        self.nodes[path] = (data, version + 1 if version >= 0 else 0)
        return True

    def delete(self, path, version=-1):
        return self.nodes.pop(path, None) is not None

    def append(self, prefix, data):
        path = f"{prefix}{self.seq:010d}"
        self.seq += 1
        self.nodes[path] = (data, 0)
        return path


def test_broker_controller_and_log_dir_event_round_trip():
    info = BrokerInfo(3, "h", 9092, "http://h:9093", "r1", endpoints=(("PLAINTEXT", "h", 9092),))
    assert BROKER.path(3) == "/brokers/ids/3" and BROKER.decode(BROKER.encode(info)) == info
    controller = ControllerInfo("c-1", 7, "http://c:8080")
    assert CONTROLLER.path == "/controller" and CONTROLLER.decode(CONTROLLER.encode(controller)) == controller
    assert json.loads(LOG_DIR_EVENT.encode(LogDirEvent(2, 99))) == {"version": 1, "broker": 2, "event": 1,
                                                                      "broker_epoch": 99}
    assert LOG_DIR_EVENT.decode(LOG_DIR_EVENT.encode(LogDirEvent(2, 99))) == LogDirEvent(2, 99)
    with pytest.raises((ValueError, KeyError)):
        CONTROLLER.decode(b'{"url": "x"}')


def test_the_controller_reads_the_brokers_decoder():
    from odradek.controller.store import ControllerRecord
    record = ControllerRecord("c-1", 7, "http://c:8080")
    assert ControllerRecord.from_json(json.loads(CONTROLLER.encode(ControllerInfo("c-1", 7, "http://c:8080")))) \
        == record


def test_entity_configs_notifications_and_credentials():
    assert ENTITY_CONFIG.path("users", ENTITY_CONFIG.sanitize("CN=a b")) == "/config/users/CN%3Da%20b"
    assert ENTITY_CONFIG.decode(ENTITY_CONFIG.encode({"a": "1"}), "x") == {"a": "1"}
    assert ENTITY_CONFIG.decode(b"not json", "x") == {}
    assert CONFIG_CHANGE.decode(CONFIG_CHANGE.encode("users", "bob/clients/app")) == ("users", "bob/clients/app")
    assert CONFIG_CHANGE.decode(b'{"version":1,"entity_type":"brokers","entity_name":"1"}') == ("brokers", "1")
    assert CONFIG_CHANGE.sequence("config_change_0000000012") == 12 and CONFIG_CHANGE.sequence("other") == -1
    credential = ScramCredential(b"salt", b"stored", b"server", 4096)
    assert SCRAM_CREDENTIAL.decode(SCRAM_CREDENTIAL.encode(credential)) == credential
    assert QUOTA_ENTITY.entity_path((("user", None), ("client-id", "x*"))) == "users/<default>/clients/x%2A"
    assert QUOTA_ENTITY.entity_path((("ip", "10.0.0.1"),)) == "ips/10.0.0.1"
    assert ACL_CHANGE.decode(*ACL_CHANGE.encode("TOPIC", "t-", "PREFIXED")) == ("TOPIC", "t-", "PREFIXED")


def test_entity_configs_write_then_notify_and_scram_reads_it_back():
    znodes = FakeZnodes()
    configs = EntityConfigs(znodes)
    store = ScramStore(configs)
    store.set_password("alice", "SCRAM-SHA-512", "secret")
    store.update_config("alice", lambda c: c.__setitem__("producer_byte_rate", "1024"))
    config, version = configs.read("users", "alice")
    assert version == 1 and config["producer_byte_rate"] == "1024" and "SCRAM-SHA-512" in config
    assert store.verify("alice", "SCRAM-SHA-512", "secret") and not store.verify("alice", "SCRAM-SHA-512", "nope")
    notes = [CONFIG_CHANGE.decode(d) for p, (d, _) in sorted(znodes.nodes.items()) if p.startswith("/config/changes/")]
    assert notes == [("users", "alice"), ("users", "alice")]
    assert not store.update_config("alice", lambda c: None)   # unchanged: nothing written
    assert store.describe(None) == [("alice", 0, None, [(2, 4096)])]
    assert credential_from_password("SCRAM-SHA-256", "x").startswith("salt=")


def test_acl_store_over_znodes():
    znodes = FakeZnodes()
    store = AclStore(znodes)
    p = Pattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
    entry = Entry("User:ana", "*", Operation.READ, Permission.ALLOW)
    store.update(p, lambda before: before | {entry})
    assert store.read_all() == {p: frozenset({entry})} and store.snapshot.matching(ResourceType.TOPIC, "orders")
    assert any(path.startswith("/kafka-acl-changes/acl_changes_") for path in znodes.nodes)
    store.update(p, lambda before: frozenset())
    assert store.read_all() == {}


def test_no_session_is_an_error_of_its_own():
    with pytest.raises(NoZooKeeper):
        Znodes(lambda: None).get("/controller")
