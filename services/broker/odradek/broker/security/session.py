"""Who is on the other end of a Kafka connection: the per-connection ``RequestContext``.

One ``RequestContext`` per connection holds the listener it came in on, the client's address
and the principal (``User:ANONYMOUS`` until TLS or SASL says otherwise). The connection's
request loop sets it in the ``REQUEST_CONTEXT`` context variable before each request (each
connection's loop is its own asyncio task, so the variable is per connection); handlers
read it with ``current()`` — Metadata to answer with that listener's endpoints, the SASL
handlers to authenticate, an authorizer to decide.

A SASL session may have a lifetime (``connections.max.reauth.ms``, KIP-368): ``expires`` is
when it ends (monotonic seconds). A client that authenticated with SaslAuthenticate v1 or later
may re-authenticate (a new SaslHandshake): ``previous`` then holds the mechanism and principal
the new exchange must keep.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field

ANONYMOUS = "User:ANONYMOUS"


@dataclass(slots=True)
class RequestContext:
    listener: str
    protocol: str
    client_address: str
    principal: str = ANONYMOUS
    authenticated: bool = True          # False on a SASL listener until SaslAuthenticate succeeds
    mechanism: str | None = None        # chosen by SaslHandshake
    raw_tokens: bool = False            # SaslHandshake v0: tokens follow as bare frames
    exchange: object = field(default=None, repr=False)  # the mechanism's server state
    request_bytes: int = 0              # size of the request being handled (the produce quota counts it)
    can_reauthenticate: bool = False    # a SaslAuthenticate of v1 or later was seen (Kafka's rule)
    lifetime_ms: int = 0                # the session lifetime told to the client (0: none)
    expires: float | None = None        # monotonic end of the SASL session (connections.max.reauth.ms)
    previous: tuple[str, str] | None = None  # (mechanism, principal) while re-authenticating

    @property
    def client_host(self) -> str:
        """The client's IP as Kafka's group member descriptions show it (``InetAddress.toString``:
        "/127.0.0.1"); empty outside a connection."""
        host = self.client_address.rpartition(":")[0]
        return f"/{host}" if host else ""


_DEFAULT = RequestContext("PLAINTEXT", "PLAINTEXT", "")
REQUEST_CONTEXT: contextvars.ContextVar[RequestContext] = contextvars.ContextVar("odradek_request_context")


def current() -> RequestContext:
    """The connection's context; a plain PLAINTEXT one outside a connection (unit tests)."""
    return REQUEST_CONTEXT.get(_DEFAULT)
