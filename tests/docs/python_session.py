"""One Python interpreter for the docs' ```python blocks, as a reader pastes them one after
another into one session: a SparkSession a block starts stays up, and the next block's
``SparkSession.builder...getOrCreate()`` gets it instead of a cold JVM (tens of seconds in CI).

Protocol (a line of JSON each way): the runner writes ``{"script", "out", "err"}``; the session
runs the script as ``python script`` would (``__main__``, ``sys.argv``, its directory first on
``sys.path``) with file descriptors 1 and 2 on ``out``/``err`` (so a JVM's or a C library's
output lands there too) and answers ``{"exit": code}`` on the descriptor it was started with
as stdout."""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback


def _run(script: str) -> int:
    sys.argv, sys.path[0] = [script], os.path.dirname(script)
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:  # noqa: BLE001 - reported as ``python script`` would: traceback, exit 1
        traceback.print_exc()
        return 1
    return 0


def _with_output_in(out: str, err: str, script: str) -> int:
    saved = os.dup(1), os.dup(2)
    with open(out, "w") as o, open(err, "w") as e:
        os.dup2(o.fileno(), 1)
        os.dup2(e.fileno(), 2)
        try:
            return _run(script)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def main() -> None:
    requests, answers = os.fdopen(os.dup(0)), os.fdopen(os.dup(1), "w")
    with open(os.devnull) as nothing:  # the blocks read no input (as under the runner's stdin=DEVNULL)
        os.dup2(nothing.fileno(), 0)
    sys.stdin = open(os.devnull)
    for line in requests:
        request = json.loads(line)
        code = _with_output_in(request["out"], request["err"], request["script"])
        answers.write(json.dumps({"exit": code}) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
