"""The docs runner: every fenced code block of README.md and docs/*.md runs, as pasted, against
one dev cluster, so a README that drifts from the code fails CI.

- ```python blocks run as scripts, one after another in one interpreter (python_session.py), as
  pasted into one Python session: a SparkSession a block starts serves the next block's
  ``getOrCreate()`` (a cold Spark start is tens of seconds of CI); ```sh blocks run in bash with ``set -euo pipefail``, line
  after line in one shell (an ``export`` carries to the next line), and the failing line is named.
- A block that cannot run here says why on the line before its fence:
  ``<!-- not-run: reason -->`` (Kubernetes, benchmarks of many minutes, synopses with
  placeholders). Any other block must be sh or python.
- Blocks run in document order from a scratch directory holding the cluster's ``var/dev``,
  with ``.venv``, ``examples``, ``scripts`` and ``bench`` (``scripts/kafka.sh run``: Kafka's own
  tools) linked from the checkout, as a reader's shell after ``make up``.
- Spark's JVMs (spark-submit in a block, the session's SparkSession) start with the tests'
  Spark defaults (``tests/support/spark.SPARK_DEFAULTS`` in ``SPARK_CONF_DIR``: C1 only, no UI),
  a third off each start; the commands are the docs' own.
- The docs name the default addresses (``127.0.0.1:9092``, the gateway on ``:8080``); the
  runner swaps them for the cluster's actual ones, which are free ports on a shared CI machine.
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import time
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.spark import spark_env

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\S*)\s*$")
NOT_RUN = re.compile(r"^<!--\s*not-run:(.*?)-->\s*$")
LANGUAGES = {"sh": "shell", "bash": "shell", "python": "python"}
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_GATEWAYS = ("http://127.0.0.1:8080", "http://localhost:8080", "localhost:8080")
BLOCK_TIMEOUT_S = 600
SHELL_PRELUDE = ("set -euo pipefail\n"
                 "trap 'echo \"docs runner: this line failed: $BASH_COMMAND\" >&2' ERR\n")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int           # the opening fence's line (1-based)
    language: str
    text: str
    not_run: str | None  # the marker's reason, if any

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def fenced_blocks(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```"), None)
        assert end is not None, f"{path}:{i + 1}: a fence that is never closed"
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = NOT_RUN.match(before.strip())
        blocks.append(Block(path, i + 1, opening.group(1), "\n".join(lines[i + 1:end]) + "\n",
                            marker.group(1).strip() if marker else None))
        i = end + 1
    return blocks


ALL_BLOCKS = [b for doc in DOCUMENTS for b in fenced_blocks(doc)]
RUNNABLE = [b for b in ALL_BLOCKS if b.not_run is None]


def test_every_block_runs_or_says_why_not():
    problems = [f"{b.where}: a ```{b.language or '(no language)'} block: make it sh or python, or mark it "
                "<!-- not-run: reason -->" for b in RUNNABLE if b.language not in LANGUAGES]
    problems += [f"{b.where}: a not-run marker without a reason" for b in ALL_BLOCKS if b.not_run == ""]
    assert not problems, "\n".join(problems)
    assert any(b.path.name == "README.md" and b.language == "python" for b in RUNNABLE)


@pytest.fixture(scope="module")
def workdir(docs_cluster) -> Path:
    """The scratch directory holding ``var/dev``, as a checkout would (``.cache/kafka`` is found
    through ``bench``'s resolved path)."""
    work = docs_cluster.data_dir.parent.parent
    for name, target in ((".venv", Path(sys.prefix)), ("examples", ROOT / "examples"),
                         ("scripts", ROOT / "scripts"), ("bench", ROOT / "bench")):
        if not (work / name).exists():
            (work / name).symlink_to(target)
    return work


def _block_env(workdir: Path) -> dict[str, str]:
    return {**os.environ, **spark_env(workdir),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


@pytest.fixture(scope="module")
def python_session(workdir: Path):
    """The interpreter the ```python blocks are pasted into; its own output (the JVM a block
    starts logs there after that block) is in ``python-session.log``."""
    log = (workdir / "python-session.log").open("w")
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("python_session.py"))], cwd=workdir,
                            env=_block_env(workdir), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                            text=True)
    try:
        yield proc
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _run_in_session(session: subprocess.Popen, script: Path) -> subprocess.CompletedProcess:
    """The script run in the session, as ``subprocess.run`` would report it; the session is
    killed (and the block fails) after BLOCK_TIMEOUT_S."""
    out, err = script.with_suffix(".out"), script.with_suffix(".err")
    session.stdin.write(json.dumps({"script": str(script), "out": str(out), "err": str(err)}) + "\n")
    session.stdin.flush()
    deadline = time.monotonic() + BLOCK_TIMEOUT_S
    while not select.select([session.stdout], [], [], max(0.0, deadline - time.monotonic()))[0]:
        if time.monotonic() >= deadline:
            session.kill()
            raise subprocess.TimeoutExpired([str(script)], BLOCK_TIMEOUT_S)
    answer = session.stdout.readline()
    assert answer, f"the python session exited while running {script} (exit {session.wait()})"
    return subprocess.CompletedProcess([str(script)], json.loads(answer)["exit"], out.read_text(), err.read_text())


def localised(text: str, cluster) -> str:
    """The docs' default addresses replaced by the cluster's own."""
    gateway = cluster.gateway.removeprefix("http://")
    text = text.replace(DEFAULT_BOOTSTRAP, cluster.bootstrap)
    for default in DEFAULT_GATEWAYS:
        text = text.replace(default, ("http://" if default.startswith("http") else "") + gateway)
    return text


@pytest.mark.parametrize("block", [b for b in RUNNABLE if b.language in LANGUAGES], ids=lambda b: b.where)
def test_block_runs_as_pasted(block: Block, docs_cluster, workdir: Path, request):
    text = localised(block.text, docs_cluster)
    if LANGUAGES[block.language] == "python":
        script = workdir / f"block-{block.path.stem}-{block.line}.py"
        script.write_text(text)
        proc = _run_in_session(request.getfixturevalue("python_session"), script)
    else:
        proc = subprocess.run(["bash", "-c", SHELL_PRELUDE + text], cwd=workdir, env=_block_env(workdir),
                              capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, (f"{block.where} failed (exit {proc.returncode}):\n{text}\n"
                                  f"--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-5000:]}")
