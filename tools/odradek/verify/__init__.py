"""``odradek verify``: a Jepsen-style safety check of a running dev cluster.

Producers send unique values with acks=all while a nemesis crashes and restarts partition
leaders, the active controller or random brokers; afterwards every partition is read from
offset 0 and the checker reports lost, duplicated, reordered, phantom and inconsistent records
and the longest unavailability. ``history`` (the operations log), ``workload`` (producers),
``nemesis`` (faults), ``reader`` (consumer reads), ``checker`` (the analysis), ``runner`` (one
run) and ``cli`` (the command).
"""

from .checker import Report, check
from .history import History, Op
from .runner import Config, ReplicationUnavailable, RunError, run

__all__ = ["Config", "History", "Op", "Report", "ReplicationUnavailable", "RunError", "check", "run"]
