#!/usr/bin/env bash
# ONNX import, compile and inference beside ONNX Runtime (bench/onnx/onnx_bench.py):
#
#   bash bench/onnx/run_onnx_bench.sh [BUILD_DIR] [onnx_bench.py args]
#
# Uses the peers' venv, bench/.venv (bench/peers/run_peers.sh makes it with
# every peer); when it is missing this makes it with only what this bench
# needs, at the versions of bench/peers/requirements.txt (onnx, onnxruntime,
# numpy), so run_peers.sh later completes the same venv.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(realpath "${1:-$root/build}")
shift || true
cd "$root"
venv=bench/.venv
req=bench/peers/requirements.txt
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
if ! "$venv/bin/python" -c 'import onnxruntime, onnx' 2>/dev/null; then
  "$venv/bin/pip" install -q --disable-pip-version-check $(grep -E '^(numpy|onnx|onnxruntime)==' "$req")
fi
cmake --build "$build" --target samba >/dev/null
SAMBA_LIBRARY="$build/libsamba.so" PYTHONPATH="$root/bindings/python" \
  "$venv/bin/python" bench/onnx/onnx_bench.py "$@"
