#!/usr/bin/env bash
# The Python environment of the Hugging Face goal tests: a venv over the
# system's interpreter (so it keeps Debian's torch 1.13, numpy and pytest)
# with the PyPI packages of tests/python/requirements-hf.txt.
#
#   bash scripts/setup_python_env.sh [VENV_DIR]      (default: .venv-hf, ignored by git)
#
# Idempotent: it installs again only when the requirements file changed.
# Needs PyPI on its first run; without the network it says so and exits 0,
# and the tests that need the venv are skipped (ctest: python.hf_models).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-$root/.venv-hf}
req=$root/tests/python/requirements-hf.txt
py=/usr/bin/python3

if ! "$py" -c 'import venv, ensurepip, torch' 2>/dev/null; then
  echo "setup_python_env: $py lacks venv/ensurepip or torch (python3-venv, python3-torch); skipping $venv"
  exit 0
fi
if [ -x "$venv/bin/python" ] && cmp -s "$req" "$venv/.installed-requirements"; then
  echo "setup_python_env: $venv is up to date"
  exit 0
fi
[ -x "$venv/bin/python" ] || "$py" -m venv --system-site-packages "$venv"
if ! "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"; then
  echo "setup_python_env: pip could not install $req (no network?); the Hugging Face tests will be skipped" >&2
  exit 0
fi
cp "$req" "$venv/.installed-requirements"
echo "setup_python_env: $venv ready"
