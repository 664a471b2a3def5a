#!/usr/bin/env bash
# Runs the Rust crate's tests (bindings/rust) against a built libsamba.so.
# Usage: run_cargo.sh LIBSAMBA_PATH TARGET_DIR [EXAMPLE_BINARY DIGITS_DATA].
# With the last two, the losses are also checked against the C example's.
# Exit 77 (skipped) without cargo.
set -euo pipefail
lib=$1
target=$2
export SAMBA_EXAMPLE=${3:-} SAMBA_DIGITS=${4:-}
root="$(cd "$(dirname "$0")/../.." && pwd)"
PATH="$PATH:$HOME/.cargo/bin"
if ! command -v cargo >/dev/null 2>&1; then
  echo "skipped: no cargo (make setup installs Debian's cargo when none is present)"
  exit 77
fi
cd "$root/bindings/rust"
SAMBA_LIB_DIR="$(dirname "$lib")" CARGO_TARGET_DIR="$target" exec cargo test --offline -q
