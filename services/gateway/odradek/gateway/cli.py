"""``odradek gateway``: run the HTTP gateway with uvicorn (uvloop, httptools).

The socket is bound here, before the app is built and uvicorn serves it, so that the port really
bound (``--port 0``: any free one) is the one consumer instances' ``base_uri`` carries and the one
reported (``odradek.ports``) to whoever started the gateway."""

from __future__ import annotations

import dataclasses
import gc
import socket
import sys

import uvicorn
from uvicorn.config import STARTUP_FAILURE

from odradek import logs
from odradek.ports import report as report_ports
from odradek.gateway.app import create_app
from odradek.gateway.settings import from_args


def main(argv: list[str] | None = None) -> int:
    settings, args = from_args(argv)
    logs.configure("gateway", args.log_level, args.log_format)
    # Produce requests allocate a few objects per record; freezing the start-up heap and a larger
    # first generation keep the cyclic GC from scanning it every few hundred records.
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
    sock = _bind(settings.host, settings.port)
    settings = dataclasses.replace(settings, port=sock.getsockname()[1])   # consumer instances' base_uri has it
    report_ports(http=settings.port)
    config = uvicorn.Config(create_app(settings), host=settings.host, port=settings.port, loop="uvloop",
                            http="httptools", log_config=None, access_log=False, timeout_graceful_shutdown=20,
                            ssl_certfile=settings.ssl_certfile or None, ssl_keyfile=settings.ssl_keyfile or None)
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:   # as uvicorn.run: SIGINT re-raised after a graceful shutdown
        pass
    if not server.started:   # as uvicorn.run: a failed start-up is not a success
        sys.exit(STARTUP_FAILURE)
    return 0


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket (uvicorn listens on it), bound before the app is built: its port
    (``--port 0``: any free one) is then known. A taken port raises here (address already in use)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


if __name__ == "__main__":
    sys.exit(main())
