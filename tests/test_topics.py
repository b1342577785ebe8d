"""Topic names, one rule for every part (odradek.topics): the controller, the operator and the
gateway refuse exactly the names Kafka's ``Topic.validate`` refuses; internal topics are Kafka's set."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from odradek import topics
from odradek.errors import ErrorCode, KafkaError
from odradek.gateway.models import CreateTopic
from odradek.operator.validation import SpecError, topic_name

ILLEGAL = ["", ".", "..", "a" * 250, "a b", "tôpic", "a/b", "a:b"]
LEGAL = ["a", "a" * 249, "Orders.v2_eu-1", "__consumer_offsets", "..."]


@pytest.mark.parametrize("name", ILLEGAL)
def test_illegal_names_are_refused_with_kafkas_error_everywhere(name):
    with pytest.raises(KafkaError) as e:
        topics.validate_name(name)
    assert e.value.code == ErrorCode.invalid_topic_exception
    with pytest.raises(ValidationError, match="Topic name"):
        CreateTopic(topic_name=name)
    if name:  # the operator falls back to the resource's name for an empty spec.topicName
        with pytest.raises(SpecError, match="is invalid"):
            topic_name("resource", {"topicName": name})


@pytest.mark.parametrize("name", LEGAL)
def test_legal_names_pass_everywhere(name):
    topics.validate_name(name)
    assert CreateTopic(topic_name=name).topic_name == name
    if topics.is_internal(name):   # a legal name, but not one an OdradekTopic may manage
        with pytest.raises(SpecError, match="internal"):
            topic_name("resource", {"topicName": name})
    else:
        assert topic_name("resource", {"topicName": name}) == name


def test_internal_topics_are_kafkas_two_not_every_double_underscore():
    assert topics.INTERNAL_TOPICS == {"__consumer_offsets", "__transaction_state"}
    assert topics.is_internal("__consumer_offsets")
    assert not topics.is_internal("__mine")


def test_collision_between_dot_and_underscore():
    assert topics.colliding_topic("a.b", ["a_b", "c"]) == "a_b"
    assert topics.colliding_topic("a.b", ["a.b", "c"]) is None
