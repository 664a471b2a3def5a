#!/usr/bin/env bash
# Runs ONNX's backend test suite through the Samba backend (onnx_backend_test.py).
# Usage: run_onnx_backend_tests.sh LIBSAMBA_PATH WORKDIR [onnx_backend_test.py args]
# The interpreter is /usr/bin/python3 with Debian's python3-onnx 1.12 (the
# Python side of the libonnx the importer links) and numpy, or $SAMBA_PYTHON.
# The suite's data is generated from onnx's own test cases into WORKDIR/data
# (Debian ships it in libonnx-testdata, which is not required). Exit 77
# (skipped) when the interpreter lacks onnx 1.12 or numpy. A full run (no
# extra arguments) also checks docs/onnx.md's tables are those of this run.
set -euo pipefail
lib=$(realpath "$1")
work=$2
shift 2
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
py=${SAMBA_PYTHON:-/usr/bin/python3}
if ! "$py" -c "import numpy, onnx; assert onnx.__version__.startswith('1.12.')" 2>/dev/null; then
  echo "skipped: $py has no onnx 1.12 with numpy (Debian: python3-onnx python3-numpy)"
  exit 77
fi
mkdir -p "$work"
work=$(realpath "$work")
if [ ! -f "$work/data/.complete" ]; then
  rm -rf "$work/data"
  # onnx 1.12's case scripts use numpy aliases numpy 1.24 removed; they meant the builtins.
  "$py" -W ignore -c "
import sys, numpy as np
for alias, builtin in (('float', float), ('int', int), ('bool', bool), ('object', object)):
    if not hasattr(np, alias):
        setattr(np, alias, builtin)
from onnx.backend.test import cmd_tools
sys.argv = ['backend-test-tools', 'generate-data', '-o', sys.argv[1]]
cmd_tools.main()
" "$work/data" >/dev/null
  # The runner also reads the kinds whose data only onnx's repository holds.
  mkdir -p "$work/data/pytorch-converted" "$work/data/pytorch-operator"
  touch "$work/data/.complete"
fi
export SAMBA_LIBRARY="$lib" PYTHONPATH="$root/bindings/python${PYTHONPATH:+:$PYTHONPATH}"
cd "$work"
status=0
"$py" -W ignore "$here/onnx_backend_test.py" "$work/data" --results "$work/results.json" "$@" || status=$?
# docs/onnx.md's tables are written from the run; a stale page fails the test.
if [ "$status" -eq 0 ] && [ "$#" -eq 0 ]; then
  "$py" -W ignore "$here/gen_onnx_op_table.py" "$work/results.json" "$work/data" --check || status=$?
fi
exit "$status"
