#!/usr/bin/env bash
# The LeNet-style C example (typed op functions) end to end: compile the
# training PEF, train briefly, and require a held-out accuracy that a network
# that does not learn (about 10% by chance) cannot reach.
#
#   lenet_digits_test.sh APP DATA
set -euo pipefail
app=$1 data=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$app" "$data" --pef "$work/lenet.pef" --epochs 8 --min-accuracy 0.9
grep -q "conv2d" "$work/lenet.pef.log"
grep -q "type BCKWD" "$work/lenet.pef.log"
grep -q "type OPT" "$work/lenet.pef.log"
