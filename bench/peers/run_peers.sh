#!/usr/bin/env bash
# Samba beside its peers, in one run on this machine:
#
#   bash bench/peers/run_peers.sh [--gpt2-only | --no-gpt2] [BUILD_DIR] [OUT_DIR]
#   (or: make bench-peers; make bench-peers PEERS_ARGS=--gpt2-only)
#
# Installs what is missing (Debian: python3-venv, python3-torch, OpenBLAS;
# PyPI, into bench/.venv: jax, jaxlib, onnx, onnxruntime, transformers,
# matplotlib), builds machine_bench, e2e_bench and libsamba in BUILD_DIR
# (default build), then runs, one after another: the machine's limits,
# Samba's end-to-end benchmarks (median of 5 repetitions), their per-kernel
# profile, the peers (bench/peers/peers.py), and GPT-2 on Samba and its
# peers (bench/peers/gpt2.py, through the Python front end). Writes to
# OUT_DIR (default BUILD_DIR/bench-peers): machine.txt, machine.json,
# e2e.json, kernels.json, peers.json, peers.md (the tables for
# docs/PERFORMANCE.md), growth.png, and the profile of Samba's kernels on
# GPT-2 (gpt2_kernels.json and a Perfetto trace per workload). --gpt2-only
# runs only GPT-2; --no-gpt2 leaves GPT-2 out. GPT2_LAYERS=2 in the
# environment makes GPT-2 small, for a quick try.
#
# PyTorch: Debian's python3-torch links the system libblas.so.3, which is
# the slow reference BLAS unless an optimized one is selected; the peers run
# with OpenBLAS (Debian's libopenblas0-pthread) put first on the library
# path, without changing the system's choice.
set -euo pipefail

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
gpt2=all
case "${1:-}" in
  --gpt2-only) gpt2=only; shift ;;
  --no-gpt2) gpt2=none; shift ;;
esac
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build}
out=${2:-$build/bench-peers}
cd "$root"

# ---- system packages -----------------------------------------------------------
need=()
/usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv python3-pip)
/usr/bin/python3 -c 'import torch, numpy' 2>/dev/null || need+=(python3-torch python3-numpy)
openblas=/usr/lib/x86_64-linux-gnu/openblas-pthread
[ -e "$openblas/libblas.so.3" ] || need+=(libopenblas0-pthread)
if [ ${#need[@]} -gt 0 ]; then
  echo "run_peers: installing ${need[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  # Installing OpenBLAS would make it the system's BLAS; keep what was chosen.
  blas_alt=libblas.so.3-x86_64-linux-gnu lapack_alt=liblapack.so.3-x86_64-linux-gnu
  blas_before=$(update-alternatives --query "$blas_alt" 2>/dev/null | sed -n 's/^Value: //p' || true)
  lapack_before=$(update-alternatives --query "$lapack_alt" 2>/dev/null | sed -n 's/^Value: //p' || true)
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  [ -n "$blas_before" ] && $sudo update-alternatives --set "$blas_alt" "$blas_before" >/dev/null
  [ -n "$lapack_before" ] && $sudo update-alternatives --set "$lapack_alt" "$lapack_before" >/dev/null
fi

# ---- the peers' virtual environment ---------------------------------------------
venv=bench/.venv
req=bench/peers/requirements.txt
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
if ! cmp -s "$req" "$venv/.installed-requirements"; then
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"
  cp "$req" "$venv/.installed-requirements"
fi
"$venv/bin/python" -c 'import matplotlib' 2>/dev/null ||
  "$venv/bin/pip" install -q --disable-pip-version-check "matplotlib==3.11.2" ||
  echo "run_peers: matplotlib did not install; the table is written without the plot"

# ---- Samba's benchmarks -----------------------------------------------------------
gen=""; command -v ninja >/dev/null 2>&1 && [ ! -f "$build/CMakeCache.txt" ] && gen="-G Ninja"
# shellcheck disable=SC2086
cmake -S . -B "$build" $gen -DCMAKE_BUILD_TYPE=Release -DSAMBA_BUILD_BENCH=ON >/dev/null
targets=(samba)
[ "$gpt2" = only ] || targets+=(machine_bench e2e_bench)
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

mkdir -p "$out"
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  git diff --quiet HEAD 2>/dev/null || commit="$commit + uncommitted changes"
  echo "commit: $commit"
  echo "nproc: $(nproc)"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  lscpu | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket|CPU max MHz|L1d|L2|L3|Hypervisor)' || true
  echo "vector ISA: $(grep -m1 '^flags' /proc/cpuinfo | grep -o -w -E 'avx[0-9a-z_]*|fma' | sort -u | tr '\n' ' ')"
  free -h | sed -n '1,2p'
} >"$out/machine.txt"
cat "$out/machine.txt"

# The peers' environment; Samba's Python front end (GPT-2) loads the library just built.
peers_env=(env "LD_LIBRARY_PATH=$openblas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" OPENBLAS_NUM_THREADS=2
  OMP_NUM_THREADS=2 "SAMBA_LIBRARY=$(realpath "$build/libsamba.so")"
  "PYTHONPATH=$root/bindings/python${PYTHONPATH:+:$PYTHONPATH}")
if [ "$gpt2" = only ]; then
  echo; echo "==== GPT-2: Samba and its peers ===="
  "${peers_env[@]}" "$venv/bin/python" bench/peers/peers.py --gpt2-only --out "$out"
else
  echo; echo "==== machine limits ===="
  "$build/bench/machine_bench" --benchmark_out="$out/machine.json" --benchmark_out_format=json
  echo; echo "==== Samba end to end (median of 5) ===="
  "$build/bench/e2e_bench" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_out="$out/e2e.json" --benchmark_out_format=json
  echo; echo "==== Samba kernel profile ===="
  "$build/bench/e2e_bench" --kernel_profile="$out/kernels.json"
  echo; echo "==== peers ===="
  no_gpt2=(); [ "$gpt2" = none ] && no_gpt2=(--no-gpt2)
  "${peers_env[@]}" "$venv/bin/python" bench/peers/peers.py --samba "$out/e2e.json" --machine "$out/machine.json" \
    --out "$out" "${no_gpt2[@]}"
fi
if [ "$gpt2" != none ]; then
  echo; echo "==== GPT-2: Samba's kernel profile ===="
  "${peers_env[@]}" "$venv/bin/python" bench/peers/gpt2.py --profile "$out"
fi
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/machine.txt"
echo "results in $out/"
