"""Running ``odradek operator`` as one of several replicas (``--leader-elect``).

Owns the command-line options of the election, the replica's identity, and the process's side
of it (``run_elected``): a standby blocks in the election, serving its liveness URL itself
(``{"leader": false, ...}``) and ``odradek_operator_leader 0`` on /metrics; once it leads it
hands the liveness URL to kopf (whose probe answer gains ``leadership``), sets the gauge to 1,
renews the Lease from a thread and runs kopf. Losing the Lease ends the process at once
(exit 75), as a controller-runtime manager does: the Deployment restarts it as a standby, and no
handler of the old leader runs beside the new one. A clean stop (SIGTERM) releases the Lease.
The election itself is ``odradek.operator.leadership``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

from prometheus_client import Gauge

from odradek.operator.leadership import Elector, KubeLeaseStore, LeaseTimings, keep_renewing, wait_for_leadership

log = logging.getLogger("odradek.operator.ha")

LEADER = Gauge("odradek_operator_leader", "1 while this operator replica holds the leader Lease "
               "(always 1 without --leader-elect)")
LOST_EXIT = 75   # EX_TEMPFAIL: leadership lost, restart as a standby
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("high availability (docs/kubernetes.md, \"Operator high availability\")")
    g.add_argument("--leader-elect", action="store_true",
                   help="run as one of several replicas: only the holder of a coordination.k8s.io Lease reconciles")
    g.add_argument("--lease", default="odradek-operator", metavar="[NAMESPACE/]NAME",
                   help="the Lease (default odradek-operator in the pod's namespace: $POD_NAMESPACE)")
    g.add_argument("--lease-timings", default="15/10/2", metavar="DURATION/RENEW/RETRY",
                   help="lease duration, renew deadline and retry period in seconds (default 15/10/2)")


def identity(env: dict[str, str] | None = None) -> str:
    """The pod's name (or the host's) and a random suffix: a restarted process is a new candidate."""
    env = os.environ if env is None else env
    return f"{env.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def lease_ref(spec: str, env: dict[str, str] | None = None) -> tuple[str, str]:
    env = os.environ if env is None else env
    if "/" in spec:
        namespace, name = spec.split("/", 1)
        return namespace, name
    namespace = env.get("POD_NAMESPACE") or (SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
                                             if SERVICE_ACCOUNT_NAMESPACE.exists() else "default")
    return namespace, spec


def timings(spec: str) -> LeaseTimings:
    try:
        duration, renew, retry = (float(x) for x in spec.split("/"))
    except ValueError:
        raise SystemExit(f"--lease-timings: DURATION/RENEW/RETRY in seconds, got {spec!r}") from None
    return LeaseTimings(duration, renew, retry)


def elector(args: argparse.Namespace) -> Elector:
    from odradek.operator import kube
    t = timings(args.lease_timings)
    namespace, name = lease_ref(args.lease)
    return Elector(KubeLeaseStore(kube.shared(), namespace, name, timeout=t.retry_period * 2), identity(), t)


class StandbyHealth:
    """The liveness URL while standing by: 200 and the election's state while the election loop
    runs (its last attempt is recent), 503 when it is stuck."""

    def __init__(self, url: str, elector: Elector, clock: Callable[[], float]) -> None:
        parts = urlsplit(url)
        state = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                ok, body = state.answer()
                data = json.dumps(body).encode()
                wanted = self.path.split("?")[0] == (parts.path or "/")
                self.send_response(404 if not wanted else 200 if ok else 503)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: Any) -> None:   # no access log: probes every few seconds
                pass

        self.elector, self.clock = elector, clock
        self.server = ThreadingHTTPServer((parts.hostname or "0.0.0.0", parts.port or 80), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True, name="standby-health").start()

    def answer(self) -> tuple[bool, dict]:
        s = self.elector.status()
        fresh = self.clock() - s.last_attempt < 3 * self.elector.timings.lease_duration
        return fresh, {"leadership": leadership_probe(self.elector)}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def leadership_probe(elector: Elector | None) -> dict[str, Any]:
    """What the health endpoint says about the election (kopf's probe ``leadership``)."""
    if elector is None:
        return {"leader": True, "election": False}
    s = elector.status()
    return {"leader": s.leader, "identity": s.identity, "holder": s.holder, "reason": s.reason}


def register_probe(registry: Any, elector: Elector | None) -> None:
    import kopf
    kopf.on.probe(id="leadership", registry=registry)(lambda **_: leadership_probe(elector))


def _lost(reason: str) -> None:
    log.error("%s: exiting so that no handler runs beside the new leader", reason)
    sys.stderr.flush()
    os._exit(LOST_EXIT)


def run_elected(elector: Elector | None, liveness: str | None, run: Callable[[], None],
                on_lost: Callable[[str], None] = _lost) -> int:
    """Stand by until ``elector`` leads, then ``run()`` (kopf) while renewing; release at the end.
    No elector (no ``--leader-elect``): ``run()`` at once."""
    import time
    LEADER.set(0 if elector else 1)
    if elector is None:
        run()
        return 0
    stop = threading.Event()
    health = StandbyHealth(liveness, elector, time.monotonic) if liveness else None
    try:
        if not wait_for_leadership(elector, stop):
            return 0
    finally:
        if health:
            health.close()   # kopf serves the liveness URL from now on
    LEADER.set(1)
    renewer = threading.Thread(target=keep_renewing, args=(elector, stop, on_lost), daemon=True, name="lease-renewer")
    renewer.start()
    try:
        run()
    finally:
        stop.set()
        renewer.join(elector.timings.retry_period * 3)
        if elector.release():
            log.info("released the lease")
        LEADER.set(0)
    return 0
