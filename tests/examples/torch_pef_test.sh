#!/usr/bin/env bash
# The LibTorch example end to end: make_model.py writes a TorchScript module
# and a PEF of the same weights, and torch_pef must give TorchScript's outputs
# within 1e-6 on LibTorch inputs. Exit 77 (skipped) without a python3 that
# has PyTorch.
#
#   torch_pef_test.sh TORCH_PEF LIBSAMBA SOURCE_DIR
set -euo pipefail
app=$1 lib=$(realpath "$2") src=$3
source "$src/tests/examples/torch_python.sh"
python=$(torch_python "torch, numpy")
if [ -z "$python" ]; then
  echo "skipped: no python3 with PyTorch and NumPy to write the TorchScript module (Debian: python3-torch)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
SAMBA_LIBRARY="$lib" PYTHONPATH="$src/bindings/python${PYTHONPATH:+:$PYTHONPATH}" \
  "$python" "$src/examples/torch/make_model.py" "$work"
"$app" "$work/mlp.pt" "$work/mlp.pef" --batches 8 --tolerance 1e-6
# A PEF that is not one is refused with Samba's message, not a crash.
printf 'not a pef' > "$work/bad.pef"
set +e
out=$("$app" "$work/mlp.pt" "$work/bad.pef" 2>&1)
status=$?
set -e
if [ "$status" -ne 2 ] || ! grep -q "samba: SAMBA_ERR_" <<<"$out"; then
  echo "a corrupt PEF: expected exit 2 with Samba's error, got $status: $out" >&2
  exit 1
fi
