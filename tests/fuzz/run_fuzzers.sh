#!/usr/bin/env bash
# Runs every libFuzzer target of a SAMBA_FUZZ build for SECONDS each, one
# after the other (`make fuzz-ci`: 45 s each; `make fuzz`: longer),
# starting from the committed seeds (tests/fuzz/corpus/<target>, every file
# of which libFuzzer runs first) and the inputs earlier runs of this build
# kept (BUILD/fuzz/corpus/<target>; new inputs go there, never into the
# repository). Prints per target the executions, the coverage libFuzzer
# counts (cov: edges, ft: features) and, with --coverage, the share of
# instrumented edges reached in each engine folder that reads untrusted
# input. Exits non-zero on any finding; the input that caused it is saved as
# BUILD/fuzz/findings/<target>-crash-<sha1> (add it to the seed corpus once
# fixed).
#
#   [FUZZ_SEED=N] tests/fuzz/run_fuzzers.sh BUILD SECONDS [--coverage] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/../.."

build=${1:?usage: run_fuzzers.sh BUILD SECONDS [--coverage] [TARGET...]}
seconds=${2:?usage: run_fuzzers.sh BUILD SECONDS [--coverage] [TARGET...]}
shift 2
coverage=0
if [ "${1:-}" = "--coverage" ]; then
  coverage=1
  shift
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(pef_fuzz pef_run_fuzz checkpoint_fuzz safetensors_fuzz onnx_import_fuzz)

# Inputs stay small (the seeds are under 20 KB) and every execution fast:
# one taking over 25 s, or a process over 2 GiB, is a finding (a hang or a
# decompression bomb), as is any single allocation over 1 GiB.
options=(-max_len=65536 -timeout=25 -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1)
# FUZZ_SEED=N: libFuzzer's and the PEF mutator's random choices start from N
# (`make fuzz-ci`); unset, libFuzzer draws one and prints it ("Seed: N") in
# the log, so any run can be repeated.
[ -z "${FUZZ_SEED:-}" ] || options+=(-seed="$FUZZ_SEED")
# The RSS limit is meant to catch inputs that make live memory grow, so ASan
# returns freed memory to the OS (allocator_release_to_os_interval_ms) and
# quarantines 64 MB of freed blocks rather than 256: otherwise its allocator
# keeps every size class it ever mapped, and a run over PEFs whose plans ask
# for tens of MB each crossed 2 GiB of RSS with about 200 MB live (measured
# on pef_run_fuzz, seed 1).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1:quarantine_size_mb=64:allocator_release_to_os_interval_ms=500}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Edges reached / instrumented, per folder, from -print_coverage's
# "COVERED_FUNC: hits: H edges: C/T name file:line" and UNCOVERED_FUNC lines.
coverage_by_folder() {
  awk '
    /^(COVERED|UNCOVERED)_FUNC:/ {
      split($5, e, "/"); file = $NF
      if (match(file, /(engine|bindings)\/[a-z_]+\//)) {
        dir = substr(file, RSTART, RLENGTH - 1)
        covered[dir] += ($1 == "COVERED_FUNC:") ? e[1] : 0; total[dir] += e[2]
      }
    }
    END {
      for (d in total)
        if (d ~ /^engine\/(pef|runtime|checkpoint|io)$|^bindings\/c$/)
          printf "    %-20s %6d / %6d edges  %5.1f%%\n", d, covered[d], total[d], total[d] ? 100 * covered[d] / total[d] : 0
    }' | sort
}

failed=0
summary=()
for t in "${targets[@]}"; do
  bin=$build/tests/fuzz/$t
  seeds=tests/fuzz/corpus/$t
  work=$build/fuzz/corpus/$t
  findings=$build/fuzz/findings
  mkdir -p "$work" "$findings"
  log=$build/fuzz/$t.log
  echo "==== $t: ${seconds}s from $(ls "$seeds" | wc -l) seeds and $(ls "$work" | wc -l) kept inputs"
  rc=0
  "$bin" "${options[@]}" -max_total_time="$seconds" -artifact_prefix="$findings/$t-" "$work" "$seeds" \
    >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+' || true)
  if [ $rc -ne 0 ]; then
    failed=1
    tail -60 "$log"
    summary+=("$(printf '%-16s FINDING (exit %d): see %s and %s' "$t" $rc "$log" "$findings")")
    continue
  fi
  summary+=("$(printf '%-16s %8s execs in %ss  %s  corpus %d' "$t" "${runs:-?}" "$seconds" "${last:-cov: ?}" \
    "$(ls "$work" | wc -l)")")
  if [ $coverage -eq 1 ]; then
    "$bin" -runs=0 -print_coverage=1 "$work" "$seeds" 2>&1 | coverage_by_folder >"$build/fuzz/$t.coverage" || true
    summary+=("$(cat "$build/fuzz/$t.coverage")")
  fi
done

echo
echo "==== fuzz summary (cov: edges, ft: features reached; ASan + UBSan)"
for s in "${summary[@]}"; do echo "  $s"; done
exit $failed
