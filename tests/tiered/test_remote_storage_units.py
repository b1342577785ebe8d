"""The remote storage manager's pieces that need no server: the value types, the object keys,
the mapping of S3 failures to Kafka's remote storage errors (botocore's Stubber answers as S3
would), and S3Proxy's installation failing loudly."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import botocore.stub
import crc32c
import pytest

from odradek.broker.storage.remote_metadata import (CorruptRemoteObject, RemoteLogSegmentId, RemoteLogSegmentMetadata,
                                                    RemoteResourceNotFoundException, RemoteStorageException,
                                                    RemoteStorageUnavailable, new_uuid)
from odradek.broker.storage.remote_storage import RemoteStorageConfig, RemoteStorageManager, object_key
from odradek.dev import s3proxy

CONFIG = RemoteStorageConfig(endpoint_url="http://127.0.0.1:1", bucket="b", access_key="a", secret_key="s",
                             prefix="cluster-a/", max_attempts=1)
META = RemoteLogSegmentMetadata(RemoteLogSegmentId("TOPICID", "orders", 3, "SEGID"), 1200, 2399, 5, broker_id=1,
                                event_timestamp_ms=0, segment_size_in_bytes=10)


@pytest.fixture
def stubbed():
    rsm = RemoteStorageManager(CONFIG)
    with botocore.stub.Stubber(rsm._s3) as stub:
        yield rsm, stub


def test_keys_follow_kafkas_remote_log_segment_id():
    assert object_key("cluster-a/", META, "log") == f"cluster-a/orders-TOPICID/3/{1200:020d}-SEGID.log"


def test_a_segment_uuid_is_a_kafka_uuid_string():
    ids = {new_uuid() for _ in range(200)}
    assert len(ids) == 200 and all(len(u) == 22 and not u.startswith("-") for u in ids)


def test_metadata_refuses_an_end_below_the_start():
    with pytest.raises(ValueError):
        RemoteLogSegmentMetadata(META.segment_id, 10, 9, 0, 1, 0, 0)


@pytest.mark.parametrize("code,status,error", [
    ("NoSuchKey", 404, RemoteResourceNotFoundException),
    ("SlowDown", 503, RemoteStorageUnavailable),
    ("InternalError", 500, RemoteStorageUnavailable),
    ("AccessDenied", 403, RemoteStorageException),
    ("InvalidRange", 416, CorruptRemoteObject),
])
def test_s3_errors_map_to_the_remote_storage_errors(stubbed, code, status, error):
    rsm, stub = stubbed
    stub.add_client_error("get_object", service_error_code=code, http_status_code=status)
    with pytest.raises(error) as e:
        rsm.fetch_log_segment(META, 0)
    assert type(e.value) is error and e.value.retriable == (error is RemoteStorageUnavailable)


def _manifest(body: bytes, crc: str) -> dict:
    return {"Body": botocore.response.StreamingBody(io.BytesIO(body), len(body)), "Metadata": {"crc32c": crc}}


def test_a_manifest_that_does_not_match_its_checksum_is_corrupt(stubbed):
    rsm, stub = stubbed
    body = json.dumps({"version": 1}).encode()
    stub.add_response("get_object", _manifest(body, str(crc32c.crc32c(body) ^ 1)))
    with pytest.raises(CorruptRemoteObject, match="manifest"):
        rsm.fetch_log_segment(META, 0)


def test_a_manifest_of_another_version_is_refused(stubbed):
    rsm, stub = stubbed
    body = json.dumps({"version": 99}).encode()
    stub.add_response("get_object", _manifest(body, str(crc32c.crc32c(body))))
    with pytest.raises(RemoteStorageException, match="version 99"):
        rsm.fetch_log_segment(META, 0)


def test_s3proxy_that_cannot_be_fetched_fails_the_install(tmp_path, monkeypatch):
    monkeypatch.setenv("ODRADEK_S3PROXY_HOME", str(tmp_path))
    monkeypatch.setattr(s3proxy.shutil, "which", lambda name: None)
    with pytest.raises(s3proxy.S3ProxyError, match="mvn"):
        s3proxy.install()
    assert s3proxy.installed_jar() is None


def test_make_test_deps_step_exits_non_zero_when_it_cannot_fetch(tmp_path):
    env = {"ODRADEK_S3PROXY_HOME": str(tmp_path), "PATH": str(tmp_path)}   # no mvn on the PATH
    proc = subprocess.run([sys.executable, "-m", "odradek.dev.s3proxy"], env=env, capture_output=True, text=True)
    assert proc.returncode != 0 and "mvn" in proc.stderr
