#!/usr/bin/env bash
# The ResFFNLogReg example end to end, as `make demo` runs it: compile a
# training PEF (and an inference one), train, and require the held-out
# accuracy; then check inference from the saved weights, micro-batches, and,
# when PyTorch is installed, that 20 training steps match PyTorch's.
#
#   resffn_logreg_test.sh APP DATA SOURCE_DIR MODE
# MODE: train | micro | torch | bf16
set -euo pipefail
app=$1 data=$2 src=$3 mode=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

case $mode in
  train)
    "$app" compile -b 64 -p "$work/train.pef"
    "$app" compile -b 64 --inference -p "$work/infer.pef"
    grep -q "type BCKWD" "$work/train.pef.log"
    grep -q "type OPT" "$work/train.pef.log"
    ! grep -q "type BCKWD" "$work/infer.pef.log"
    "$app" run -p "$work/train.pef" --data "$data" --epochs 30 --checkpoint "$work/w.ckpt" \
      --profile "$work/trace.json" --min-accuracy 0.95
    test -s "$work/trace.json"
    "$app" run -p "$work/infer.pef" --inference --data "$data" --checkpoint "$work/w.ckpt" --min-accuracy 0.95
    ;;
  micro)
    "$app" compile -b 64 -mb 16 -p "$work/micro.pef"
    grep -q "micro-batch 16" "$work/micro.pef.log"
    "$app" run -p "$work/micro.pef" --data "$data" --epochs 20 --checkpoint "$work/w.ckpt" --min-accuracy 0.95
    ;;
  bf16)
    # Mixed precision trains to the accuracy the fp32 compile must reach.
    "$app" compile -b 64 --mixed-precision bf16 -p "$work/bf16.pef"
    grep -q "mixed precision bf16" "$work/bf16.pef.log"
    "$app" run -p "$work/bf16.pef" --data "$data" --epochs 30 --checkpoint "$work/w.ckpt" --min-accuracy 0.95
    if "$app" compile -b 64 --mixed-precision fp8 -p "$work/bad.pef" 2> "$work/err.txt"; then
      echo "--mixed-precision fp8 was accepted" >&2
      exit 1
    fi
    grep -q "'fp8' is not supported; expected 'none' or 'bf16'" "$work/err.txt"
    ;;
  torch)
    source "$src/tests/examples/torch_python.sh"
    python=$(torch_python torch)
    if [ -z "$python" ]; then
      echo "torch reference: skipped: no python3 with PyTorch (Debian: apt-get install python3-torch)"
      exit 77
    fi
    "$app" compile -b 64 -p "$work/train.pef"
    "$app" run -p "$work/train.pef" --data "$data" --steps 20 --dump "$work/steps.jsonl" \
      --checkpoint "$work/w.ckpt" > /dev/null
    "$python" "$src/tests/python/torch_reference.py" "$work/steps.jsonl" "$data" --tolerance 1e-4
    ;;
  *)
    echo "unknown mode $mode" >&2
    exit 2
    ;;
esac
