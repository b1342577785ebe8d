"""The gateway's domain errors: what went wrong, in the gateway's own terms, never as HTTP.

Every layer below the routes (``kafka``, ``admin``, ``instances``, ``topics``, ``auth``,
``formats``) raises these; ``edge`` alone turns them into an HTTP status and Confluent's error
code (one table there), so a meaning has one code and a code one meaning. Each class's
constructor words its message; the message is what the client reads.
"""

from __future__ import annotations

import re


class GatewayError(Exception):
    """Something the client is told about; ``message`` is the answer's text."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


# -- what the request names does not exist ---------------------------------------------------------
class NotFound(GatewayError):
    pass


class TopicNotFound(NotFound):
    def __init__(self, topic: str):
        super().__init__(f"Topic {topic} not found.")
        self.topic = topic


class PartitionNotFound(NotFound):
    def __init__(self, topic: str, partition: int, where: str = ""):
        super().__init__(f"{where}Partition {partition} of topic {topic} not found.")
        self.topic, self.partition = topic, partition


class ConsumerInstanceNotFound(NotFound):
    def __init__(self, group: str, name: str, owner: str | None = None):
        super().__init__("Consumer instance not found." if owner is None else
                         f"Consumer instance {name} lives in another gateway replica ({owner}); "
                         "send its requests to the base_uri it was created with.")
        self.group, self.name, self.owner = group, name, owner


class BrokerNotFound(NotFound):
    def __init__(self, broker_id: int, message: str = ""):
        super().__init__(message or f"Broker {broker_id} not found.")


class GroupNotFound(NotFound):
    def __init__(self, group: str, what: str = ""):
        super().__init__(f"{what or f'Consumer group {group}'} could not be found.")


class ClusterNotFound(NotFound):
    def __init__(self, cluster_id: str):
        super().__init__(f"Cluster {cluster_id} not found.")


# -- the request conflicts with the state it meets -------------------------------------------------
class ConsumerAlreadyExists(GatewayError):
    def __init__(self, group: str, name: str):
        super().__init__(f"Consumer with specified consumer ID {name} already exists in group {group}.")


class IllegalState(GatewayError):
    """A consumer instance asked to subscribe while assigned, or the other way round."""

    def __init__(self, message: str = "Subscription to topics, partitions and pattern are mutually exclusive."):
        super().__init__(message)


class GroupNotEmpty(GatewayError):
    """A group change Kafka makes only while the group has no members (offset reset, delete)."""


class OffsetOutOfRange(GatewayError):
    def __init__(self, topic: str, partition: int, offset: int, low: int, high: int):
        super().__init__(f"Offset {offset} is out of range [{low}, {high}] of {topic}-{partition}")
        self.log_start_offset = low


# -- the request itself is refused ------------------------------------------------------------------
class InvalidBody(GatewayError):
    """A body (or query) that does not validate."""

    @staticmethod
    def from_pydantic(errors: list, prefix: str = "", skip: tuple = ()) -> "InvalidBody":
        """The first of pydantic's ``errors`` as one message (where, then what); MalformedJson
        when the text was not JSON at all."""
        first = errors[0] if errors else {}
        where = " ".join(filter(None, [prefix, ".".join(str(p) for p in first.get("loc", ()) if p not in skip)]))
        message = first.get("msg", "invalid request")
        kind = MalformedJson if first.get("type") == "json_invalid" else InvalidBody
        return kind(f"{where}: {message}" if where else message)


class MalformedJson(InvalidBody):
    pass


class InvalidConsumerConfig(GatewayError):
    pass


class InvalidSchema(GatewayError):
    """A produce's schema that does not parse, or a schema given to a format that takes none."""

    def __init__(self, message: str):
        super().__init__(f"Invalid schema: {message}")


def _schema_missing(part: str) -> str:
    return (f"Request includes {part}s and uses a format that requires schemas, but does not include the "
            f"{part}_schema or {part}_schema_id fields")


class KeySchemaMissing(GatewayError):
    """Keys in a schema format's produce without ``key_schema`` or ``key_schema_id``."""

    def __init__(self):
        super().__init__(_schema_missing("key"))


class ValueSchemaMissing(GatewayError):
    """Values in a schema format's produce without ``value_schema`` or ``value_schema_id``."""

    def __init__(self):
        super().__init__(_schema_missing("value"))


class RecordConversionFailed(GatewayError):
    """A record's JSON that does not conform to its schema: nothing of the request is written."""

    def __init__(self, message: str):
        super().__init__(f"Conversion of JSON to Object failed: {message}")


class SchemaLookupFailed(GatewayError):
    """The registry refused to register a produce's schema (incompatible, read-only subject) or
    has no schema under the id or version it names."""

    def __init__(self, message: str):
        super().__init__(f"Schema registration or lookup failed: {message}")


class KafkaBadRequest(GatewayError):
    """A request the cluster refused as invalid (Confluent's KAFKA_BAD_REQUEST)."""


class InvalidTopicRequest(KafkaBadRequest):
    """Topic administration the cluster refused as invalid (exists already, bad counts or configs)."""


class RequestTooLarge(GatewayError):
    def __init__(self, length: int, limit: int):
        super().__init__(f"Request body of {length} bytes or more exceeds the gateway's limit of {limit} bytes")


class InvalidRecord(KafkaBadRequest):
    """A record the brokers refused as invalid (Kafka's INVALID_RECORD): through the gateway, whose
    producer writes well-formed batches, a record without a key on a compacted topic."""

    def __init__(self, detail: str):
        super().__init__(f"The brokers refused the record as invalid ({detail}); a topic whose cleanup.policy "
                         "includes compact takes only records with a key.")


class RecordTooLarge(GatewayError):
    """A record above the gateway's ``--max-record-bytes``, or one a broker refused as too large."""

    @classmethod
    def over_limit(cls, where: str, limit: int) -> "RecordTooLarge":
        return cls(f"{where} is larger than the record size limit ({limit} bytes)")


class NotAcceptable(GatewayError):
    """The ``Accept`` header names none of the media types a path answers."""


class UnsupportedMediaType(GatewayError):
    pass


class FormatMismatch(GatewayError):
    """Records asked for in an embedded format other than the consumer instance's."""

    def __init__(self):
        super().__init__("The requested embedded data format does not match the deserializer for this "
                         "consumer instance")


# -- who asks -----------------------------------------------------------------------------------------
class Unauthenticated(GatewayError):
    pass


class Forbidden(GatewayError):
    pass


class KafkaAuthenticationFailure(Unauthenticated):
    """The brokers refused the Kafka credentials an HTTP user is mapped to (SASL)."""


class KafkaAuthorizationFailure(Forbidden):
    """The brokers' ACLs refused the request's Kafka principal (Kafka's *_AUTHORIZATION_FAILED);
    the message is the one Kafka's exception carries, as Confluent's REST Proxy answers it."""


# -- the cluster failed -------------------------------------------------------------------------------
class KafkaFailure(GatewayError):
    """A Kafka error the gateway cannot turn into anything more specific."""

    @staticmethod
    def of(err, topics: str = "", group: str = "") -> GatewayError:
        """From a librdkafka ``KafkaError``: a refusal by the brokers' ACLs or of the SASL
        credentials as such (``topics``, ``group``: what it concerns, named in the message)."""
        code = err.code()
        if code in AUTHORIZATION_FAILED:
            return KafkaAuthorizationFailure(AUTHORIZATION_FAILED[code].format(topics=topics, group=group))
        if code in AUTHENTICATION_FAILED:
            # librdkafka wraps the broker's message: "<broker>: SASL authentication error: <it> (after ..)"
            found = re.search(r"SASL authentication error: (.*?)(?: \(after \d+ms.*)?$", err.str())
            return KafkaAuthenticationFailure(f"Authentication Error: {found.group(1) if found else err.str()}")
        return (RetriableKafkaFailure if err.retriable() else KafkaFailure)(err.str())


class RetriableKafkaFailure(KafkaFailure):
    """A Kafka error the same request may not meet again (a leader moving, a broker restarting)."""


class UndecodableRecord(KafkaFailure):
    """A record read through a json-format consumer that is not JSON, or through a schema format's
    one that is not registry-framed data of that format (a deserialisation error, which Kafka's
    clients report as a non-retriable Kafka error)."""

    def __init__(self, message: str = "a record is not JSON; read it with the binary format"):
        super().__init__(message)


# Kafka's error codes (librdkafka's KafkaError values) and the messages of Kafka's exceptions
AUTHORIZATION_FAILED = {
    29: "Not authorized to access topics: [{topics}]",         # TOPIC_AUTHORIZATION_FAILED
    30: "Not authorized to access group: {group}",            # GROUP_AUTHORIZATION_FAILED
    31: "Cluster authorization failed.",                          # CLUSTER_AUTHORIZATION_FAILED
    53: "Transactional Id authorization failed.",                 # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
}
AUTHENTICATION_FAILED = (58, -169)   # SASL_AUTHENTICATION_FAILED; librdkafka's local _AUTHENTICATION
