#!/usr/bin/env bash
# Runs the Rust crates' tests (bindings/rust: samba-sys and samba) the way a
# user builds them: against Samba installed into a scratch prefix, found
# through pkg-config with nothing set but PKG_CONFIG_PATH, then runs the
# ResFFN example. Also checks that without an installed Samba the build
# fails with a message naming what to install, and that `cargo package`
# finds the crates' metadata complete.
# Usage: run_cargo.sh BUILD_DIR TARGET_DIR [C_EXAMPLE_BINARY]. With the C
# example, the Rust losses are also checked against its. Exit 77 (skipped)
# without cargo.
set -euo pipefail
build=$1
target=$2
example=${3:-}
root="$(cd "$(dirname "$0")/../.." && pwd)"
PATH="$PATH:$HOME/.cargo/bin"
if ! command -v cargo >/dev/null 2>&1; then
  echo "skipped: no cargo (make setup installs Debian's cargo when none is present)"
  exit 77
fi
# The committed Cargo.lock (format 4) needs cargo 1.78; Debian bookworm's is 1.65.
version="$(cargo --version | awk '{print $2}')"
if [ "$(printf '%s\n' 1.78.0 "$version" | sort -V | head -1)" != 1.78.0 ]; then
  echo "skipped: cargo $version is older than 1.78, which the crates' Cargo.lock needs (install Rust with rustup)"
  exit 77
fi
prefix="$(mktemp -d "${TMPDIR:-/tmp}/samba-rust-prefix.XXXXXX")"
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
cd "$root/bindings/rust"
# No variable that could point the build or the loader at the library.
unset SAMBA_LIB_DIR LD_LIBRARY_PATH LIBRARY_PATH CPATH C_INCLUDE_PATH PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR
export CARGO_TARGET_DIR="$target"
cargo_args=(--offline --locked --workspace --all-features)

echo "== without an installed Samba"
if out="$(PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR="$prefix/nowhere" cargo build "${cargo_args[@]}" 2>&1)"; then
  echo "the build succeeded without libsamba on pkg-config's path" >&2
  exit 1
fi
for expected in "libsamba 0.1.0..0.2.0 was not found through pkg-config" "make install" "PKG_CONFIG_PATH=DIR/lib/pkgconfig"; do
  if ! grep -qF "$expected" <<<"$out"; then
    echo "the build's error does not say \"$expected\":" >&2
    echo "$out" >&2
    exit 1
  fi
done

echo "== against $prefix"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
SAMBA_EXAMPLE="$example" cargo test "${cargo_args[@]}"
# Without the experimental feature, samba/experimental.h stays unbound.
cargo test --offline --locked -p samba-sys
# The crates' metadata is complete: packaging them warns of nothing.
if ! out="$(cargo package --workspace --offline --locked --allow-dirty --no-verify 2>&1)" || grep -q '^warning' <<<"$out"; then
  echo "cargo package:" >&2
  echo "$out" >&2
  exit 1
fi
cargo run --offline --locked --example resffn
