"""``odradek verify``: a Jepsen-style safety check of a running dev cluster.

Producers send unique values with acks=all while a nemesis kills, pauses, cuts off or fills
the disk of brokers, controllers and ZooKeeper; afterwards every partition is read from offset
0 and the checker reports lost, duplicated, reordered, phantom, inconsistent and stale reads,
per kind of fault, and the longest unavailability. ``history`` (the operations log),
``workload`` (producers), ``nemesis`` (one fault at a time), ``faults`` (the kinds),
``diskfull`` (the small disk), ``partition`` (network cuts), ``reader`` (consumer reads),
``checker`` and ``attribution`` (the analysis), ``runner`` (one run) and ``cli`` (the command).
"""

from .checker import Report, check
from .history import History, Op
from .runner import Config, ReplicationUnavailable, RunError, run

__all__ = ["Config", "History", "Op", "Report", "ReplicationUnavailable", "RunError", "check", "run"]
