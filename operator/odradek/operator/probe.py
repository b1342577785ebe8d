"""``odradek operator probe``: the readiness probe of a pod whose control plane takes mutual
TLS (the kubelet's ``httpGet`` cannot present a client certificate).

It GETs ``--path`` (``control_plane``'s route, from ``principals``) from the pod's own API on
the loopback address with the pod's certificate, checking the CA but not the host name (the
certificate names the pod's DNS names, not 127.0.0.1), and exits 0 when the answer is below
400, as ``httpGet`` would, else 1 with the reason on stderr.

``--path`` may repeat: the routes in order of preference, a 404 (a route the pod's API does
not know: an image before it) passes to the next. A broker's probe asks ``/ready``, then
``/status``. The probe of an image from before the repetition (control-plane version 1, whose
brokers have no ``/ready``) keeps the last ``--path`` only, as argparse does: ``/status``, the
probe that image always had.

Standard library only: it runs every few seconds in every broker and controller pod, and
importing the control-plane modules (aiohttp, the protocol schemas) would cost a second of
CPU each time. The context matches ``control_plane_tls.client_context`` (TLS 1.2 minimum).
"""

from __future__ import annotations

import argparse
import http.client
import socket
import ssl
import sys


def _status(context: ssl.SSLContext, port: int, path: str, timeout: float) -> int:
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=context)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="odradek operator probe", description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, required=True, help="the API's port on 127.0.0.1")
    p.add_argument("--path", required=True, action="append",
                   help="the route, e.g. /internal/v1/health; repeated: the next when one answers 404")
    p.add_argument("--keystore", required=True, help="PEM: the pod's certificate chain and key")
    p.add_argument("--truststore", required=True, help="PEM: the cluster CA")
    p.add_argument("--timeout", type=float, default=4.0)
    args = p.parse_args(argv)
    # {hostname}: the pod's name (a StatefulSet pod's host name). The kubelet expands an exec
    # probe's $(VAR) from literal env values only, so $(POD_NAME) (a fieldRef) would be empty.
    args.keystore = args.keystore.replace("{hostname}", socket.gethostname())
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False
    where = f"127.0.0.1:{args.port}{args.path[0]}"
    try:
        context.load_verify_locations(args.truststore)
        context.load_cert_chain(args.keystore)
        for path in args.path:
            where = f"127.0.0.1:{args.port}{path}"
            status = _status(context, args.port, path, args.timeout)
            if status != 404:
                break
    except (OSError, http.client.HTTPException) as e:
        print(f"{where}: {e}", file=sys.stderr)
        return 1
    if status >= 400:
        print(f"{where}: HTTP {status}", file=sys.stderr)
        return 1
    return 0
