"""Waiting on a condition with a deadline: the one polling loop of the tooling, tests, benches and e2e.

``wait_until(condition, timeout, what)`` calls ``condition()`` every ``interval`` seconds until
it returns something truthy, and returns that. Exceptions of the ``retry_on`` types count as
"not yet" (the last one is named in the timeout message); any other exception ends the wait at
once, which is how callers fail fast, e.g. when a process they wait on has exited.
"""

from __future__ import annotations

import time
from typing import Any, Callable


def wait_until(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.05,
               retry_on: tuple[type[BaseException], ...] = (Exception,)) -> Any:
    """The first truthy ``condition()``; ``TimeoutError`` naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            result = condition()
            if result:
                return result
        except retry_on as e:  # reported at the deadline
            last = e
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}"
                               + (f" (last error: {last!r})" if last else ""))
        time.sleep(interval)
