#!/usr/bin/env bash
# Debian's chromium and chromium-driver for the console's browser tests (tests/console),
# idempotently. Fails when it cannot install them, so that `make test` does not hide skipped
# browser tests; the tests never download a browser of their own.
set -euo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! [ -x /usr/bin/chromium ] || ! [ -x /usr/bin/chromedriver ]; then
  echo "chromium.sh: installing chromium and chromium-driver from Debian's packages" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    chromium chromium-driver fonts-dejavu-core >/dev/null
fi
/usr/bin/chromium --version
/usr/bin/chromedriver --version
