#!/usr/bin/env bash
# Installs Debian's `prometheus` package (the server and `promtool`) for the observability
# acceptance tests (tests/observability), idempotently. Fails when it cannot: a test that
# skipped instead would hide the failure under `make test`.
set -euo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
  echo "prometheus.sh: installing Prometheus from Debian's packages"
  as_root apt-get update -qq
  # --no-install-recommends: only the server and promtool, not the node exporter.
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  # Debian starts the packaged service where systemd runs; the tests start their own server.
  (command -v systemctl >/dev/null && as_root systemctl disable --now prometheus 2>/dev/null) || true
fi
prometheus --version 2>&1 | head -1
