"""Spec validation: the reasons a bad spec gets in status."""

from __future__ import annotations

import pytest

from odradek.operator.validation import (SpecError, parse_cluster, quantity_bytes, validate_broker_config,
                                         validate_storage_change, validate_topic, validate_topic_change)


def test_quantities():
    assert quantity_bytes("10Gi") == 10 * 2**30
    assert quantity_bytes("500M") == 500 * 10**6
    assert quantity_bytes("1024") == 1024
    with pytest.raises(SpecError, match="invalid storage quantity"):
        quantity_bytes("ten gigs")


def test_broker_config_accepts_topic_defaults_aliases_group_and_broker_keys():
    out = validate_broker_config({"retention.ms": 60000, "log.retention.hours": "1", "min.insync.replicas": 2,
                                  "group.initial.rebalance.delay.ms": "0", "replica.lag.time.max.ms": "10000",
                                  "controlled.shutdown.max.retries": 5, "preallocate": True})
    assert out["retention.ms"] == "60000" and out["preallocate"] == "true"


@pytest.mark.parametrize("config, match", [
    ({"no.such.key": "1"}, "Unknown topic config name: no.such.key"),
    ({"retention.ms": "soon"}, "Invalid value soon for configuration retention.ms"),
    ({"group.initial.rebalance.delay.ms": "-5"}, "Invalid value -5 for configuration group.initial.rebalance.delay.ms"),
    ({"replica.lag.time.max.ms": "0"}, "Invalid value 0 for configuration replica.lag.time.max.ms"),
    ({"controlled.shutdown.max.retries": "x"}, "Invalid value x for configuration controlled.shutdown.max.retries"),
    ({"log.retention.hours": "soon"}, "Invalid value soon for configuration log.retention.hours"),
])
def test_broker_config_rejects(config, match):
    with pytest.raises(SpecError, match=match):
        validate_broker_config(config)


def test_cluster_specs():
    spec = parse_cluster({"brokers": {"config": {"retention.ms": 1000, "min.insync.replicas": 2}}})
    assert list(spec.brokers.config.items()) == [("min.insync.replicas", "2"), ("retention.ms", "1000")]
    assert parse_cluster({"zookeeper": {"external": {"connect": "z:2181"}}}).zookeeper.replicas == 0
    parse_cluster({"zookeeper": {"external": {"connect": "zk-0.zk.svc:2181,zk-1:2181"}}})
    with pytest.raises(SpecError, match="either managed or external"):
        parse_cluster({"zookeeper": {"managed": {}, "external": {"connect": "z:2181"}}})
    with pytest.raises(SpecError, match="not host:port"):
        parse_cluster({"zookeeper": {"external": {"connect": "zookeeper"}}})
    with pytest.raises(SpecError, match="no chroot"):
        parse_cluster({"zookeeper": {"external": {"connect": "z:2181/kafka"}}})
    with pytest.raises(SpecError, match="even"):
        parse_cluster({"zookeeper": {"managed": {"replicas": 2}}})
    with pytest.raises(SpecError, match="only to type persistent-claim"):
        parse_cluster({"brokers": {"storage": {"type": "ephemeral", "size": "1Gi"}}})
    with pytest.raises(SpecError, match="brokers.config"):
        parse_cluster({"brokers": {"config": {"bogus": "1"}}})
    with pytest.raises(SpecError, match="authSecret"):
        parse_cluster({"gateway": {"authSecret": "s"}})


def test_storage_can_only_grow():
    validate_storage_change("10Gi", "20Gi")
    validate_storage_change("10Gi", "10Gi")
    with pytest.raises(SpecError, match="cannot shrink volumes from 20Gi to 10Gi"):
        validate_storage_change("20Gi", "10Gi")


def test_topics():
    assert validate_topic("orders", {"config": {"retention.ms": 1000}}) == {"retention.ms": "1000"}
    with pytest.raises(SpecError, match="topic name"):
        validate_topic("x", {"topicName": "bad/name"})
    with pytest.raises(SpecError, match="Unknown topic config"):
        validate_topic("orders", {"config": {"retention": "1"}})
    validate_topic_change({"partitions": 6}, 3, 1)
    with pytest.raises(SpecError, match="partitions cannot decrease: the topic has 6, the spec asks for 3"):
        validate_topic_change({"partitions": 3}, 6, 1)
    validate_topic_change({"replicas": 3}, 6, 1)   # an RF change is replicas_change's


def test_rack_awareness_without_the_charts_node_role_is_an_invalid_spec():
    from odradek.operator import reconcile
    from odradek.operator.settings import OperatorSettings
    rack = parse_cluster({"rack": {"topologyKey": "topology.kubernetes.io/zone"}})
    no_role = OperatorSettings.from_env({"ODRADEK_OPERATOR_RACK_CLUSTERROLE": ""})
    with pytest.raises(SpecError, match="rbac.brokerRack=true"):
        reconcile.rack_cluster_role(rack, no_role)
    assert reconcile.rack_cluster_role(parse_cluster({}), no_role) is None
    role = OperatorSettings.from_env({"ODRADEK_OPERATOR_RACK_CLUSTERROLE": "odk-odradek-broker-rack"})
    assert reconcile.rack_cluster_role(rack, role) == "odk-odradek-broker-rack"
    assert reconcile.rack_cluster_role(rack, OperatorSettings.from_env({})) == "odradek-broker-rack"


@pytest.mark.parametrize("ca, why", [({"validityDays": 10, "renewalDays": 10}, "less than validityDays"),
                                     ({"validityDays": 0}, "at least 1")])
def test_bad_ca_settings_are_refused(ca, why):
    with pytest.raises(SpecError, match=why):
        parse_cluster({"clientsCa": ca})
