"""Request bodies of every route, as Pydantic models: REST Proxy v2 produce and consumer
instances, Odradek's NDJSON streaming produce, v3 topic administration and group offset reset. Validation lives
here; the routes get validated objects."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator

from odradek.topics import MAX_NAME_LENGTH, name_problem


# -- v2 produce ---------------------------------------------------------------------------------------
class V2Record(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: Any = None
    value: Any = None
    partition: int | None = Field(None, ge=0)


class V2ProduceRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    records: list[V2Record]
    key_schema: str | None = None
    key_schema_id: int | None = None
    value_schema: str | None = None
    value_schema_id: int | None = None


class V2BinaryRecord(V2Record):
    # base64 decoded by pydantic-core while it validates (a Python call per value cost more)
    model_config = ConfigDict(extra="forbid", val_json_bytes="base64")
    key: bytes | None = None
    value: bytes | None = None


class V2BinaryProduceRequest(V2ProduceRequest):
    records: list[V2BinaryRecord]


# -- v3 produce records (Confluent's ProduceRequest) ---------------------------------------------------
class ProduceData(BaseModel):
    """A key or value: its ``type`` (omitted: the subject's schema), the schema to write it with
    (by id, by version of ``subject``, or its text), and its ``data``."""
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    type: str | None = Field(None, pattern="^(BINARY|JSON|STRING|AVRO|JSONSCHEMA|PROTOBUF)$")
    data: Any = None
    subject: str | None = None
    subject_name_strategy: str | None = Field(None, pattern="^(TOPIC_NAME)$")   # the only one Odradek has
    schema_id: int | None = Field(None, ge=0)
    schema_version: int | None = Field(None, ge=-1)
    raw_schema: str | None = Field(None, alias="schema")

    @property
    def names_a_schema(self) -> bool:
        return self.schema_id is not None or self.schema_version is not None or self.raw_schema is not None


class ProduceHeader(BaseModel):
    model_config = ConfigDict(val_json_bytes="base64")
    name: str
    value: bytes | None = None


class ProduceRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")
    partition_id: int | None = Field(None, ge=0)
    headers: list[ProduceHeader] = []
    key: ProduceData | None = None
    value: ProduceData | None = None
    timestamp: datetime | None = None


# -- streaming produce (NDJSON) -----------------------------------------------------------------------
class StreamHeader(BaseModel):
    model_config = ConfigDict(val_json_bytes="base64")   # each model has its own config
    key: str | None = None
    value: bytes | None = None


class StreamRecord(BaseModel):
    # bytes fields are base64 in JSON: pydantic-core decodes them in Rust while it validates
    model_config = ConfigDict(extra="forbid", val_json_bytes="base64")
    value: bytes | None = None
    key: bytes | None = None
    partition: int | None = Field(None, ge=0)
    headers: list[StreamHeader] | None = None
    timestamp: int | None = None


STREAM_RECORDS = TypeAdapter(list[StreamRecord])


# -- v2 consumer instances ----------------------------------------------------------------------------
class CreateConsumer(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    name: str | None = Field(None, pattern=r"^[a-zA-Z0-9._-]{1,200}$")
    format: str = Field("binary", pattern="^(binary|json|avro|jsonschema|protobuf)$")
    auto_offset_reset: str = Field("latest", alias="auto.offset.reset", pattern="^(earliest|latest|none)$")
    auto_commit_enable: str = Field("true", alias="auto.commit.enable", pattern="^(true|false)$")
    fetch_min_bytes: int | None = Field(None, alias="fetch.min.bytes", ge=-1)
    isolation_level: str = Field("read_uncommitted", alias="isolation.level",
                                 pattern="^(read_uncommitted|read_committed)$")
    request_timeout_ms: int | None = Field(None, alias="consumer.request.timeout.ms", ge=0)


class Subscription(BaseModel):
    model_config = ConfigDict(extra="forbid")
    topics: list[str] | None = None
    topic_pattern: str | None = None


class PartitionRef(BaseModel):
    topic: str
    partition: int = Field(ge=0)


class Partitions(BaseModel):
    partitions: list[PartitionRef]


class OffsetRef(PartitionRef):
    offset: int = Field(ge=0)
    metadata: str | None = None


class Offsets(BaseModel):
    offsets: list[OffsetRef] = []


INT16_MAX, INT32_MAX = (1 << 15) - 1, (1 << 31) - 1


# -- v3 topic administration --------------------------------------------------------------------------
class ConfigItem(BaseModel):
    name: str
    value: str | None = None


class CreateTopic(BaseModel):
    model_config = ConfigDict(extra="forbid")
    topic_name: str
    partitions_count: int | None = Field(None, ge=1, le=INT32_MAX)
    replication_factor: int | None = Field(None, ge=1, le=INT16_MAX)   # Kafka's fields: int32, int16
    configs: list[ConfigItem] = []

    @field_validator("topic_name")
    @classmethod
    def _legal_name(cls, name: str) -> str:
        problem = name_problem(name)
        if problem is not None:
            raise ValueError(problem)
        return name


class AlterConfig(BaseModel):
    name: str
    value: str | None = None
    operation: str = Field("SET", pattern="^(SET|DELETE|set|delete)$")


class AlterConfigs(BaseModel):
    data: list[AlterConfig]


class PatchTopic(BaseModel):
    model_config = ConfigDict(extra="forbid")
    partitions_count: int = Field(ge=1, le=INT32_MAX)


# -- v3 consumer groups (Odradek's offset reset) ------------------------------------------------------
class ResetOffsets(BaseModel):
    """Where a group's committed offsets of one topic (or one partition of it) go: Kafka's
    ``kafka-consumer-groups --reset-offsets`` targets."""
    model_config = ConfigDict(extra="forbid")
    topic_name: str = Field(min_length=1, max_length=MAX_NAME_LENGTH)
    partition_id: int | None = Field(None, ge=0)
    to: str = Field(pattern="^(earliest|latest|offset|timestamp)$")
    offset: int | None = Field(None, ge=0)
    timestamp: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _target_given(self) -> "ResetOffsets":
        if self.to in ("offset", "timestamp") and getattr(self, self.to) is None:
            raise ValueError(f"to={self.to} needs {self.to!r}")
        return self
