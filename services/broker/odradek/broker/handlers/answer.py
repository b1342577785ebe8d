"""What a handler gives back: its response and the throttle time its quotas decided (KIP-219).

A handler returns a kio response entity, encoded pieces (Fetch, with file regions), None when
no response is due, or an ``Answer`` wrapping one of those with ``throttle_ms`` > 0 when a
quota it recorded against (produce or fetch bytes, the request time Fetch records early)
throttles the client. The dispatcher raises the response's ``throttle_time`` to the largest
throttle of the request and hands that throttle to the connection, which mutes itself for it
once the response is written: nothing travels through mutable per-connection state.
"""

from __future__ import annotations

import datetime
from typing import NamedTuple

ZERO = datetime.timedelta(0)   # a response's throttle_time when nothing throttles (the dispatcher raises it)


class Answer(NamedTuple):   # one per request: a NamedTuple is built in a third of a frozen dataclass's time
    body: object
    throttle_ms: int = 0
