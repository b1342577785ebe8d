"""Probes for ``bench.round_trip_timeline``, installed in each broker as its ``sitecustomize``
(a directory on the brokers' PYTHONPATH), so that the broker's own code stays as it ships.

In a broker process (``python -m odradek.broker``) with ``ODRADEK_TIMELINE`` set to a file
prefix, a few methods on the single-record path are wrapped to note a monotonic timestamp
(CLOCK_MONOTONIC: one clock for every process of the machine) and an event name:

- a Produce or Fetch frame read whole (``<API> in``), its handling started and done
  (``<API> start``, ``<API> handled``), its answer handed to the socket (``<API> answer``);
- the leader's append (``append``, ``appended``), the parked fetches woken (``fetches woken``)
  and acks=all produces answered by the high watermark (``produce acked``);
- on a follower: its fetch sent (``fetch out``), the answer's bytes read (``fetch answer in``),
  the append (``follower append``, ``follower appended``).

With ``ODRADEK_TIMELINE_DETAIL=1`` (``round_trip_timeline --detail``), steps inside those: an
inter-broker answer decoded (``answer decode``, ``answer decoded``: the time before the first is
the fetcher's task waking), an append's batches validated (``validated``: what follows it up to
``appended`` is the write and the indexes), the next fetch's bytes about to be built (``fetch
encode``: what precedes it is the fetcher's bookkeeping).

A what-if (``ODRADEK_TIMELINE_DELAY``, ``<event>:<µs>``): each time a broker notes that event, it
then spins that long, as if the step before it took that much more CPU; the record's latency
then says how much of a step's time reaches it (``round_trip_timeline --delay``).

Notes are kept only between SIGUSR1 and SIGUSR2 (the measured round trips, not the warm-up;
SIGUSR1 is acknowledged with an empty ``<prefix>-<pid>.on``); SIGUSR2 writes them to
``<prefix>.<pid>`` as ``<ns> <event>`` lines. Each wrapper costs about a microsecond, which
the timeline includes (the tool says so). Self-contained: a broker's path holds the project's
packages, not ``bench``.
"""

from __future__ import annotations

import os
import signal
import sys
import time

_PREFIX = os.environ.get("ODRADEK_TIMELINE")
_APIS = {0: "Produce", 1: "Fetch"}
_notes: list[tuple[int, str]] = []
_on = False
_last_api = [None]     # the API whose answer the connection writes next (set when its handling ends)
_DELAYED, _, _delay_us = os.environ.get("ODRADEK_TIMELINE_DELAY", "").rpartition(":")
_DELAY_NS = int(float(_delay_us) * 1000) if _DELAYED else 0
_DETAIL = os.environ.get("ODRADEK_TIMELINE_DETAIL") == "1"


def _note(event: str) -> None:
    if _on:
        now = time.monotonic_ns()
        _notes.append((now, event))
        if event == _DELAYED:
            while time.monotonic_ns() < now + _DELAY_NS:   # CPU, not a sleep: a step that costs more
                pass


def _start(*_) -> None:
    global _on
    _notes.clear()
    _on = True
    open(f"{_PREFIX}-{os.getpid()}.on", "w").close()   # the bench waits for this before its records


def _stop(*_) -> None:
    global _on
    _on = False
    part = f"{_PREFIX}-{os.getpid()}.part"
    with open(part, "w") as out:
        out.writelines(f"{t} {event}\n" for t, event in _notes)
    os.replace(part, f"{_PREFIX}.{os.getpid()}")   # whole when it appears
    _notes.clear()


def _api(frame) -> str | None:
    return _APIS.get(int.from_bytes(frame[0:2], "big")) if len(frame) >= 2 else None


def _install() -> None:
    from odradek.broker.dispatch import Dispatcher
    from odradek.broker.replication.client import _Frames
    from odradek.broker.replication.purgatory import FetchWakeup, ProducePurgatory
    from odradek.broker.storage.log import Log
    from odradek.protocol.connection import KafkaConnection

    enqueue, write, handle = KafkaConnection._enqueue, KafkaConnection._write, Dispatcher.handle

    def _enqueue(self, frame, pooled):
        api = _api(frame)
        if api:
            _note(f"{api} in")
        return enqueue(self, frame, pooled)

    async def _handle(self, frame, peeked=None):
        api = _api(frame)
        if api:
            _note(f"{api} start")
        try:
            return await handle(self, frame, peeked)
        finally:
            _last_api[0] = api
            if api:
                _note(f"{api} handled")

    async def _write(self, pieces):
        api, _last_api[0] = _last_api[0], None
        if api:
            _note(f"{api} answer")
        return await write(self, pieces)

    KafkaConnection._enqueue, KafkaConnection._write, Dispatcher.handle = _enqueue, _write, _handle
    _around(Log, "append", "append", "appended")
    _around(Log, "append_as_follower", "follower append", "follower appended")
    _before(_Frames, "exchange", "fetch out")
    _before(_Frames, "data_received", "fetch answer in")
    notify, complete = FetchWakeup.notify, ProducePurgatory.complete

    def _notify(self, tp=None, *, appended=False):
        if appended:
            _note("fetches woken")
        return notify(self, tp, appended=appended)

    def _complete(self, *args):
        done = complete(self, *args)
        if done:
            _note("produce acked")
        return done

    FetchWakeup.notify, ProducePurgatory.complete = _notify, _complete
    if _DETAIL:
        _install_detail()


def _install_detail() -> None:
    """The steps inside the follower's pass and the appends (the module doc's ``--detail``)."""
    import odradek.broker.replication.client as client
    import odradek.broker.storage.log as log

    decode, encode, validate = client.decode_response, client.encode_request, log.validate_append

    def decode_response(*args):
        _note("answer decode")
        try:
            return decode(*args)
        finally:
            _note("answer decoded")

    def encode_request(*args):
        _note("fetch encode")
        return encode(*args)

    def validate_append(*args, **kwargs):
        try:
            return validate(*args, **kwargs)
        finally:
            _note("validated")

    client.decode_response, client.encode_request, log.validate_append = decode_response, encode_request, validate_append


def _around(cls, name: str, before: str, after: str) -> None:
    original = getattr(cls, name)

    def wrapper(*args, **kwargs):
        _note(before)
        try:
            return original(*args, **kwargs)
        finally:
            _note(after)
    setattr(cls, name, wrapper)


def _before(cls, name: str, event: str) -> None:
    original = getattr(cls, name)

    def wrapper(*args, **kwargs):
        _note(event)
        return original(*args, **kwargs)
    setattr(cls, name, wrapper)


if _PREFIX and sys.orig_argv[1:3] == ["-m", "odradek.broker"]:
    _install()
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)
