"""The broker's log storage, split the way Apache Kafka splits it.

- ``index``: memory-mapped offset and time indexes (disposable, rebuilt from the log);
- ``file_records``: a segment's ``.log`` file (appends, batch scans, sendfile regions);
- ``segment``: one ``.log`` + ``.index`` + ``.timeindex`` (+ ``.txnindex``), named by the base offset;
- ``txn_index``: a segment's aborted transactions; ``producer_state``: idempotence and
  ongoing transactions per producer;
- ``validator``: checks and offset assignment of appended batches;
- ``log``: one partition's sorted segments (append, read, roll, retention, truncation, flush);
- ``loader``: opening a partition directory, recovering it after a crash;
- ``checkpoint`` / ``epoch``: checkpoint files and the leader epoch cache;
- ``cleaner``: which compacted log to clean when, the cleaner process, the swap of its output;
  ``cleaning``: one cleaning (key map, rewrite of segments); ``priority``: the cleaner
  process's CPU and I/O priority;
- ``manager``: every log of a data directory, and the maintenance task.
- ``remote_storage`` / ``remote_metadata``: tiered storage's remote storage manager (segments
  in an S3-compatible store, Kafka's KIP-405 interface; blocking, for worker threads) and its
  value types; imported only where tiered storage is used (boto3);
  ``remote_log_manager`` / ``remote_log_plan``: the task that copies each leader's rolled segments,
  keeps ``Log.highest_remote_offset`` for local retention and applies remote retention, and its decisions.

All of it runs on the broker's single event-loop thread (see each module for the few
places that use worker threads).
"""

from .config import LogConfig
from .epoch import EpochEntry, LeaderEpochCache
from .index import OffsetPosition, TimestampOffset
from .log import AppendInfo, FlushPlan, Log
from .manager import LogManager
from .segment import FetchSlice, LogSegment

__all__ = [
    "AppendInfo", "EpochEntry", "FetchSlice", "FlushPlan", "LeaderEpochCache", "Log", "LogConfig",
    "LogManager", "LogSegment", "OffsetPosition", "TimestampOffset",
]
