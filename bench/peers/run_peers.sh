#!/usr/bin/env bash
# Samba against PyTorch, JAX and ONNX Runtime on the same model in one run.
# Creates bench/.venv (Debian's python3 with its python3-torch and numpy,
# plus jax and onnxruntime from PyPI) on first use, builds the benchmarks,
# and prints the table of ratios (also written to BUILD/bench-results/peers.md).
# Usage: bash bench/peers/run_peers.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
venv=bench/.venv
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
"$venv/bin/python" -c "import jax, onnxruntime, onnx" 2>/dev/null ||
  "$venv/bin/pip" install -q jax jaxlib onnxruntime onnx
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSAMBA_BUILD_BENCH=ON >/dev/null
cmake --build "$build" -j "$(nproc)" --target runtime_bench machine_bench
"$venv/bin/python" bench/peers/peers.py --build "$build" --out "$build/bench-results/peers.md"
