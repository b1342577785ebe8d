"""RemoteStorageManager against a real S3-compatible server (S3Proxy, filesystem backend): a
segment set written by the broker's log code goes up and comes back equal, by range and by
index; deletion; corruption on the server's disk is detected; an outage is a clear retriable
error and a restart of the server serves the same objects."""

from __future__ import annotations

import pytest

from odradek.broker.storage.remote_metadata import (CorruptRemoteObject, IndexType, RemoteResourceNotFoundException,
                                                    RemoteStorageUnavailable)
from odradek.broker.storage.remote_storage import RemoteStorageManager, object_key
from odradek.records import iter_batches
from tests.tiered.conftest import rsm_config
from tests.tiered.segments import write_rolled_segment


@pytest.fixture(scope="module")
def rolled(tmp_path_factory):
    r = write_rolled_segment(tmp_path_factory.mktemp("log") / "t-0")
    yield r
    r.log.close()


def _offsets(data: bytes) -> list[int]:
    return [b.base_offset for b in iter_batches(memoryview(bytearray(data)))]


def test_a_rolled_segment_set_comes_back_equal(rsm, rolled):
    meta = rolled.metadata()
    rsm.copy_log_segment_data(meta, rolled.data)
    local = rolled.data.log_segment.read_bytes()
    assert len(local) > 10 * rsm.config.chunk_bytes, "the ranges below must cross several checksum chunks"
    assert rsm.fetch_log_segment(meta, 0) == local
    for first, last in [(0, 0), (4095, 4096), (5000, 23456), (len(local) - 7, len(local) - 1), (100, None)]:
        assert rsm.fetch_log_segment(meta, first, last) == local[first:None if last is None else last + 1]
    # from an offset index entry's position (the batch ending at its offset) on: whole batches,
    # as a fetch from remote will serve them
    entry = rolled.segment.offset_index.lookup(meta.start_offset + 500)
    first, second = _offsets(rsm.fetch_log_segment(meta, entry.position))[:2]
    assert first <= entry.offset < second
    files = {IndexType.OFFSET: rolled.data.offset_index, IndexType.TIMESTAMP: rolled.data.time_index,
             IndexType.TRANSACTION: rolled.data.transaction_index,
             IndexType.PRODUCER_SNAPSHOT: rolled.data.producer_snapshot_index}
    for kind, path in files.items():
        assert path.stat().st_size > 0, kind
        assert rsm.fetch_index(meta, kind) == path.read_bytes(), kind
    assert rsm.fetch_index(meta, IndexType.LEADER_EPOCH) == rolled.data.leader_epoch_index
    assert len(meta.segment_leader_epochs) == 4


def test_objects_are_keyed_by_topic_id_partition_and_segment_uuid(rsm, rolled, s3proxy):
    meta = rolled.metadata()
    rsm.copy_log_segment_data(meta, rolled.data)
    key = object_key("", meta, "log")
    assert key == f"t-{meta.segment_id.topic_id}/0/{0:020d}-{meta.segment_id.id}.log"
    assert s3proxy.object_path(key).read_bytes() == rolled.data.log_segment.read_bytes()


def test_a_segment_without_its_manifest_is_invisible(rsm, rolled, s3proxy):
    meta = rolled.metadata()
    rsm._put_file(object_key("", meta, "log"), rolled.data.log_segment)   # a copy cut before its manifest
    with pytest.raises(RemoteResourceNotFoundException):
        rsm.fetch_log_segment(meta, 0)


def test_a_failed_copy_leaves_nothing_behind(s3proxy, rolled):
    class ManifestRefused(Exception):
        pass

    rsm = RemoteStorageManager(rsm_config(s3proxy))
    put = rsm._s3.put_object

    def put_object(**kwargs):
        if kwargs["Key"].endswith(".manifest"):
            raise ManifestRefused()
        return put(**kwargs)
    rsm._s3.put_object = put_object
    meta = rolled.metadata()
    with pytest.raises(ManifestRefused):
        rsm.copy_log_segment_data(meta, rolled.data)
    with pytest.raises(RemoteResourceNotFoundException):
        rsm.fetch_log_segment(meta, 0)
    partition_dir = s3proxy.object_path(object_key("", meta, "log")).parent
    assert not [p for p in partition_dir.iterdir() if meta.segment_id.id in p.name]


def test_delete_removes_every_object_and_is_idempotent(rsm, rolled, s3proxy):
    meta = rolled.metadata()
    rsm.copy_log_segment_data(meta, rolled.data)
    rsm.delete_log_segment_data(meta)
    with pytest.raises(RemoteResourceNotFoundException):
        rsm.fetch_log_segment(meta, 0)
    with pytest.raises(RemoteResourceNotFoundException):
        RemoteStorageManager(rsm.config).fetch_index(meta, IndexType.OFFSET)
    partition_dir = s3proxy.object_path(object_key("", meta, "log")).parent
    assert not [p for p in partition_dir.iterdir() if meta.segment_id.id in p.name]
    rsm.delete_log_segment_data(meta)


def test_a_corrupt_object_raises_and_its_bytes_are_never_returned(rsm, rolled, s3proxy):
    meta = rolled.metadata()
    rsm.copy_log_segment_data(meta, rolled.data)
    chunk = rsm.config.chunk_bytes
    path = s3proxy.object_path(object_key("", meta, "log"))
    data = bytearray(path.read_bytes())
    data[3 * chunk + 10] ^= 0xFF
    path.write_bytes(data)
    with pytest.raises(CorruptRemoteObject, match="chunk 3"):
        rsm.fetch_log_segment(meta, 0)
    with pytest.raises(CorruptRemoteObject):
        rsm.fetch_log_segment(meta, 3 * chunk + 5, 3 * chunk + 20)
    # the other chunks are intact and still served
    assert rsm.fetch_log_segment(meta, 0, chunk - 1) == rolled.data.log_segment.read_bytes()[:chunk]
    path.write_bytes(data[:chunk])     # shrunk below the range asked for
    with pytest.raises(CorruptRemoteObject, match="shorter"):
        rsm.fetch_log_segment(meta, 5 * chunk, 5 * chunk + 10)
    index = s3proxy.object_path(object_key("", meta, "index"))
    index.write_bytes(index.read_bytes()[:-4])     # truncated
    with pytest.raises(CorruptRemoteObject):
        rsm.fetch_index(meta, IndexType.OFFSET)
    manifest = s3proxy.object_path(object_key("", meta, "manifest"))
    manifest.write_bytes(manifest.read_bytes().replace(b'"size": ', b'"size":  '))
    with pytest.raises(CorruptRemoteObject, match="manifest"):
        RemoteStorageManager(rsm.config).fetch_log_segment(meta, 0)


def test_an_outage_is_a_clear_retriable_error_and_a_restart_serves_the_same_objects(rsm, rolled, s3proxy):
    meta = rolled.metadata()
    rsm.copy_log_segment_data(meta, rolled.data)
    s3proxy.stop()
    try:
        cold = RemoteStorageManager(rsm.config)    # no cached manifest: every call goes to the server
        for call in (lambda: cold.fetch_log_segment(meta, 0), lambda: cold.copy_log_segment_data(rolled.metadata(), rolled.data),
                     lambda: cold.delete_log_segment_data(meta)):
            with pytest.raises(RemoteStorageUnavailable, match=f"{s3proxy.endpoint} unreachable") as e:
                call()
            assert e.value.retriable
    finally:
        s3proxy.start()    # same port and directory: the clients keep working
    assert rsm.fetch_log_segment(meta, 0) == rolled.data.log_segment.read_bytes()
    again = rolled.metadata()
    rsm.copy_log_segment_data(again, rolled.data)
    assert rsm.fetch_index(again, IndexType.TIMESTAMP) == rolled.data.time_index.read_bytes()


def test_what_the_operator_renders_opens_the_store(s3proxy, rolled, tmp_path):
    """spec.tieredStorage as the operator renders it (docs/tiered-storage.md, On Kubernetes): the
    broker keys and the credentials file made from a user's Secret, read by the broker's own
    config and remote log manager, sign requests S3Proxy accepts; another secret key is refused."""
    import base64

    from odradek.broker.config import BrokerConfig
    from odradek.broker.storage.remote_log_manager import storage_config
    from odradek.broker.storage.remote_metadata import RemoteStorageException
    from odradek.config import bound_values, parse_broker_settings
    from odradek.operator import tiered_storage
    from odradek.operator.validation import parse_cluster
    spec = parse_cluster({"tieredStorage": {"endpoint": s3proxy.endpoint, "bucket": s3proxy.bucket,
                                            "prefix": "clusters/c/", "credentialsSecret": {"name": "keys"}}})

    def store(secret_key: str) -> RemoteStorageManager:
        user = {"data": {k: base64.b64encode(v.encode()).decode() for k, v in (
            ("AWS_ACCESS_KEY_ID", s3proxy.access_key), ("AWS_SECRET_ACCESS_KEY", secret_key))}}
        (secret,) = tiered_storage.credentials_secret("c", "ns", spec, user, {})
        mounted = tmp_path / secret_key   # where the pod mounts it: tiered_storage.CREDENTIALS_FILE
        mounted.write_bytes(base64.b64decode(secret["data"][tiered_storage.SECRET_KEY]))
        settings = {**tiered_storage.broker_settings(spec.tiered_storage), tiered_storage.CREDENTIALS: str(mounted)}
        config = BrokerConfig(broker_id=0, data_dir=tmp_path, zookeeper="zk:2181",
                              **bound_values(BrokerConfig, parse_broker_settings(settings).broker))
        return RemoteStorageManager(storage_config(config))

    meta = rolled.metadata()
    rsm = store(s3proxy.secret_key)
    rsm.copy_log_segment_data(meta, rolled.data)
    assert rsm.fetch_log_segment(meta, 0) == rolled.data.log_segment.read_bytes()
    assert s3proxy.object_path(object_key("clusters/c/", meta, "log")).exists()
    with pytest.raises(RemoteStorageException, match="SignatureDoesNotMatch|AccessDenied|403") as e:
        store("not-the-key").fetch_log_segment(meta, 0)
    assert type(e.value) is RemoteStorageException   # refused, not missing
