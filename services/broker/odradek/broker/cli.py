"""``odradek broker``: run one broker."""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import logging
import os
import resource
import signal
import sys
from pathlib import Path
from typing import NoReturn

from odradek import logs
from odradek.broker.config import BrokerConfig
from odradek.config import BrokerSettings, bound_values, parse_broker_settings
from odradek.errors import KafkaError


def _hostport(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    return host or "127.0.0.1", int(port)


def parse_args(argv: list[str] | None) -> BrokerConfig:
    # @FILE reads more arguments from FILE, one a line (the operator's init container writes a
    # pod's own advertised.listeners there: one StatefulSet template cannot vary per pod).
    p = argparse.ArgumentParser(prog="odradek broker", description="Run an Odradek broker.",
                                fromfile_prefix_chars="@")
    p.add_argument("--id", type=int, required=True, help="broker id (broker.id)")
    p.add_argument("--data-dir", type=Path, required=True, help="log directory (log.dirs)")
    p.add_argument("--zookeeper", required=True, help="ZooKeeper connect string host:port[,host:port]")
    p.add_argument("--cluster", default="odradek", help="cluster name: chroot /odradek/<cluster>")
    p.add_argument("--listen", help="the PLAINTEXT listener host:port (port 0 = free port; default 127.0.0.1:9092 "
                                    "when --config listeners=... is not given; with it, an extra listener named PLAINTEXT)")
    p.add_argument("--advertised", help="host:port clients are told to use (default: the listener)")
    p.add_argument("--internal-listen", default="127.0.0.1:0", help="control-plane API host:port")
    p.add_argument("--internal-advertised",
                   help="host[:port] the controller is told to reach the control-plane API at (default: the "
                        "listener; required when it binds 0.0.0.0)")
    p.add_argument("--rack", help="broker.rack")
    p.add_argument("--rack-file", type=Path,
                   help="read broker.rack from this file (written by the Kubernetes operator's init container)")
    p.add_argument("--no-auto-create-topics", action="store_true", help="auto.create.topics.enable=false")
    p.add_argument("--replica-lag-time-max-ms", type=int, default=None,
                   help="replica.lag.time.max.ms: a follower not caught up for this long leaves the ISR "
                        "(default 30000; also accepted as --config replica.lag.time.max.ms=N)")
    p.add_argument("--controlled-shutdown-max-retries", type=int, default=None,
                   help="controlled.shutdown.max.retries (SIGTERM moves leaderships away first; default 3; "
                        "also accepted as --config controlled.shutdown.max.retries=N)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="any key of the configuration reference (README.md): topic defaults, e.g. "
                        "retention.ms=60000 or log.segment.bytes=1048576, the broker's own keys "
                        "(replica.lag.time.max.ms...) and the group coordinator's group.* / offsets.* keys "
                        "(e.g. group.initial.rebalance.delay.ms=0, offsets.retention.minutes=10080)")
    logs.add_arguments(p)
    a = p.parse_args(argv)
    logs.configure("broker", a.log_level, a.log_format, broker_id=a.id)
    host, port = _hostport(a.listen or "127.0.0.1:9092")
    ihost, iport = _hostport(a.internal_listen)
    adv_host, adv_port = _hostport(a.advertised) if a.advertised else (None, None)
    iadv_host, _, iadv_port = (a.internal_advertised or "").partition(":")
    settings = _settings(p, a)
    config = BrokerConfig(broker_id=a.id, data_dir=a.data_dir, zookeeper=a.zookeeper, cluster=a.cluster,
                          host=host, port=port, advertised_host=adv_host, advertised_port=adv_port,
                          internal_host=ihost, internal_port=iport, internal_advertised_host=iadv_host or None,
                          internal_advertised_port=int(iadv_port) if iadv_port else None,
                          rack=a.rack or (a.rack_file.read_text().strip() or None if a.rack_file else None),
                          topic_defaults=settings.topic_defaults, group_settings=settings.group,
                          listener_settings=settings.listener, listen_flag=a.listen is not None,
                          given_settings=dict(settings.broker),
                          **bound_values(BrokerConfig, settings.broker))
    try:  # the control plane's certificates and ZooKeeper's credentials load now, or the start fails here
        config.control_plane_tls()
        config.zookeeper_security()
    except ValueError as e:
        p.error(str(e))
    return config


def _settings(p: argparse.ArgumentParser, a: argparse.Namespace) -> BrokerSettings:
    """--config pairs, validated by the registry; the dedicated flags win over --config."""
    settings = dict(kv.split("=", 1) for kv in a.config)
    flags = {"auto.create.topics.enable": "false" if a.no_auto_create_topics else None,
             "replica.lag.time.max.ms": a.replica_lag_time_max_ms,
             "controlled.shutdown.max.retries": a.controlled_shutdown_max_retries}
    settings.update({k: str(v) for k, v in flags.items() if v is not None})
    try:
        return parse_broker_settings(settings)
    except KafkaError as e:
        p.error(e.message)


def raise_open_files_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit, as a JVM does for Kafka (HotSpot's
    ``-XX:+MaxFDLimit``, on by default): every partition keeps its active segment's log and
    two index files open, and every client and follower a socket, so 10,000 partition
    replicas need some 30,000 descriptors. The hard limit is the operator's
    (``ulimit -Hn``, the container runtime's ``nofile``; docs/performance.md). Returns
    (soft, hard) after the change."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):  # an unlimited hard limit the kernel caps lower: keep ours
            pass
    return soft, hard


def _tune_gc() -> None:
    """Each request allocates a few dozen containers; at the default first-generation threshold
    (700) the cyclic GC ran every few requests, scanning the survivors each time, and its full
    collections walked the modules' objects too. Those are frozen once imported (out of every
    collection), and the first generation holds 50,000 before it is scanned (as the gateway)."""
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3   # glibc's mallopt parameters
HEAP_KEPT_BYTES = 32 << 20


def keep_freed_heap() -> bool:
    """Have glibc's malloc keep up to 32 MiB of freed heap and serve blocks below 32 MiB from it,
    not from fresh pages. Its defaults (blocks over 128 KiB mapped, rising with the largest freed,
    and the heap trimmed once 2x that is free at its top) gave each produce request's buffers,
    256 KiB each, pages of their own again: a page fault and a zeroed page per 4 KiB produced
    (320,000 faults in 8 s at 160 MB/s, some 10% of the broker's CPU; after this, none). Frames
    larger than 32 MiB are still mapped and given back when freed. False where the C library
    has no mallopt or refuses."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, HEAP_KEPT_BYTES)) and bool(mallopt(_M_TRIM_THRESHOLD, HEAP_KEPT_BYTES))


def main(argv: list[str] | None = None) -> NoReturn:
    config = parse_args(argv)
    from odradek.broker.server import Broker
    _tune_gc()
    soft, hard = raise_open_files_limit()
    logging.getLogger(__name__).info("open files limit %s (hard %s); freed heap kept: %s", soft, hard,
                                     keep_freed_heap())

    async def run() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        broker = Broker(config)
        await broker.run(stop)
        return broker.exit_code  # 1 after a start-up or log directory failure

    try:
        import uvloop
    except ImportError:
        code = asyncio.run(run())
    else:
        code = uvloop.run(run())
    # Logs flushed, closed and fsynced, threads and the cleaner's process stopped: the
    # interpreter's teardown would only free every object one by one (~1.5 s of a controlled
    # shutdown at 10,000 partitions), which a JVM's exit does not do either.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
