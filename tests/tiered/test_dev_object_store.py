"""``odradek dev up --tiered``'s object store: S3Proxy started for a dev cluster's state, recorded
as one of its processes, usable by the remote storage manager from what the state says, and
stopped by its recorded PID as ``odradek dev down`` stops every process."""

from __future__ import annotations

from odradek.broker.storage.remote_storage import RemoteStorageConfig, RemoteStorageManager
from odradek.dev import processes, s3proxy, tiered
from odradek.dev.processes import ProcessRecord
from tests.support.tools import tool_missing
from tests.tiered.segments import write_rolled_segment


def test_dev_up_tiered_starts_a_recorded_object_store(tmp_path):
    if s3proxy.installed_jar() is None:
        tool_missing(f"S3Proxy is not installed in {s3proxy.home()} (make test-deps)")
    state = {"data_dir": str(tmp_path / "dev"), "processes": {}}
    tiered.start(state, timeout=60)
    record = ProcessRecord.from_json(state["processes"]["s3proxy"])
    try:
        assert processes.alive(record)
        store = state["object_store"]
        assert store["endpoint"] in tiered.summary(state) and state["ports"]["s3proxy"]["s3"] > 0
        rsm = RemoteStorageManager(RemoteStorageConfig(store["endpoint"], store["bucket"], store["access_key"],
                                                       store["secret_key"]))
        rolled = write_rolled_segment(tmp_path / "log" / "t-0", batches=5)
        meta = rolled.metadata()
        rsm.copy_log_segment_data(meta, rolled.data)
        assert rsm.fetch_log_segment(meta, 0) == rolled.data.log_segment.read_bytes()
        rolled.log.close()
    finally:
        processes.stop(record)
    assert not processes.alive(record)
