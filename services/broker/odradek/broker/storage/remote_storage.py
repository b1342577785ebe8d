"""RemoteStorageManager: rolled segments in an S3-compatible object store (Kafka's KIP-405 plugin interface).

Object layout, under an optional ``prefix``, one object per file of a segment (the names of
Kafka's remote storage plugins: topic-topicId / partition / startOffset-segmentUuid)::

    <topic>-<topicId>/<partition>/<start offset, 20 digits>-<segment uuid>.log
                                                                 .index / .timeindex / .txnindex
                                                                 .snapshot / .leader-epoch-checkpoint
                                                                 .manifest

The ``.manifest`` (JSON) is written last: a segment whose manifest is absent does not exist for
reads (a copy interrupted by a crash or an outage leaves no visible half segment), and deletion
removes it first. It records the segment's metadata and, for each object, its size and one
CRC-32C per ``chunk_bytes`` chunk; the manifest's own CRC-32C is in its object metadata. Every
read verifies: a ranged read fetches the chunks covering the range and checks each, so a
corrupt object raises ``CorruptRemoteObject`` and its bytes are never returned.

boto3 is blocking: the remote log manager calls this from worker threads (as Kafka's
RemoteLogManager does from its thread pools), never from the event loop. boto3's clients are
thread-safe; the manifest cache takes a lock.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

import botocore.exceptions
import crc32c

from .remote_metadata import (CorruptRemoteObject, IndexType, LogSegmentData, RemoteLogSegmentId,
                              RemoteLogSegmentMetadata, RemoteResourceNotFoundException, RemoteStorageException,
                              RemoteStorageUnavailable)

__all__ = ["RemoteStorageConfig", "RemoteStorageManager", "object_key"]

MANIFEST = "manifest"
LOG = "log"
MANIFEST_VERSION = 1
CRC_META = "crc32c"           # user metadata of the manifest object: x-amz-meta-crc32c
_NOT_FOUND = {"NoSuchKey", "404", "NotFound"}
# ranges come from the sizes the manifest recorded: a range the object no longer has means it shrank
_SHRUNK = {"InvalidRange", "416"}
_UNAVAILABLE = {"500", "502", "503", "504", "InternalError", "ServiceUnavailable", "SlowDown", "RequestTimeout"}


@dataclass(frozen=True)
class RemoteStorageConfig:
    endpoint_url: str | None      # None: AWS S3 of ``region``
    bucket: str
    access_key: str | None        # None: boto3's default credential chain
    secret_key: str | None
    region: str = "us-east-1"
    prefix: str = ""
    chunk_bytes: int = 1 << 20    # the unit of checksums and of ranged reads
    max_attempts: int = 3         # botocore's standard retry mode, per request
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0
    manifest_cache_entries: int = 1024


def object_key(prefix: str, segment: RemoteLogSegmentMetadata, suffix: str) -> str:
    sid = segment.segment_id
    return f"{prefix}{sid.topic}-{sid.topic_id}/{sid.partition}/{segment.start_offset:020d}-{sid.id}.{suffix}"


class RemoteStorageManager:
    """copy_log_segment_data / fetch_log_segment / fetch_index / delete_log_segment_data."""

    def __init__(self, config: RemoteStorageConfig, client=None) -> None:
        self.config = config
        self._s3 = client or _client(config)
        self._manifests: OrderedDict[RemoteLogSegmentId, dict] = OrderedDict()
        self._lock = threading.Lock()

    # -- Kafka's interface ---------------------------------------------------------------------

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData) -> None:
        """Upload every file, then the manifest. On failure, removes what it uploaded (best
        effort) and raises: the segment stays invisible and the caller retries with a new id."""
        objects: dict[str, dict] = {}
        try:
            for suffix, source in _sources(data):
                objects[suffix] = self._put_file(object_key(self.config.prefix, metadata, suffix), source)
            manifest = {"version": MANIFEST_VERSION, "chunk_bytes": self.config.chunk_bytes,
                        "metadata": _metadata_json(metadata), "objects": objects}
            body = json.dumps(manifest, sort_keys=True).encode()
            self._call("put_object", Key=self._key(metadata, MANIFEST), Body=body,
                       Metadata={CRC_META: str(crc32c.crc32c(body))})
        except BaseException:
            self._delete_quietly(metadata, list(objects))
            raise

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> bytes:
        """The ``.log`` bytes from ``start_position`` to ``end_position`` (inclusive, as Kafka's;
        default: the end), verified."""
        manifest = self._manifest(metadata)
        entry = manifest["objects"][LOG]
        last = entry["size"] - 1 if end_position is None else min(end_position, entry["size"] - 1)
        if start_position < 0 or start_position > last + 1:
            raise RemoteStorageException(f"start position {start_position} outside the segment "
                                         f"({entry['size']} bytes) of {metadata.segment_id}")
        if start_position > last:
            return b""
        return self._read_verified(metadata, LOG, manifest["chunk_bytes"], entry, start_position, last)

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index: IndexType) -> bytes:
        """A whole auxiliary object, verified; ``RemoteResourceNotFoundException`` if the segment
        has none of that type (a transaction index exists only where a transaction aborted)."""
        manifest = self._manifest(metadata)
        entry = manifest["objects"].get(index.suffix)
        if entry is None:
            raise RemoteResourceNotFoundException(f"no {index.name} index for {metadata.segment_id}")
        if entry["size"] == 0:
            return b""
        return self._read_verified(metadata, index.suffix, manifest["chunk_bytes"], entry, 0, entry["size"] - 1)

    def list_log_segments(self, topic_id: str, topic: str, partition: int) -> list[RemoteLogSegmentMetadata]:
        """Every visible segment of a partition (those whose manifest is there), by start offset:
        the store's own record of what it holds, which the remote log manager reads as its
        metadata (docs/tiered-storage.md, Remote metadata)."""
        prefix = f"{self.config.prefix}{topic}-{topic_id}/{partition}/"
        found = []
        for key in self._keys(prefix):
            if not key.endswith("." + MANIFEST):
                continue
            sid = RemoteLogSegmentId(topic_id, topic, partition, key[len(prefix):].split("-", 1)[1][:-len(MANIFEST) - 1])
            try:
                found.append(_metadata_of(self._read_manifest(sid, key)["metadata"]))
            except RemoteResourceNotFoundException:
                continue   # deleted since the listing
        return sorted(found, key=lambda m: (m.start_offset, m.end_offset))

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Manifest first (the segment disappears at once), then the objects; idempotent."""
        suffixes = [LOG, *(t.suffix for t in IndexType)]
        self._call("delete_object", Key=self._key(metadata, MANIFEST))
        with self._lock:
            self._manifests.pop(metadata.segment_id, None)
        for suffix in suffixes:
            self._call("delete_object", Key=self._key(metadata, suffix))

    # -- objects -------------------------------------------------------------------------------

    def _key(self, metadata: RemoteLogSegmentMetadata, suffix: str) -> str:
        return object_key(self.config.prefix, metadata, suffix)

    def _put_file(self, key: str, source: Path | bytes) -> dict:
        """Checksums of the content, then the upload; the manifest entry."""
        if isinstance(source, bytes):
            crcs = [crc32c.crc32c(c) for c in _chunks_of(source, self.config.chunk_bytes)]
            self._call("put_object", Key=key, Body=source)
            return {"size": len(source), "crc32c": crcs}
        with open(source, "rb") as f:
            crcs = [crc32c.crc32c(c) for c in _read_chunks(f, self.config.chunk_bytes)]
            size = f.tell()
            f.seek(0)
            self._call("put_object", Key=key, Body=f, ContentLength=size)
        return {"size": size, "crc32c": crcs}

    def _read_verified(self, metadata: RemoteLogSegmentMetadata, suffix: str, chunk: int, entry: dict,
                       first: int, last: int) -> bytes:
        """Bytes ``first..last`` of an object, after checking the CRC of every chunk they touch."""
        c0, c1 = first // chunk, last // chunk
        lo, hi = c0 * chunk, min((c1 + 1) * chunk, entry["size"]) - 1
        key = self._key(metadata, suffix)
        body = self._call("get_object", Key=key, Range=f"bytes={lo}-{hi}")["Body"].read()
        if len(body) != hi - lo + 1:
            raise CorruptRemoteObject(f"{key}: {len(body)} bytes where {hi - lo + 1} were stored")
        for i, piece in enumerate(_chunks_of(body, chunk)):
            if crc32c.crc32c(piece) != entry["crc32c"][c0 + i]:
                raise CorruptRemoteObject(f"{key}: chunk {c0 + i} ({chunk} bytes) does not match its CRC-32C")
        return body[first - lo:last - lo + 1]

    def _keys(self, prefix: str) -> Iterator[str]:
        token: dict = {}
        while True:
            reply = self._call("list_objects_v2", Prefix=prefix, **token)
            yield from (o["Key"] for o in reply.get("Contents", []))
            if not reply.get("IsTruncated"):
                return
            token = {"ContinuationToken": reply["NextContinuationToken"]}

    def _manifest(self, metadata: RemoteLogSegmentMetadata) -> dict:
        return self._read_manifest(metadata.segment_id, self._key(metadata, MANIFEST))

    def _read_manifest(self, segment_id: RemoteLogSegmentId, key: str) -> dict:
        with self._lock:
            cached = self._manifests.get(segment_id)
            if cached is not None:
                self._manifests.move_to_end(segment_id)
                return cached
        reply = self._call("get_object", Key=key)
        body = reply["Body"].read()
        if str(crc32c.crc32c(body)) != reply.get("Metadata", {}).get(CRC_META):
            raise CorruptRemoteObject(f"{key}: the manifest does not match its CRC-32C")
        manifest = json.loads(body)
        if manifest.get("version") != MANIFEST_VERSION:
            raise RemoteStorageException(f"{key}: manifest version {manifest.get('version')} is not supported")
        with self._lock:
            self._manifests[segment_id] = manifest
            while len(self._manifests) > self.config.manifest_cache_entries:
                self._manifests.popitem(last=False)
        return manifest

    def _delete_quietly(self, metadata: RemoteLogSegmentMetadata, suffixes: list[str]) -> None:
        for suffix in suffixes:
            try:
                self._call("delete_object", Key=self._key(metadata, suffix))
            except RemoteStorageException:
                pass   # invisible without its manifest; remote retention removes leftovers

    def _call(self, operation: str, **kwargs):
        """One S3 request, its failures mapped to the remote storage errors (the one place that does)."""
        try:
            return getattr(self._s3, operation)(Bucket=self.config.bucket, **kwargs)
        except botocore.exceptions.ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            status = str(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
            what = f"{operation} {kwargs.get('Key', '')}: {code or status}"
            if code in _NOT_FOUND or status == "404":
                raise RemoteResourceNotFoundException(what) from e
            if code in _SHRUNK or status in _SHRUNK:
                raise CorruptRemoteObject(f"{what}: the object is shorter than when it was copied") from e
            if code in _UNAVAILABLE or status in _UNAVAILABLE:
                raise RemoteStorageUnavailable(what) from e
            raise RemoteStorageException(f"{what}: {e}") from e
        except (botocore.exceptions.ConnectionError, botocore.exceptions.HTTPClientError) as e:
            raise RemoteStorageUnavailable(f"{operation} {kwargs.get('Key', '')}: object store "
                                           f"{self.config.endpoint_url} unreachable: {e}") from e


def _client(config: RemoteStorageConfig):
    # imported here: boto3 is ~0.8 s of CPU at import, and most brokers never store remotely
    import boto3
    import botocore.config
    return boto3.session.Session().client(
        "s3", endpoint_url=config.endpoint_url, region_name=config.region,
        aws_access_key_id=config.access_key, aws_secret_access_key=config.secret_key,
        config=botocore.config.Config(
            s3={"addressing_style": "path"},   # S3-compatible servers serve buckets as paths
            retries={"mode": "standard", "max_attempts": config.max_attempts},
            connect_timeout=config.connect_timeout_s, read_timeout=config.read_timeout_s,
            # our own CRC-32C per chunk covers integrity; not every S3 server takes the SDK's trailers
            request_checksum_calculation="when_required", response_checksum_validation="when_required"))


def _sources(data: LogSegmentData) -> Iterator[tuple[str, Path | bytes]]:
    yield LOG, data.log_segment
    yield IndexType.OFFSET.suffix, data.offset_index
    yield IndexType.TIMESTAMP.suffix, data.time_index
    if data.transaction_index is not None:
        yield IndexType.TRANSACTION.suffix, data.transaction_index
    yield IndexType.PRODUCER_SNAPSHOT.suffix, data.producer_snapshot_index
    yield IndexType.LEADER_EPOCH.suffix, data.leader_epoch_index


def _metadata_json(metadata: RemoteLogSegmentMetadata) -> dict:
    d = asdict(metadata)
    d["segment_leader_epochs"] = {str(k): v for k, v in metadata.segment_leader_epochs.items()}
    return d


def _metadata_of(d: dict) -> RemoteLogSegmentMetadata:
    fields = dict(d, segment_id=RemoteLogSegmentId(**d["segment_id"]),
                  segment_leader_epochs={int(k): v for k, v in d["segment_leader_epochs"].items()})
    return RemoteLogSegmentMetadata(**fields)


def _chunks_of(data: bytes, size: int) -> Iterator[bytes]:
    view = memoryview(data)
    for i in range(0, len(data), size):
        yield view[i:i + size]


def _read_chunks(f: BinaryIO, size: int) -> Iterator[bytes]:
    while piece := f.read(size):
        yield piece
