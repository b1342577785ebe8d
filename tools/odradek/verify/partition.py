"""The ``partition`` nemesis' network cuts, inside the dev cluster's own network namespace.

A cluster started with ``odradek dev up --netns`` runs in a namespace of its own
(``odradek.dev.netns``), each broker under a group id of its own. ``isolate(broker)`` adds
two iptables rules to the namespace's OUTPUT chain (everything there is loopback, so OUTPUT
sees every packet): drop every packet the broker's sockets send (``-m owner --gid-owner``),
and drop every packet sent to its listening port. The broker is then cut off from the other
brokers, the controllers and ZooKeeper both ways (and from the workload's clients too: on one
loopback there is no telling them apart). ``heal`` deletes exactly the rules it added; the
namespace's deletion (``dev down``) would drop them anyway. No rule is ever made outside the
cluster's namespace: the run refuses unless it runs inside it.
"""

from __future__ import annotations

import logging

from odradek.dev import netns

log = logging.getLogger("odradek.verify")

COMMENT = "odradek-verify-partition"


class PartitionUnavailable(RuntimeError):
    """The cluster has no network namespace of its own, or this process is not inside it."""


class Partitioner:
    def __init__(self, state: dict) -> None:
        name = state.get("netns")
        if not name:
            raise PartitionUnavailable("the partition nemesis needs a cluster started with "
                                       "`odradek dev up --netns` (a network namespace of its own)")
        if not netns.inside(name):
            raise PartitionUnavailable(f"this process is not inside the cluster's namespace {name}")
        self.netns = name
        self.groups: dict[str, int] = state.get("groups", {})
        self.ports = {f"broker-{b}": int(addr.rsplit(":", 1)[1]) for b, addr in state.get("brokers", {}).items()}
        self.rules: list[list[str]] = []

    def isolate(self, broker: str) -> None:
        gid, port = self.groups.get(broker), self.ports.get(broker)
        if gid is None or port is None:
            raise PartitionUnavailable(f"{broker} has no group id or port of its own in the cluster state")
        for rule in (["OUTPUT", "-m", "owner", "--gid-owner", str(gid)],
                     ["OUTPUT", "-p", "tcp", "--dport", str(port)]):
            rule = [*rule, "-m", "comment", "--comment", COMMENT, "-j", "DROP"]
            netns.iptables("-I", *rule)
            self.rules.append(rule)
        log.info("partition: %s cut off in %s (gid %d, port %d)", broker, self.netns, gid, port)

    def heal(self) -> None:
        while self.rules:
            netns.iptables("-D", *self.rules.pop())
