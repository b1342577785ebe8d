"""``odradek controller``: command-line entry point of the controller service.

Owns: argument parsing, logging setup, binding the HTTP listener first (the URL written to
``/controller`` is the one really bound, unless ``--advertised-url`` says otherwise), running
the controller loop, and resigning cleanly on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import signal
import socket

from odradek import logs, metrics_http
from odradek.ports import report as report_ports
from odradek.cluster import zk_session
from odradek.cluster.control_plane_http import serve as serve_http
from odradek.cluster.control_plane_tls import ControlPlaneTls, scheme
from odradek.cluster.zk_session import ZkSecurity, ZkTimeouts
from odradek.config.broker import INTER_BROKER_PROTOCOL_VERSION
from odradek.config.cluster_security import CONTROL_PLANE_KEYS, ZOOKEEPER_SECURITY_KEYS
from odradek.config.controller import (AUTO_LEADER_REBALANCE, CONTROLLER_CONFIGS, DEFAULT_REPLICATION_FACTOR,
                                       LEADER_IMBALANCE_CHECK_INTERVAL, LEADER_IMBALANCE_PER_BROKER_PERCENTAGE,
                                       NUM_PARTITIONS)
from odradek.errors import KafkaError

from .api import make_app
from .config import ControllerConfig, Settings
from .metrics import ControllerCollector
from .service import Controller
from .zkstore import ZkStore

log = logging.getLogger("odradek.controller")


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host, int(port)


def _positive(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {value!r}")
    return seconds


# the flags that set a controller key: flag's attribute -> key
_FLAG_KEYS = {"default_partitions": NUM_PARTITIONS, "default_replication_factor": DEFAULT_REPLICATION_FACTOR,
              "auto_leader_rebalance": AUTO_LEADER_REBALANCE,
              "leader_imbalance_check_interval_seconds": LEADER_IMBALANCE_CHECK_INTERVAL,
              "leader_imbalance_per_broker_percentage": LEADER_IMBALANCE_PER_BROKER_PERCENTAGE}


def _key_help(name: str) -> str:
    key = CONTROLLER_CONFIGS[name]
    return f"{name}: {key.doc} (default {key.default})"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="odradek controller",
                                description="Odradek controller: election, placement, admin API.")
    p.add_argument("--zookeeper", required=True, metavar="HOST:PORT[,HOST:PORT...]",
                   help="ZooKeeper connect string (without chroot)")
    p.add_argument("--cluster", default="odradek", help="cluster name; chroot /odradek/<cluster>")
    p.add_argument("--listen", default="127.0.0.1:0", type=_host_port, metavar="HOST:PORT",
                   help="internal HTTP API address; port 0 picks a free port (default %(default)s)")
    p.add_argument("--advertised-url", default=None,
                   help="URL other services use to reach this instance (default: http://<bound address>, "
                        "https:// with control.plane.ssl.keystore.location)")
    p.add_argument("--id", default=f"{socket.gethostname()}-{os.getpid()}",
                   help="instance id written to /controller (default hostname-pid)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="the controller's settings (the README's controller table: num.partitions, "
                        "default.replication.factor, auto.leader.rebalance.enable, leader.imbalance.*...); "
                        "the ZooKeeper session's, as the brokers take them: "
                        "zookeeper.session.timeout.ms (default 18000: how long a dead controller keeps "
                        "/controller, and how long a ZooKeeper outage may last before it loses its role) and "
                        "zookeeper.connection.timeout.ms (start-up's wait; default: the session timeout); "
                        "and the cluster's own security, as the brokers take it (docs/security.md): "
                        "control.plane.ssl.* (mutual TLS on the internal API), zookeeper.set.acl and "
                        "zookeeper.digest.credentials.file")
    p.add_argument("--zk-session-timeout", type=_positive, default=None,
                   help="zookeeper.session.timeout.ms in seconds (wins over --config)")
    # Flags for some controller keys; each wins over --config, its default is the registry's.
    p.add_argument("--default-partitions", type=int, default=None, help=_key_help(NUM_PARTITIONS))
    p.add_argument("--default-replication-factor", type=int, default=None,
                   help=_key_help(DEFAULT_REPLICATION_FACTOR))
    p.add_argument("--auto-leader-rebalance", action=argparse.BooleanOptionalAction, default=None,
                   help=_key_help(AUTO_LEADER_REBALANCE))
    p.add_argument("--leader-imbalance-check-interval-seconds", type=_positive, default=None,
                   help=_key_help(LEADER_IMBALANCE_CHECK_INTERVAL))
    p.add_argument("--leader-imbalance-per-broker-percentage", type=float, default=None,
                   help=_key_help(LEADER_IMBALANCE_PER_BROKER_PERCENTAGE))
    p.add_argument("--metrics-port", type=int, default=-1,
                   help="port of the plain-HTTP Prometheus endpoint /metrics, on --listen's address "
                        "(0: any free port; default -1: none; the chart uses 9404)")
    logs.add_arguments(p)
    return p


async def serve(args: argparse.Namespace) -> int:
    host, port = args.listen
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    store = ZkStore(args.zookeeper, args.cluster, args.zk_timeouts, args.zk_security)
    settings = Settings(id=args.id, url="", config=args.controller_config, tls=args.tls,
                        protocol_version=args.protocol_version)
    controller = Controller(store, settings)
    runner, bound = await serve_http(make_app(controller), host, port, args.tls, f"controller {args.id} API")
    url = args.advertised_url or f"{scheme(args.tls)}://{_url_host(bound[0])}:{bound[1]}"
    controller.settings = dataclasses.replace(settings, url=url)
    log.info("controller %s serving the internal API on %s", args.id, url)
    metrics = bound_port = None
    if args.metrics_port >= 0:
        metrics, bound_port = await metrics_http.serve(metrics_http.registry(ControllerCollector(controller)),
                                                       host, args.metrics_port)
        log.info("controller %s serving Prometheus metrics on %s", args.id, metrics_http.url(host, bound_port))
    report_ports(api=bound[1], metrics=bound_port)

    loop_task = asyncio.create_task(controller.run(), name="controller-loop")
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({loop_task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    code = 0
    if loop_task in done and loop_task.exception() is not None:
        log.error("controller loop failed", exc_info=loop_task.exception())
        code = 1
    log.info("shutting down")
    await controller.shutdown()
    stopper.cancel()
    if not loop_task.done():
        try:
            await asyncio.wait_for(loop_task, 5.0)
        except (asyncio.TimeoutError, Exception):
            loop_task.cancel()
    await runner.cleanup()
    if metrics is not None:
        await metrics.cleanup()
    return code


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The arguments, with ``controller_config`` (``ControllerConfig``) from --config and the
    controller's flags, ``protocol_version`` (the brokers' ``inter.broker.protocol.version``), ``zk_timeouts`` (``ZkTimeouts``) from --config and --zk-session-timeout,
    ``zk_security`` (``ZkSecurity``) and ``tls`` (``ControlPlaneTls`` or None) from --config."""
    p = build_parser()
    args = p.parse_args(argv)
    settings = dict(kv.partition("=")[::2] for kv in args.config)
    if args.zk_session_timeout is not None:
        settings[zk_session.SESSION_TIMEOUT] = str(round(args.zk_session_timeout * 1000))
    for attr, key in _FLAG_KEYS.items():
        if (value := getattr(args, attr)) is not None:
            settings[key] = CONTROLLER_CONFIGS[key].type.format(value)
    own = {k: settings.pop(k) for k in CONTROLLER_CONFIGS if k in settings}
    protocol = settings.pop(INTER_BROKER_PROTOCOL_VERSION.name, INTER_BROKER_PROTOCOL_VERSION.default)
    security = {k: settings.pop(k) for k in (*CONTROL_PLANE_KEYS, *ZOOKEEPER_SECURITY_KEYS) if k in settings}
    try:
        args.controller_config = ControllerConfig.from_settings(own)
        args.protocol_version = INTER_BROKER_PROTOCOL_VERSION.parse(protocol)
        args.zk_timeouts = ZkTimeouts.from_settings(settings)
        args.zk_security = ZkSecurity.from_settings(security)
        args.tls = ControlPlaneTls.from_settings(security)
    except KafkaError as e:
        p.error(e.message)
    except ValueError as e:
        p.error(str(e))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logs.configure("controller", args.log_level, args.log_format)
    logging.getLogger("kazoo").setLevel(max(logging.WARNING, logging.getLevelName(args.log_level)))
    try:
        return asyncio.run(serve(args))
    except KeyboardInterrupt:
        return 130
