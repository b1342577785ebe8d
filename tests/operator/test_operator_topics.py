"""OdradekTopic planning against the controller's TopicMetadata (pure)."""

from __future__ import annotations

import pytest

from odradek.operator.topics import plan_topic
from odradek.operator.validation import SpecError


def topic(partitions=3, rf=2, configs=None):
    return {"name": "t", "topic_id": "id", "configs": configs or {},
            "partitions": [{"partition": i, "replicas": list(range(rf))} for i in range(partitions)]}


def test_create_when_absent():
    assert plan_topic({"partitions": 3}, {}, None).create


def test_in_sync():
    plan = plan_topic({"partitions": 3, "replicas": 2}, {"retention.ms": "1"}, topic(configs={"retention.ms": "1"}))
    assert plan.empty and plan.describe() == "in sync"


def test_partitions_increase_and_config_drift_reverted():
    plan = plan_topic({"partitions": 6}, {"retention.ms": "1000"},
                      topic(configs={"retention.ms": "5", "segment.bytes": "1048576"}))
    assert plan.partitions == 6
    assert plan.set_configs == {"retention.ms": "1000"}
    assert plan.delete_configs == ("segment.bytes",)
    assert plan.describe() == "partitions -> 6; set retention.ms=1000; delete segment.bytes"


def test_unset_partitions_and_replicas_follow_the_cluster():
    assert plan_topic({}, {}, topic()).empty


def test_decrease_refused_rf_change_planned_elsewhere():
    with pytest.raises(SpecError, match="cannot decrease"):
        plan_topic({"partitions": 2}, {}, topic())
    assert plan_topic({"replicas": 3}, {}, topic()).empty   # replicas_change moves them
