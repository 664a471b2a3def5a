#!/usr/bin/env bash
# samba-server under wrk on loopback, beside ONNX Runtime behind a minimal
# Python HTTP server, in one run on this machine:
#
#   bash bench/server/run_server_bench.sh [BUILD_DIR] [OUT_DIR]
#
# The model: the ResFFN classifier (784 features, hidden 1024, 10 classes),
# compiled for inference at batch 32 (examples/server/resffn_pef). Every
# request is one sample as JSON (784 float32 values). For concurrency 1, 8
# and 32 (wrk connections), each for DURATION seconds (default 10) after a
# warm-up: samba-server with dynamic batching (--max-batch-delay-us, default
# 500), samba-server with --no-batching, and ONNX Runtime (1.x from the
# peers' venv, bench/.venv, made by bench/peers/run_peers.sh; PYTHON
# overrides it). Writes OUT_DIR/server_bench.md (default
# BUILD_DIR/bench-server), the table for docs/PERFORMANCE.md, with the load
# average at start and end: the machine may be shared.
set -euo pipefail

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
out=${2:-$build/bench-server}
duration=${DURATION:-10}
delay_us=${MAX_BATCH_DELAY_US:-500}
python=${PYTHON:-$root/bench/.venv/bin/python}
mkdir -p "$out"
command -v wrk >/dev/null || { echo "run_server_bench: wrk is not installed (Debian: wrk)" >&2; exit 1; }

cmake --build "$build" --target samba-server resffn_pef >/dev/null
server_bin=$build/examples/server/samba-server
"$build/examples/server/resffn_pef" --out "$out/resffn.pef" --batch 32 --features 784 --hidden 1024 >/dev/null

# One sample as JSON, and the wrk script that posts it.
/usr/bin/python3 - "$out/request.json" <<'PY'
import json, random, sys
random.seed(7)
data = [round(random.uniform(-1, 1), 6) for _ in range(784)]
json.dump({"inputs": {"image": {"shape": [784], "dtype": "float32", "data": data}}}, open(sys.argv[1], "w"))
PY
cat >"$out/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open("$out/request.json", "rb")
wrk.body = f:read("*a")
f:close()
LUA

pid=""
stop_server() {
  if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=""; fi
}
trap stop_server EXIT

# Starts "$@" with --port-file $out/port appended; sets $pid and $port.
start_server() {
  rm -f "$out/port"
  "$@" --port-file "$out/port" >"$out/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do [ -s "$out/port" ] && break; sleep 0.1; done
  [ -s "$out/port" ] || { echo "run_server_bench: the server did not start:" >&2; cat "$out/server.log" >&2; exit 1; }
  port=$(cat "$out/port")
}

# wrk at concurrency $1 for $2 seconds; prints "req/s p50_ms p99_ms".
measure() {
  local c=$1 secs=$2 threads=$(( $1 < 2 ? 1 : 2 ))
  wrk -t "$threads" -c "$c" -d "${secs}s" --latency -s "$out/post.lua" \
    "http://127.0.0.1:$port/v1/models/resffn/infer" >"$out/wrk.txt"
  awk '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    /Requests\/sec/ { rps = $2 }
    $1 == "50.000%" || $1 == "50%" { p50 = ms($2) }
    $1 == "99.000%" || $1 == "99%" { p99 = ms($2) }
    /Non-2xx/ { bad = $NF }
    END { if (bad) { print "non-2xx answers: " bad > "/dev/stderr"; exit 1 } printf "%.0f %.2f %.2f\n", rps, p50, p99 }
  ' "$out/wrk.txt"
}

declare -A result
run_all() {  # label, then the server command
  local label=$1; shift
  start_server "$@"
  measure 8 2 >/dev/null  # warm-up
  for c in 1 8 32; do
    result[$label,$c]=$(measure "$c" "$duration")
    echo "$label c=$c: ${result[$label,$c]}"
  done
  stop_server
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
run_all batching "$server_bin" --model "resffn=$out/resffn.pef" --port 0 --max-batch-delay-us "$delay_us"
run_all no_batching "$server_bin" --model "resffn=$out/resffn.pef" --port 0 --no-batching
if "$python" -c 'import onnxruntime, torch' 2>/dev/null; then
  run_all ort "$python" "$root/bench/server/ort_server.py" --hidden 1024 --threads 2
else
  echo "run_server_bench: $python has no onnxruntime; run bench/peers/run_peers.sh first (or set PYTHON)" >&2
fi
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

{
  echo "samba-server on loopback: ResFFN (784 -> 1024 -> 1024 -> 10) inference PEF at batch 32, one JSON sample per request,"
  echo "wrk ${duration} s per row; $(nproc) CPUs; $(date -u '+%Y-%m-%d %H:%M UTC'); commit $(git -C "$root" rev-parse --short HEAD);"
  echo "load average at start $load_start, at end $load_end. Command: bash bench/server/run_server_bench.sh"
  echo
  echo "| concurrency | batching (max delay ${delay_us} us): req/s | p50 ms | p99 ms | no batching: req/s | p50 ms | p99 ms | ONNX Runtime (Python HTTP): req/s | p50 ms | p99 ms |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  for c in 1 8 32; do
    row="| $c"
    for label in batching no_batching ort; do
      read -r rps p50 p99 <<<"${result[$label,$c]:-- - -}"
      row="$row | $rps | $p50 | $p99"
    done
    echo "$row |"
  done
  b=${result[batching,32]:-}; n=${result[no_batching,32]:-}
  if [ -n "$b" ] && [ -n "$n" ]; then
    read -r brps bp50 bp99 <<<"$b"; read -r nrps _ _ <<<"$n"
    echo
    awk -v b="$brps" -v n="$nrps" -v p50="$bp50" -v p99="$bp99" 'BEGIN {
      printf "At concurrency 32: batching gives %.1fx the throughput without (goal >= 3x); its p99 is %.2fx its p50 (goal < 2x).\n", b / n, p99 / p50 }'
  fi
} >"$out/server_bench.md"
cat "$out/server_bench.md"
