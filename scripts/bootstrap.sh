#!/usr/bin/env bash
# Installs everything Odradek needs on a fresh Debian machine, idempotently:
# uv (Python package manager), Java + ZooKeeper (Debian's package), and the locked Python
# environment in .venv (all extras: tests, benchmarks).
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if [ ! -f /usr/share/java/zookeeper.jar ] || ! command -v java >/dev/null; then
  echo "bootstrap: installing ZooKeeper and Java from Debian's packages"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zookeeper default-jre-headless >/dev/null
fi

if ! command -v uv >/dev/null; then
  echo "bootstrap: installing uv"
  python3 -m pip install --quiet --user uv || python3 -m pip install --quiet uv
  export PATH="$HOME/.local/bin:$PATH"
fi

uv sync --frozen --all-extras --quiet
