#!/usr/bin/env bash
# Runs `go vet` and `go test` of the Go module (bindings/go) as a user of an
# installed Samba would: this build is installed into PREFIX_DIR with
# `cmake --install`, and the only setting given to go is PKG_CONFIG_PATH
# pointing at that prefix (the module finds its flags through
# `#cgo pkg-config: samba`, and the test binary finds libsamba.so through
# the rpath samba.pc adds).
# Usage: run_go.sh BUILD_DIR PREFIX_DIR [EXAMPLE_BINARY DIGITS_DATA]. With the
# last two, the losses are also checked against the C example's. Exit 77
# (skipped) without go.
set -euo pipefail
build=$1
prefix=$2
export SAMBA_EXAMPLE=${3:-} SAMBA_DIGITS=${4:-}
root="$(cd "$(dirname "$0")/../.." && pwd)"
PATH="$PATH:/usr/local/go/bin"
if ! command -v go >/dev/null 2>&1; then
  echo "skipped: no go (make setup installs Debian's golang-go when none is present)"
  exit 77
fi
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
pc="$(find "$prefix" -name samba.pc -path '*/pkgconfig/*' | head -n1)"
if [ -z "$pc" ]; then
  echo "no samba.pc installed under $prefix" >&2
  exit 1
fi
# Nothing from the caller's environment may stand in for what pkg-config gives.
unset CGO_CFLAGS CGO_CPPFLAGS CGO_LDFLAGS LD_LIBRARY_PATH LIBRARY_PATH CPATH C_INCLUDE_PATH
export PKG_CONFIG_PATH="$(dirname "$pc")"
cd "$root/bindings/go"
go vet ./...
exec go test -count=1 ./...
