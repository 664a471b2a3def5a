#!/usr/bin/env bash
# The C examples' command lines: a bad number, an unknown option or an
# unreadable data file is a message naming it and exit status 2 (usage) or 1
# (the run failed), never a run with a garbage value.
# Usage: command_lines_test.sh RESFFN_LOGREG EAGER_LOGREG LENET_DIGITS DIGITS.csv.gz
set -uo pipefail
resffn=$1 eager=$2 lenet=$3 data=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# expect WANT_RC NEEDLE COMMAND...: runs COMMAND; its exit status must be
# WANT_RC and its stderr must contain NEEDLE.
expect() {
  local want=$1 needle=$2 rc=0
  shift 2
  "$@" >"$work/out" 2>"$work/err" || rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qF -- "$needle" "$work/err"; then
    echo "FAILED: $* exited $rc (expected $want); stderr lacks '$needle':"
    cat "$work/err"
    failures=$((failures + 1))
  else
    echo "ok: $*"
  fi
}

expect 2 "--batch-size expects an integer from 1 to" "$resffn" compile -b 12x -p "$work/a.pef"
expect 2 "-mb expects an integer from 0 to" "$resffn" compile -b 64 -mb -3 -p "$work/a.pef"
expect 2 "--lr expects a number" "$resffn" run -p "$work/a.pef" --lr nan
expect 2 "unrecognized option" "$resffn" compile --bogus
expect 2 "unexpected argument 'extra'" "$resffn" compile -b 64 extra
expect 2 "usage:" "$resffn"
expect 2 "--epochs expects an integer from 1 to" "$eager" --epochs 0
expect 2 "--min-accuracy expects a number from 0 to 1" "$eager" --min-accuracy 1.5
expect 2 "--lr expects a number" "$lenet" --lr ""
expect 1 "cannot open $work/missing.csv.gz" "$eager" "$work/missing.csv.gz"
printf '1,2,3\n' | gzip >"$work/short.csv.gz"
expect 1 "short.csv.gz line 1: expected 64 integers" "$eager" "$work/short.csv.gz"
head -c 100 /dev/urandom >"$work/garbage.csv.gz"
expect 1 "garbage.csv.gz" "$lenet" "$work/garbage.csv.gz"
# A plain CSV reads as well as a gzipped one.
gzip -dc "$data" >"$work/digits.csv"
if ! "$eager" "$work/digits.csv" --epochs 1 >"$work/out" 2>&1; then
  echo "FAILED: eager_logreg on a plain CSV:"
  cat "$work/out"
  failures=$((failures + 1))
fi

[ "$failures" -eq 0 ] || { echo "$failures command-line checks failed"; exit 1; }
