"""Kafka's client quota keys (``QuotaConfigs``): per user, client id or (user, client id), and per IP.

They live in ZooKeeper under ``/config/users``, ``/config/clients`` and ``/config/ips`` (set with
AlterClientQuotas, ``kafka-configs --entity-type users|clients|ips`` or an OdradekUser's
``quotas``), never on the command line: an absent key means no quota. The registry here is
what the broker enforces, what DescribeClientQuotas reports each key's type as, what the
controller accepts for a user and what the operator maps its spec fields to.
"""

from __future__ import annotations

from odradek.config.keys import INT_MAX, LONG_MAX, ConfigKey, POSITIVE, integer, registry

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

USER_CLIENT_QUOTAS: dict[str, ConfigKey] = registry(
    ConfigKey(PRODUCER_BYTE_RATE, integer(1, LONG_MAX), str(LONG_MAX),
              "bytes/s a user or client id may produce on one broker (throttled above)"),
    ConfigKey(CONSUMER_BYTE_RATE, integer(1, LONG_MAX), str(LONG_MAX),
              "bytes/s a user or client id may fetch from one broker (throttled above)"),
    ConfigKey(REQUEST_PERCENTAGE, POSITIVE, str(float(INT_MAX)),
              "percentage of one I/O thread's time a user or client id may use per quota window"),
    ConfigKey(CONTROLLER_MUTATION_RATE, POSITIVE, str(float(INT_MAX)),
              "partitions/s a user or client id may create or delete (THROTTLING_QUOTA_EXCEEDED above)"),
)
IP_QUOTAS: dict[str, ConfigKey] = registry(
    ConfigKey(CONNECTION_CREATION_RATE, integer(1, INT_MAX), str(INT_MAX),
              "connections/s an IP address may open to one broker (refused above)"),
)
QUOTA_CONFIGS: dict[str, ConfigKey] = {**USER_CLIENT_QUOTAS, **IP_QUOTAS}
