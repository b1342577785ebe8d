#!/usr/bin/env bash
# Installs Debian's tmux for the `odradek top` test (tests/observability: a real terminal),
# idempotently. Fails when it cannot, so that `make test` does not hide a skipped test.
set -euo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v tmux >/dev/null; then
  echo "tmux.sh: installing tmux from Debian's packages"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tmux >/dev/null
fi
tmux -V
