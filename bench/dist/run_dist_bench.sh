#!/usr/bin/env bash
# `make bench-dist`: the data-parallel benchmark at 2 ranks on this machine
# (loopback) and the scaling model calibrated on it (docs/DISTRIBUTED.md).
# Usage: run_dist_bench.sh BUILD_DIR [OUT_DIR]. Compiles the ResFFNLogReg
# example (hidden 128 and 1024) for 2 data-parallel replicas with the Python
# app, runs build/bench/dist/dist_bench on each under mpirun, then
# bench/dist/scaling_model.py on the figures (table, JSON, plot).
set -euo pipefail
build=$(realpath "$1")
out=$(realpath -m "${2:-$build/bench-dist}")
root="$(cd "$(dirname "$0")/../.." && pwd)"
ranks=${DIST_BENCH_RANKS:-2}
batch=${DIST_BENCH_BATCH:-64}
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
mkdir -p "$out"
export SAMBA_LIBRARY="$build/libsamba.so" PYTHONPATH="$root/bindings/python${PYTHONPATH:+:$PYTHONPATH}"
# Yield in MPI's progress loops: the ranks share this machine's cores with each
# other and with Samba's threads, and a rank spinning in a blocking
# collective would keep its peer off the core it waits for.
mpirun_args=(--oversubscribe -np "$ranks" --bind-to none --mca mpi_yield_when_idle 1)
# Each rank's session gets its share of the cores (at least one), as one
# replica per device would: ranks that each start a thread per core would
# oversubscribe the machine and measure the scheduler.
threads=${DIST_BENCH_THREADS:-$(( $(nproc) / ranks > 0 ? $(nproc) / ranks : 1 ))}
[ "$(id -u)" = 0 ] && mpirun_args+=(--allow-run-as-root)
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for hidden in 128 1024; do
  pef="$out/resffn_h$hidden/resffn_h$hidden.pef"
  "$py" "$root/examples/python/resffn_logreg.py" compile -b "$batch" --hidden-size "$hidden" \
    --data-parallel -ws "$ranks" -p "$pef" > /dev/null
  timeout 900 mpirun "${mpirun_args[@]}" "$build/bench/dist/dist_bench" --pef "$pef" --batch "$batch" \
    --features 64 --classes 10 --model "ResFFN h$hidden" --iterations "${DIST_BENCH_ITERATIONS:-30}" \
    --threads "$threads" \
    --out "$out/resffn_h$hidden.json"
done
"$py" "$root/bench/dist/scaling_model.py" --calibration "$out"/resffn_h*.json --markdown "$out/scaling.md" \
  --json "$out/scaling.json" --plot "$out/scaling.png"
echo "figures in $out"
