#!/usr/bin/env bash
# Installs everything Odradek needs on a fresh Debian machine, idempotently:
# uv (Python package manager), Java + ZooKeeper and Python 3.11 (Debian's packages), and the
# locked Python environment in .venv (all extras: tests, benchmarks).
#
# The environment's interpreter is Debian's python3.11: built with PGO and LTO, as the image's
# python:3.11-slim is (and the e2e node's images are Debian's). A pyenv build without
# --enable-optimizations runs the brokers' steps ~15% slower, which the side-by-side
# benchmarks would count against Odradek (docs/performance.md, "The interpreter").
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

PYTHON=/usr/bin/python3.11
if [ ! -f /usr/share/java/zookeeper.jar ] || ! command -v java >/dev/null || [ ! -x "$PYTHON" ]; then
  echo "bootstrap: installing ZooKeeper, Java and Python 3.11 from Debian's packages"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zookeeper default-jre-headless \
    python3.11 python3.11-venv >/dev/null
fi

if ! command -v uv >/dev/null; then
  echo "bootstrap: installing uv"
  python3 -m pip install --quiet --user uv || python3 -m pip install --quiet uv
  export PATH="$HOME/.local/bin:$PATH"
fi

uv sync --frozen --all-extras --quiet --python "$PYTHON"
