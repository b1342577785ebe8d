"""``odradek gateway``: run the HTTP gateway with uvicorn (uvloop, httptools)."""

from __future__ import annotations

import gc
import sys

import uvicorn

from odradek import logs
from odradek.gateway.app import create_app
from odradek.gateway.settings import from_args


def main(argv: list[str] | None = None) -> int:
    settings, args = from_args(argv)
    logs.configure("gateway", args.log_level, args.log_format)
    # Produce requests allocate a few objects per record; freezing the start-up heap and a larger
    # first generation keep the cyclic GC from scanning it every few hundred records.
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, loop="uvloop", http="httptools",
                log_config=None, access_log=False, timeout_graceful_shutdown=20,
                ssl_certfile=settings.ssl_certfile or None, ssl_keyfile=settings.ssl_keyfile or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
