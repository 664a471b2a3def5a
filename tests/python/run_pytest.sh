#!/usr/bin/env bash
# Runs the Python binding's pytest suite against a built libsamba.so.
# Usage: run_pytest.sh LIBSAMBA_PATH [pytest args]. Exit 77 (skipped) when the
# interpreter lacks pytest or numpy (make setup installs them).
set -euo pipefail
lib=$(realpath "$1")
shift
root="$(cd "$(dirname "$0")/../.." && pwd)"
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
if ! "$py" -c "import pytest, numpy" 2>/dev/null; then
  echo "skipped: $py has no pytest or numpy (make setup installs python3-pytest and python3-numpy)"
  exit 77
fi
export SAMBA_LIBRARY="$lib" PYTHONPATH="$root/bindings/python${PYTHONPATH:+:$PYTHONPATH}"
cd "$(mktemp -d)"
exec "$py" -m pytest -q -p no:cacheprovider "$root/tests/python" "$@"
