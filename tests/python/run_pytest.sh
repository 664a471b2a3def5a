#!/usr/bin/env bash
# Runs the Python binding's pytest suite against a built libsamba.so.
# Usage: run_pytest.sh LIBSAMBA_PATH [pytest args]. The interpreter is
# /usr/bin/python3, or $SAMBA_PYTHON (the Hugging Face tests run in the venv
# scripts/setup_python_env.sh makes); $SAMBA_PYTEST_TARGET picks the tests
# (default: all of tests/python). Exit 77 (skipped) when the interpreter is
# missing or lacks pytest or numpy (make setup installs them).
set -euo pipefail
lib=$(realpath "$1")
shift
root="$(cd "$(dirname "$0")/../.." && pwd)"
if [ -n "${SAMBA_PYTHON:-}" ]; then
  py=$SAMBA_PYTHON
  if [ ! -x "$py" ]; then
    echo "skipped: no interpreter at $py; make setup (scripts/setup_python_env.sh) creates the venv with transformers"
    exit 77
  fi
else
  py=/usr/bin/python3
  [ -x "$py" ] || py=$(command -v python3)
fi
if ! "$py" -c "import pytest, numpy" 2>/dev/null; then
  echo "skipped: $py has no pytest or numpy (make setup installs python3-pytest and python3-numpy)"
  exit 77
fi
export SAMBA_LIBRARY="$lib" PYTHONPATH="$root/bindings/python${PYTHONPATH:+:$PYTHONPATH}"
cd "$(mktemp -d)"
exec "$py" -m pytest -q -p no:cacheprovider "$root/tests/python/${SAMBA_PYTEST_TARGET:-}" "$@"
