#!/usr/bin/env bash
# The package as a user gets it: builds the wheel with pyproject.toml's
# backend, installs it into a fresh virtual environment (system site packages
# visible, for torch and numpy) and trains the seed's app from it in a
# directory outside the source tree, with no PYTHONPATH or SAMBA_LIBRARY, so
# only the installed package can be imported.
# Usage: wheel_test.sh CMAKE_BUILD_DIR WORK_DIR. CMAKE_BUILD_DIR is kept
# between runs, so a later run rebuilds only what changed. Exit 77 (skipped)
# when the build requirements cannot be installed (no network, no pip cache).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cmake_dir=$(realpath -m "$1")
work=$(realpath -m "$2")
py=/usr/bin/python3
mkdir -p "$work"
unset PYTHONPATH SAMBA_LIBRARY

# The build environment, as pip's build isolation makes it, but kept.
if [ ! -x "$work/build-venv/bin/python" ]; then
  "$py" -m venv "$work/build-venv"
fi
mapfile -t requires < <("$py" -c "import tomllib, sys
print('\n'.join(tomllib.load(open(sys.argv[1], 'rb'))['build-system']['requires']))" "$root/pyproject.toml")
if ! "$work/build-venv/bin/pip" install -q "${requires[@]}"; then
  echo "skipped: cannot install the build requirements (${requires[*]}) from PyPI"
  exit 77
fi
rm -rf "$work/dist"
"$work/build-venv/bin/pip" wheel -q --no-build-isolation --no-deps -w "$work/dist" \
  --config-settings=build-dir="$cmake_dir" "$root"
wheel=$(ls "$work"/dist/sambaflow-*.whl)
echo "built $(basename "$wheel")"
# The wheel holds the package and the library, nothing else.
"$py" - "$wheel" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
assert "sambaflow/samba/libsamba.so.0" in names, names
assert "sambaflow/samba/py.typed" in names and "sambaflow/samba/__init__.py" in names, names
stray = [n for n in names if not n.startswith(("sambaflow/", "sambaflow-"))]
assert not stray, stray
PY

rm -rf "$work/venv"
"$py" -m venv --system-site-packages "$work/venv"
# --no-index: nothing comes from PyPI at install or run time.
"$work/venv/bin/pip" install -q --no-index "$wheel"

app=$(mktemp -d)
trap 'rm -rf "$app"' EXIT
cp "$root/examples/python/resffn_logreg.py" "$root/examples/python/digits.py" "$app/"
cd "$app"
"$work/venv/bin/python" - "$work/venv" <<'PY'
import inspect, sys
import sambaflow.samba as samba
from sambaflow.samba import _lib  # noqa: F401 - the module, for where the library came from
lib_module = sys.modules["sambaflow.samba._lib"]
assert samba.__file__.startswith(sys.argv[1]), samba.__file__
assert lib_module.path.startswith(sys.argv[1]), lib_module.path
assert "(*args, **kwargs)" not in str(inspect.signature(samba.linear))
print("sambaflow.samba", samba.__version__, "from", samba.__file__, "with", lib_module.path)
PY
"$work/venv/bin/python" resffn_logreg.py compile -b 64 -p "$app/resffn.pef"
"$work/venv/bin/python" resffn_logreg.py run -b 64 -p "$app/resffn.pef" --data "$root/examples/data/digits.csv.gz" \
  --min-accuracy 0.95
