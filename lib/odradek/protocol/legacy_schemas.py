"""Request and response schemas of API versions Apache Kafka 3.9 still serves but kio (which
follows Kafka 4, KIP-896) no longer ships: WriteTxnMarkers v0, the non-flexible form of v1
(brokers before Kafka 2.8 send it). The same fields as kio's v1 classes; ``codec`` looks here
before kio for ``(api key, version)`` in ``MODULES``.
"""

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader
from kio.schema.types import ProducerId, TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32


class _Request:
    """What kio reads off a WriteTxnMarkers v0 request entity's class."""
    __slots__ = ()
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(27)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader


class _Response(_Request):
    __slots__ = ()
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader



@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarkerTopic(_Request):
    __type__: ClassVar = EntityType.nested
    name: TopicName = field(metadata={"kafka_type": "string"})
    partition_indexes: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarker(_Request):
    __type__: ClassVar = EntityType.nested
    producer_id: ProducerId = field(metadata={"kafka_type": "int64"})
    producer_epoch: i16 = field(metadata={"kafka_type": "int16"})
    transaction_result: bool = field(metadata={"kafka_type": "bool"})
    topics: tuple[WritableTxnMarkerTopic, ...]
    coordinator_epoch: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteTxnMarkersRequest(_Request):
    __type__: ClassVar = EntityType.request
    markers: tuple[WritableTxnMarker, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarkerPartitionResult(_Response):
    __type__: ClassVar = EntityType.nested
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarkerTopicResult(_Response):
    __type__: ClassVar = EntityType.nested
    name: TopicName = field(metadata={"kafka_type": "string"})
    partitions: tuple[WritableTxnMarkerPartitionResult, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class WritableTxnMarkerResult(_Response):
    __type__: ClassVar = EntityType.nested
    producer_id: ProducerId = field(metadata={"kafka_type": "int64"})
    topics: tuple[WritableTxnMarkerTopicResult, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteTxnMarkersResponse(_Response):
    __type__: ClassVar = EntityType.response
    markers: tuple[WritableTxnMarkerResult, ...]


_WRITE_TXN_MARKERS_V0 = SimpleNamespace(
    WriteTxnMarkersRequest=WriteTxnMarkersRequest, WritableTxnMarker=WritableTxnMarker,
    WritableTxnMarkerTopic=WritableTxnMarkerTopic, WriteTxnMarkersResponse=WriteTxnMarkersResponse,
    WritableTxnMarkerResult=WritableTxnMarkerResult, WritableTxnMarkerTopicResult=WritableTxnMarkerTopicResult,
    WritableTxnMarkerPartitionResult=WritableTxnMarkerPartitionResult)

# (api key, version) -> (the request class, the response class, the module-like namespace of both)
MODULES = {(27, 0): (WriteTxnMarkersRequest, WriteTxnMarkersResponse, _WRITE_TXN_MARKERS_V0)}
