#!/usr/bin/env bash
# Runs every benchmark binary of a build, one after another in one run, so the
# machine's limits (machine_bench) and the engine's figures share conditions.
#
#   bash bench/run.sh BUILD_DIR [OUT_DIR] [-- extra Google Benchmark flags]
#
# Prints the console tables and writes OUT_DIR/<bench>.json (default
# BUILD_DIR/bench-results), plus OUT_DIR/machine.txt describing the machine.
set -euo pipefail

if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
build=$1
shift
out="$build/bench-results"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  out=$1
  shift
fi
[ $# -gt 0 ] && [ "$1" = "--" ] && shift
extra=("$@")

shopt -s nullglob
benches=("$build"/bench/*_bench)
if [ ${#benches[@]} -eq 0 ]; then
  echo "run.sh: no benchmarks in $build/bench (configure with -DSAMBA_BUILD_BENCH=ON and build)" >&2
  exit 1
fi
# The machine's limits first: every other figure is read against them.
ordered=()
for b in "${benches[@]}"; do [ "$(basename "$b")" = machine_bench ] && ordered+=("$b"); done
for b in "${benches[@]}"; do [ "$(basename "$b")" != machine_bench ] && ordered+=("$b"); done

mkdir -p "$out"
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  src=$(dirname "$0")
  commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
  git -C "$src" diff --quiet HEAD 2>/dev/null || commit="$commit + uncommitted changes"
  echo "commit: $commit"
  echo "nproc: $(nproc)"
  echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  lscpu | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket|L1d|L2|L3)'
  echo "vector ISA: $(grep -m1 '^flags' /proc/cpuinfo | grep -o -w -E 'avx[0-9a-z_]*|fma' | sort -u | tr '\n' ' ')"
  free -h | sed -n '1,2p'
} >"$out/machine.txt"
cat "$out/machine.txt"

status=0
for b in "${ordered[@]}"; do
  name=$(basename "$b")
  echo
  echo "==== $name ===="
  "$b" --benchmark_out="$out/$name.json" --benchmark_out_format=json "${extra[@]}" || {
    echo "run.sh: $name failed" >&2
    status=1
  }
done
echo
echo "JSON results in $out/"
exit $status
