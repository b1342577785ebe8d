"""``odradek dev up|down|status``: a whole local cluster as processes.

ZooKeeper, the controller(s) and the brokers run as child processes, with data and logs
under one directory (``--data-dir``); ``cluster.json`` there records every PID (with its
start time) and address, so ``down`` and ``status`` work from any shell. Ports are not chosen
here: each process binds 0 (or the port asked for) and reports what it bound (``launch``);
its recorded command is then rewritten with those ports, so ``start`` binds the same again.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import ssl
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from odradek import extras, metrics_http
from odradek.cluster import control_plane
from odradek.cluster.control_plane_http import send_blocking
from odradek.cluster.control_plane_tls import ControlPlaneTls, scheme
from odradek.config.broker import small_cluster_settings
from odradek.config.cluster_security import CONTROL_PLANE_KEYS, ZOOKEEPER_SECURITY_KEYS
from odradek.dev import grow, launch, netns, processes, security, tiered, zookeeper
from odradek.dev.launch import Launched, StartFailed
from odradek.dev.processes import ProcessRecord
from odradek.dev.waiting import wait_until

STATE_FILE = "cluster.json"
DEFAULT_DIR = Path("var/dev")
BROKER_SERVING = re.compile(r"serving Kafka on ")


def _python() -> list[str]:
    return [sys.executable, "-m"]


def up(args: argparse.Namespace) -> int:
    root: Path = args.data_dir.resolve()
    if args.replication_factor is None:
        args.replication_factor = min(3, args.brokers)
    if args.min_insync_replicas is None:
        args.min_insync_replicas = max(1, args.replication_factor - 1)
    if args.min_insync_replicas != 1:  # 1 is Kafka's own default: leave it unset, as Kafka does
        args.config = [f"min.insync.replicas={args.min_insync_replicas}", *args.config]
    given = (c.partition("=")[0] for c in args.config)
    args.config = [*(f"{k}={v}" for k, v in small_cluster_settings(args.brokers, given).items()), *args.config]
    if not args.no_gateway and (absent := extras.missing("gateway")):
        # stop before starting anything: a cluster without the gateway the user expects is a trap
        print(extras.advice("gateway", "the dev cluster's HTTP gateway", absent)
              + "; or run `odradek dev up --no-gateway` for the Kafka-protocol cluster alone", file=sys.stderr)
        return 2
    state_path = root / STATE_FILE
    if state_path.exists() and any(processes.alive(r) for r in _records(_load(state_path))):
        print(f"a cluster is already running from {root}; `odradek dev down --data-dir {args.data_dir}` first",
              file=sys.stderr)
        return 1
    root.mkdir(parents=True, exist_ok=True)
    state: dict = {"data_dir": str(root), "cluster": args.cluster, "processes": {}}
    if args.netns:
        if netns.ENV not in os.environ:  # create it and run this very command inside it
            netns.enter(netns.create(), ["dev", *args.argv])
        state["netns"] = os.environ[netns.ENV]
        state["groups"] = {f"broker-{b}": netns.broker_gid(b) for b in range(1, args.brokers + 1)}
    if args.security != "none":   # inside the namespace, if any: `up` runs again there
        state["security"] = security.prepare(root)
        args.config = [*security.cluster_config(state["security"]), *args.config]
    try:
        _start_zookeeper(state, timeout=args.timeout)
        if args.tiered:
            tiered.start(state, timeout=args.timeout)
            args.config = [*tiered.broker_config(state), *args.config]
        _save(state_path, state)
        if "security" in state:   # the brokers' own SCRAM user, before any broker logs in with it
            security.create_admin(state["zookeeper"], args.cluster, state["security"])
        # the cluster's own security keys (control-plane mTLS, ZooKeeper ACLs) go to the controllers too
        state["cluster_security"] = {k: v for k, _, v in (c.partition("=") for c in args.config)
                                     if k in (*CONTROL_PLANE_KEYS, *ZOOKEEPER_SECURITY_KEYS)}
        state["commands"], state["brokers"] = {}, {}
        started = _start_controllers_and_brokers(state, args)
        _save(state_path, state)
        _record_ports(state, args, started, timeout=args.timeout)
        _save(state_path, state)
        log_starts = {name: s.since for name, s in started.items() if name.startswith("broker-")}
        _wait_ready(state, args.brokers, log_starts, timeout=args.timeout)
        if not args.no_gateway:
            _start_gateway(state, args.gateway_port, timeout=args.timeout)
            _save(state_path, state)
    except Exception as e:
        print(f"odradek dev up failed: {e}; logs in {root / 'logs'}", file=sys.stderr)
        _stop_all(state)
        netns.delete(state.get("netns", ""))
        return 1
    print(_summary(state))
    if args.detach:
        return 0
    print("\nCtrl-C stops the cluster.")
    try:
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("stopping...")
        _stop_all(state)
        netns.delete(state.get("netns", ""))
    return 0


def _start_controllers_and_brokers(state: dict, args: argparse.Namespace) -> dict[str, Launched]:
    """Spawn every controller and broker at once, on port 0 (the brokers' Kafka port on
    ``--kafka-port``'s when it is free), without waiting for any."""
    started = {}
    for i in range(args.controllers):
        state["commands"][f"controller-{i}"] = _controller_command(state, args, i, {})
        started[f"controller-{i}"] = launch.start(state, f"controller-{i}")
    for broker_id in range(1, args.brokers + 1):
        kafka = launch.preferred(args.kafka_port + broker_id - 1) if args.kafka_port else 0
        state["commands"][f"broker-{broker_id}"] = _broker_command(state, args, broker_id, {"kafka": kafka})
        started[f"broker-{broker_id}"] = launch.start(state, f"broker-{broker_id}")
    return started


def _record_ports(state: dict, args: argparse.Namespace, started: dict[str, Launched], timeout: float) -> None:
    """Each process's reported ports: its addresses in the state, and its command rewritten with
    them (a restart binds the same ports)."""
    deadline = time.monotonic() + timeout
    for name, launched in started.items():
        bound = launch.await_ports(state, launched, max(1.0, deadline - time.monotonic()))
        if "metrics" in bound:   # unless a --config metrics.port=-1 turned it off
            state.setdefault("metrics", {})[name] = metrics_http.url("127.0.0.1", bound["metrics"])
        kind, _, number = name.partition("-")
        if kind == "controller":
            state["commands"][name] = _controller_command(state, args, int(number), bound)
        else:
            state["commands"][name] = _broker_command(state, args, int(number), bound)
            state["brokers"][number] = f"127.0.0.1:{bound['kafka']}"
    tls = _control_plane_tls(state)
    state["controllers"] = [f"{scheme(tls)}://127.0.0.1:{state['ports'][f'controller-{i}']['api']}"
                            for i in range(args.controllers)]


def _controller_command(state: dict, args: argparse.Namespace, i: int, bound: dict[str, int]) -> list[str]:
    return _python() + [
        "odradek.controller", "--zookeeper", state["zookeeper"], "--cluster", args.cluster,
        "--listen", f"127.0.0.1:{bound.get('api', 0)}", "--id", f"controller-{i}",
        "--metrics-port", str(bound.get("metrics", 0)),
        "--default-partitions", str(args.partitions),
        "--default-replication-factor", str(args.replication_factor),
        "--leader-imbalance-check-interval-seconds", "10",
        *sum((["--config", f"{k}={v}"] for k, v in state["cluster_security"].items()), []),
        *sum((["--config", c] for c in args.controller_config), [])]


def _broker_command(state: dict, args: argparse.Namespace, broker_id: int, bound: dict[str, int]) -> list[str]:
    """The broker's command; its internal API stays on port 0 (it registers the bound one)."""
    name = f"broker-{broker_id}"
    return _python() + [
        "odradek.broker", "--id", str(broker_id), "--data-dir", str(Path(state["data_dir"]) / name),
        "--zookeeper", state["zookeeper"], "--cluster", args.cluster,
        *_broker_listener(state, bound.get("kafka", 0)), "--config", f"metrics.port={bound.get('metrics', 0)}",
        *_broker_rack(args.racks, broker_id, args.brokers),
        *sum((["--config", c] for c in args.config), [])]


def _broker_rack(racks: str, broker_id: int, brokers: int) -> list[str]:
    """``--rack`` for one broker: contiguous blocks, so that the sorted ids are *not* already
    alternated by rack (rack-aware placement must do it)."""
    names = [r for r in racks.split(",") if r]
    return ["--rack", names[(broker_id - 1) * len(names) // brokers]] if names else []


def _broker_listener(state: dict, port: int) -> list[str]:
    """A broker's listener arguments: PLAINTEXT on ``port``, or the secured cluster's SASL_SSL one."""
    if "security" not in state:
        return ["--listen", f"127.0.0.1:{port}"]
    return sum((["--config", c] for c in security.broker_config(state["security"], port)), [])


def _start_zookeeper(state: dict, port: int = 0, timeout: float = 60.0) -> None:
    """Start the cluster's ZooKeeper (its data under ``<data-dir>/zookeeper``) on ``port`` (0: a
    free one; TLS only in a secured cluster) and wait until it serves; record its PID and connect
    string."""
    zk = zookeeper.start_detached(Path(state["data_dir"]) / "zookeeper", port, timeout,
                                  security.zookeeper_tls(state.get("security")))
    state["processes"]["zookeeper"] = ProcessRecord(
        "zookeeper", zk.pid, processes.start_time(zk.pid) or 0, str(zk.directory / zookeeper.LOG_NAME)).to_json()
    state["zookeeper"] = zk.connect
    state.setdefault("ports", {})["zookeeper"] = {"client": zk.port}


def _log_since(log_path: Path, since: int) -> str:
    """What a process logged after byte ``since`` of its log."""
    with open(log_path, "rb") as f:
        f.seek(since)
        return f.read().decode(errors="replace")


def _process_name(state: dict, which: str) -> str:
    """``3`` -> ``broker-3``; ``controller`` -> the active controller; else a process name."""
    if which.isdigit():
        return f"broker-{which}"
    if which == "controller":
        url = (active_cluster(state) or {}).get("controller_url")
        if url is None:
            raise SystemExit("no active controller")
        return f"controller-{state['controllers'].index(url)}"
    if which not in state["processes"]:
        raise SystemExit(f"no process {which!r}; known: {', '.join(state['processes'])}")
    return which


def kill(args: argparse.Namespace) -> int:
    """Stop one process: SIGKILL (a crash) by default, SIGTERM with --graceful."""
    path = args.data_dir.resolve() / STATE_FILE
    state = _load(path)
    name = _process_name(state, args.process)
    processes.stop(ProcessRecord.from_json(state["processes"][name]),
                   signal.SIGTERM if args.graceful else signal.SIGKILL)
    print(f"{name} stopped")
    return 0


def start(args: argparse.Namespace) -> int:
    """Start one stopped broker (or a process by name, e.g. ``controller-0`` or ``zookeeper``)
    again, with the same id, port and data; a broker id the cluster never had adds that broker."""
    path = args.data_dir.resolve() / STATE_FILE
    state = _load(path)
    name = f"broker-{args.broker}" if args.broker.isdigit() else args.broker
    new = args.broker.isdigit() and name not in state.get("commands", {})
    if new:
        state["commands"][name] = grow.new_broker_command(state, int(args.broker), args.rack)
    elif name not in state.get("commands", {}) and name != "zookeeper":
        raise SystemExit(f"cannot start {name!r}; known: {', '.join(['zookeeper', *state.get('commands', {})])}")
    if not new and processes.alive(ProcessRecord.from_json(state["processes"][name])):
        print(f"{name} is already running", file=sys.stderr)
        return 1
    if name == "zookeeper":  # the same port: brokers and controllers reconnect to their connect string
        try:
            _start_zookeeper(state, int(state["zookeeper"].rsplit(":", 1)[1]), args.timeout)
        except zookeeper.ZooKeeperFailed as e:   # its port taken meanwhile, say
            print(f"zookeeper failed to start: {e}", file=sys.stderr)
            return 1
    else:   # its recorded command has its recorded ports: it binds them again or fails saying so
        launched = launch.start(state, name)
    _save(path, state)
    if name != "zookeeper":
        try:   # a broker reports once its logs are open: a full disk stops it before
            bound = launch.await_ports(state, launched, args.timeout)
            if new:
                grow.record(state, int(args.broker), args.rack, bound)
                _save(path, state)
                _wait_registered(state, int(args.broker), args.timeout)
        except (StartFailed, TimeoutError) as e:
            print(f"{name} failed to start: {e}", file=sys.stderr)
            return 1
        _save(path, state)
    if name == "gateway":   # like `dev up`: return once it answers /readyz
        _wait_gateway_ready(state, timeout=60)
    print(f"{name} started (pid {state['processes'][name]['pid']})")
    return 0


def _wait_registered(state: dict, broker_id: int, timeout: float) -> None:
    def registered() -> bool:
        cluster = active_cluster(state)
        return cluster is not None and any(b["id"] == broker_id
                                           for b in cluster.get("brokers", []))
    wait_until(registered, timeout, f"broker {broker_id} to register", 0.2)


def _start_gateway(state: dict, preferred_port: int, timeout: float) -> None:
    state["commands"]["gateway"] = _gateway_command(state, launch.preferred(preferred_port))
    port = launch.await_ports(state, launch.start(state, "gateway"), timeout)["http"]
    state["commands"]["gateway"] = _gateway_command(state, port)
    state["gateway"] = f"{'https' if 'security' in state else 'http'}://127.0.0.1:{port}"   # security: dev CA
    state.setdefault("metrics", {})["gateway"] = state["gateway"] + metrics_http.PATH
    _wait_gateway_ready(state, timeout)


def _gateway_command(state: dict, port: int) -> list[str]:
    return _python() + [
        "odradek.gateway", "--bootstrap-servers", ",".join(state["brokers"].values()),
        "--host", "127.0.0.1", "--port", str(port),
        # the console's throughput and partition sizes come from the brokers' metrics
        "--broker-metrics-urls", ",".join(f"{name.removeprefix('broker-')}={url}"
                                          for name, url in state.get("metrics", {}).items()
                                          if name.startswith("broker-")),
        *(security.gateway_arguments(state["security"]) if "security" in state else [])]


def _wait_gateway_ready(state: dict, timeout: float) -> None:
    def ready() -> bool:
        if not processes.alive(ProcessRecord.from_json(state["processes"]["gateway"])):
            raise RuntimeError("the gateway exited during start-up")
        tls = ssl.create_default_context(cafile=state["security"]["ca_file"]) if "security" in state else None
        with urllib.request.urlopen(state["gateway"] + "/readyz", timeout=5, context=tls) as resp:
            return resp.status == 200
    wait_until(ready, timeout, "the gateway to be ready", 0.2, retry_on=(OSError,))  # URLError is one


def _wait_ready(state: dict, brokers: int, log_starts: dict[str, int], timeout: float) -> None:
    """Every broker registered and serving clients (it does once the controller's first
    metadata is applied, and logs it)."""
    seen = ["no controller answered"]
    serving: set[str] = set()
    logs = Path(state["data_dir"]) / "logs"

    def ready() -> bool:
        for name, rec in state["processes"].items():
            if not processes.alive(ProcessRecord.from_json(rec)):
                raise RuntimeError(f"{name} exited during start-up")
        cluster = active_cluster(state)
        if cluster is None:
            return False
        registered = len(cluster.get("brokers", []))
        serving.update(name for name, since in log_starts.items() if name not in serving
                       and BROKER_SERVING.search(_log_since(logs / f"{name}.log", since)))
        seen[0] = f"{registered}/{brokers} brokers registered, {len(serving)} serving clients"
        return registered >= brokers and len(serving) >= brokers
    try:
        wait_until(ready, timeout, "the cluster to be ready", 0.2, retry_on=())
    except TimeoutError:
        raise TimeoutError(f"cluster not ready after {timeout:.0f}s: {seen[0]}") from None


def _control_plane_tls(state: dict) -> ControlPlaneTls | None:
    """The control plane's TLS (client side: the dev tools present the cluster's certificate)."""
    return ControlPlaneTls.from_settings(state.get("cluster_security", {}))


def active_cluster(state: dict) -> dict | None:
    """The active controller's view (``control_plane.CLUSTER``'s JSON plus its
    ``controller_url``), or None."""
    for url in state.get("controllers", []):
        try:
            status, body = send_blocking(url, control_plane.cluster(), timeout=2, tls=_control_plane_tls(state))
        except (OSError, ValueError):
            continue
        if status == 200:
            return {**body, "controller_url": url}
    return None


def _records(state: dict) -> list[ProcessRecord]:
    return [ProcessRecord.from_json(r) for r in state.get("processes", {}).values()]


def _stop_all(state: dict) -> None:
    # The gateway first (its clients), brokers (they deregister), then controllers, ZooKeeper last.
    order = sorted(_records(state), key=lambda r: (r.name == "zookeeper", r.name.startswith("controller"),
                                                   r.name != "gateway"))
    for rec in order:
        processes.stop(rec)


def _addresses(state: dict) -> dict:
    cluster = active_cluster(state) or {}
    return {"bootstrap_servers": ",".join(state.get("brokers", {}).values()),
            "controller_url": cluster.get("controller_url"),
            "controllers": state.get("controllers", []),
            "zookeeper": state.get("zookeeper"), "cluster": state.get("cluster"),
            "gateway": state.get("gateway"), "object_store": state.get("object_store"),
            "schema_registry": state.get("gateway"),   # the gateway serves it (docs/schema-registry.md)
            "data_dir": state.get("data_dir"),
            **({"security": state["security"]} if "security" in state else {}),
            "brokers": {k: v for k, v in state.get("brokers", {}).items()},
            # process name (broker-1, controller-0, gateway) -> its Prometheus endpoint
            "metrics_url": dict(state.get("metrics", {})),
            # process name -> the ports it reported binding (``launch``)
            "ports": dict(state.get("ports", {})),
            # broker id -> its readiness route (200: serving and in every ISR it belongs to)
            "readiness_url": _readiness_urls(state),
            "pids": {r.name: r.pid for r in _records(state) if processes.alive(r)}}


def _readiness_urls(state: dict) -> dict[str, str]:
    base = f"{scheme(_control_plane_tls(state))}://127.0.0.1"
    ports = state.get("ports", {})
    return {b: f"{base}:{ports[f'broker-{b}']['internal']}{control_plane.READY.path()}"
            for b in state.get("brokers", {}) if "internal" in ports.get(f"broker-{b}", {})}


def _summary(state: dict) -> str:
    a = _addresses(state)
    return (f"Odradek cluster {a['cluster']!r} is up\n"
            f"  bootstrap servers: {a['bootstrap_servers']}\n"
            f"  controller:        {a['controller_url']}\n"
            + (f"  gateway (HTTP):    {a['gateway']}\n" if a["gateway"] else "") +
            f"  zookeeper:         {a['zookeeper']}\n" + tiered.summary(state) +
            f"  data and logs:     {a['data_dir']}"
            + (f"\n{security.summary(a['security'])}" if "security" in a else ""))


def _saved_state(args: argparse.Namespace) -> dict | None:
    """The state ``up`` saved in the data dir, or None (said on stderr) when there is none."""
    path = args.data_dir.resolve() / STATE_FILE
    if not path.exists():
        print(f"no cluster state in {path.parent}", file=sys.stderr)
        return None
    return _load(path)


def status(args: argparse.Namespace) -> int:
    state = _saved_state(args)
    if state is None:
        return 1
    if args.json:
        print(json.dumps(_addresses(state), indent=2))
        return 0
    for rec in _records(state):
        print(f"{rec.name:14} pid {rec.pid:<8} {'running' if processes.alive(rec) else 'stopped'}")
    cluster = active_cluster(state)
    if cluster is None:
        print("no active controller")
        return 1
    if "security" in state:
        print(security.summary(state["security"]))
    print(f"\nactive controller {cluster.get('controller_id')} (epoch {cluster.get('controller_epoch')}) "
          f"at {cluster['controller_url']}")
    for b in cluster.get("brokers", []):
        print(f"broker {b['id']}: {b['host']}:{b['port']}")
    for t in cluster.get("topics", []):
        for p in t["partitions"]:
            print(f"{t['name']}-{p['partition']}: leader {p['leader']} epoch {p['leader_epoch']} "
                  f"replicas {p['replicas']} isr {p['isr']}")
    return 0


def down(args: argparse.Namespace) -> int:
    state = _saved_state(args)
    if state is None:
        return 1
    _stop_all(state)
    netns.delete(state.get("netns", ""))
    print("stopped")
    return 0


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def _save(path: Path, state: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(path)


def enter_netns(args: argparse.Namespace) -> None:
    """A cluster started with ``--netns`` is reachable only from inside its namespace: run
    this command there (nothing to do for ``up`` or a cluster without one)."""
    path = args.data_dir.resolve() / STATE_FILE
    if args.command != "up" and path.exists():
        name = _load(path).get("netns")
        if name:
            netns.enter(name, ["dev", *args.argv])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="odradek dev", description="A local Odradek cluster of processes.")
    sub = p.add_subparsers(dest="command", required=True)
    u = sub.add_parser("up", help="start ZooKeeper, controller(s) and brokers")
    u.add_argument("--brokers", type=int, default=3)
    u.add_argument("--controllers", type=int, default=1)
    u.add_argument("--kafka-port", type=int, default=9092,
                   help="first broker's port (next ones follow; 0 = free ports)")
    u.add_argument("--partitions", type=int, default=1, help="num.partitions for new topics")
    u.add_argument("--replication-factor", type=int,
                   help="default.replication.factor (default: min(3, brokers))")
    u.add_argument("--min-insync-replicas", type=int,
                   help="brokers' min.insync.replicas default (default: replication factor - 1, at least 1)")
    u.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="broker topic defaults")
    u.add_argument("--controller-config", action="append", default=[], metavar="KEY=VALUE",
                   help="the controllers' own settings (e.g. zookeeper.session.timeout.ms)")
    u.add_argument("--gateway-port", type=int, default=8080, help="the HTTP gateway's port (0: any free port)")
    u.add_argument("--no-gateway", action="store_true", help="do not start the HTTP gateway")
    u.add_argument("--racks", default="", metavar="R1,R2,...",
                   help="broker.rack names, given to the brokers in contiguous blocks (6 brokers on a,b,c: 1-2 a, "
                        "3-4 b, 5-6 c); docs/racks.md")
    u.add_argument("--detach", action="store_true", help="leave the cluster running and return")
    u.add_argument("--timeout", type=float, default=60.0)
    u.add_argument("--security", choices=security.CHOICES, default="none",
                   help="sasl_ssl: a CA and certificates under the data dir, SASL_SSL listeners (SCRAM-SHA-512) "
                        "for clients and between brokers, the ACL authorizer on, an admin super user "
                        "(docs/security.md, 'Dev mode')")
    u.add_argument("--tiered", action="store_true", help="start an S3-compatible object store (S3Proxy) for "
                   "tiered storage beside the cluster (docs/tiered-storage.md)")
    u.add_argument("--netns", action="store_true",
                   help="run the cluster in a network namespace of its own (root), so that "
                        "`odradek verify --nemesis partition` can cut brokers off; later commands enter it")
    s = sub.add_parser("status", help="show brokers, the active controller and partitions")
    s.add_argument("--json", action="store_true", help="print addresses as JSON")
    d = sub.add_parser("down", help="stop every process of the cluster")
    k = sub.add_parser("kill", help="stop one process (SIGKILL; --graceful for SIGTERM)")
    k.add_argument("process", help="a broker id, 'controller' (the active one) or a process name")
    k.add_argument("--graceful", action="store_true")
    st = sub.add_parser("start", help="start a stopped broker (or controller-N, zookeeper) again")
    st.add_argument("broker", help="a broker id or a process name such as controller-0 or zookeeper "
                                   "(same port and data); a new broker id adds that broker")
    st.add_argument("--rack", help="broker.rack of a broker added")
    st.add_argument("--timeout", type=float, default=60.0, help="how long to wait for it to serve")
    u.add_argument("--cluster", default="odradek", help="cluster name (ZooKeeper chroot /odradek/<name>)")
    for sp in (u, s, d, k, st):
        sp.add_argument("--data-dir", type=Path, default=DEFAULT_DIR)
    argv = sys.argv[1:] if argv is None else list(argv)
    args = p.parse_args(argv)
    args.argv = argv
    enter_netns(args)
    return {"up": up, "status": status, "down": down, "kill": kill, "start": start}[args.command](args)
