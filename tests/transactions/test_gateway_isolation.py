"""Gateway consumer instances may ask for read_committed (Confluent REST's ``isolation.level``):
it reaches librdkafka's consumer configuration; anything else is refused."""

import pytest
from pydantic import ValidationError

from odradek.gateway.instances import _consumer_config
from odradek.gateway.models import CreateConsumer


def test_isolation_level_reaches_the_consumer():
    committed = CreateConsumer.model_validate({"isolation.level": "read_committed"})
    assert _consumer_config("g", committed)["isolation.level"] == "read_committed"
    assert _consumer_config("g", CreateConsumer.model_validate({}))["isolation.level"] == "read_uncommitted"
    with pytest.raises(ValidationError):
        CreateConsumer.model_validate({"isolation.level": "serializable"})
