#!/usr/bin/env bash
# Karapace (PyPI `karapace`), whose REST proxy tests/gateway/test_karapace_parity.py and
# bench/gateway.py compare with Odradek's gateway, in its own venv under the git-ignored
# .cache/karapace/ (its pins clash with ours). Idempotent: a second call is free. Exits 1 when
# the package index has no `karapace` (PyPI answered 404 for it on 2026-11-22, again later that
# day; building Aiven's source failed too, see docs/gateway.md): the parity test and the
# benchmark's Karapace column then skip, saying so. KARAPACE_REQUIREMENT=/path/to/karapace.whl
# KARAPACE_PYTHON=3.12 installs a wheel built elsewhere.
#
#   scripts/karapace.sh          # prints the venv's python
set -euo pipefail
cd "$(dirname "$0")/.."
REQUIREMENT=${KARAPACE_REQUIREMENT:-karapace}
venv=.cache/karapace/venv
if [ ! -f "$venv/stamp" ]; then
  rm -rf "$venv"
  UV_PYTHON_DOWNLOADS=never uv venv -q ${KARAPACE_PYTHON:+--python "$KARAPACE_PYTHON"} "$venv" >&2
  uv pip install -q --python "$venv/bin/python" "$REQUIREMENT" >&2
  "$venv/bin/python" -c 'import karapace.kafka_rest_apis' >&2
  touch "$venv/stamp"
fi
echo "$PWD/$venv/bin/python"
