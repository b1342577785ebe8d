"""A server on an event loop run by a thread, stopped from the test's thread."""

from __future__ import annotations

import asyncio
import threading


def stop_server_loop(loop: asyncio.AbstractEventLoop, server: asyncio.AbstractServer, thread: threading.Thread) -> None:
    """Close ``server``, cancel its connections' tasks, stop and close ``loop``."""
    async def shutdown():
        server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    asyncio.run_coroutine_threadsafe(shutdown(), loop).result(5)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()
