#!/usr/bin/env bash
# kcat (librdkafka's command-line client) for the security tests (tests/security/test_kcat.py),
# from Debian's packages; idempotent. Fails when it cannot install it: `make test-tools` then
# fails rather than letting the kcat tests skip.
set -euo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v kcat >/dev/null; then
  echo "kcat.sh: installing kcat from Debian's packages" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null
fi
kcat -V | head -1
