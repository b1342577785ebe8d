"""The control plane's protocol version: what a broker or controller of this release may ask of
one of another release while a cluster rolls (Kafka's ``inter.broker.protocol.version``
discipline; docs/control-plane.md, "Versions", and the upgrade procedure in docs/kubernetes.md).

A version is a whole number, raised by a release that changes the control-plane contract or a
znode another process reads (the package version says nothing about that: most releases keep
the contract). Every control-plane request and answer carries its sender's version in the
``Odradek-Protocol`` header; none means 1, the releases before the header.

- 1: every route and znode up to the release before this one.
- 2: the header; a broker's ``READY`` route; the controller's ``*MAINTENANCE`` routes and their
  ``/admin/maintenance`` znodes, which a controller of version 1 does not read (it would elect
  a broker in maintenance), so enabling maintenance needs ``inter.broker.protocol.version`` 2.

A process of this release talks to one of the previous release and to its own (``PREVIOUS`` ..
``CURRENT``); a request from a newer version than it knows is refused with UNSUPPORTED_VERSION,
a sign that the other side's ``inter.broker.protocol.version`` was raised before this process
was upgraded. A process announces (and uses) ``inter.broker.protocol.version``, not its
``CURRENT``: kept at the previous release's version while the cluster rolls, raised once every
broker and controller runs this release. Pure: no I/O.
"""

from __future__ import annotations

from typing import Mapping

from odradek.errors import ErrorCode, KafkaError

CURRENT = 2
PREVIOUS = 1
HEADER = "Odradek-Protocol"
MAINTENANCE = 2  # the version that reads /admin/maintenance


def parse(value: str) -> int:
    """A configured ``inter.broker.protocol.version``: one of the versions this release speaks."""
    version = int(value)
    if not PREVIOUS <= version <= CURRENT:
        raise ValueError(f"must be between {PREVIOUS} (the previous release) and {CURRENT} (this one)")
    return version


def of(headers: Mapping[str, str]) -> int:
    """The sender's version from a request's or answer's headers (none: 1)."""
    value = headers.get(HEADER)
    try:
        return int(value) if value is not None else 1
    except ValueError:
        raise KafkaError(ErrorCode.invalid_request, f"{HEADER} must be a whole number, not {value!r}") from None


def check_sender(version: int) -> None:
    """Refuse a sender newer than this release: it uses what this process does not understand."""
    if version > CURRENT:
        raise KafkaError(ErrorCode.unsupported_version,
                         f"control-plane protocol {version} is newer than this process's {CURRENT}: keep "
                         f"inter.broker.protocol.version at {CURRENT} until every broker and controller is upgraded")


def usable(configured: int, peer: int) -> int:
    """What to use with a peer: the lower of our configured version and the one it announced."""
    return min(configured, peer)


def require(configured: int, needed: int, what: str) -> None:
    """Refuse ``what`` while ``inter.broker.protocol.version`` is below the version it needs."""
    if configured < needed:
        raise KafkaError(ErrorCode.unsupported_version,
                         f"{what} needs inter.broker.protocol.version {needed} (it is {configured}): raise it once "
                         f"every broker and controller runs a release that speaks {needed}")
