"""The cleaner process's CPU and I/O priority (Linux): yield both to the broker's produce path.

Owns the ``ioprio_set`` system call, which Python does not wrap. Runs once, in the cleaner
process, as its initializer; the priority comes from the broker's configuration
(``log.cleaner.priority``), never from the environment.
"""

from __future__ import annotations

import ctypes
import logging
import os

__all__ = ["CLEANER_PRIORITIES", "lower_priority"]

log = logging.getLogger(__name__)

CLEANER_PRIORITIES = ("idle", "nice10")

_IOPRIO_SET = {"x86_64": 251, "aarch64": 30}      # the ioprio_set syscall number per architecture
_IOPRIO_WHO_PROCESS, _IOPRIO_CLASS_IDLE, _IOPRIO_CLASS_SHIFT = 1, 3, 13


def lower_priority(priority: str = "idle") -> None:
    """Lower the calling process's priority: ``idle`` (the default) or ``nice10``.

    SCHED_IDLE runs the cleaner only on a CPU nothing else wants (a woken broker thread preempts
    it at once; nice 10 still took x1.5-2.3 on produce p99); the I/O class idle does the same for
    the disk. ``nice10`` is the old setting, kept for the bench's A/B.
    """
    if priority not in CLEANER_PRIORITIES:
        raise ValueError(f"cleaner priority {priority!r}: expected one of {', '.join(CLEANER_PRIORITIES)}")
    if priority == "nice10":
        os.nice(10)
        return
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(19)
    _io_priority_idle()


def _io_priority_idle() -> None:
    number = _IOPRIO_SET.get(os.uname().machine)
    if number is None:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, _IOPRIO_WHO_PROCESS, 0, _IOPRIO_CLASS_IDLE << _IOPRIO_CLASS_SHIFT) != 0:
        log.warning("the cleaner keeps its I/O priority: ioprio_set failed (errno %d)", ctypes.get_errno())
