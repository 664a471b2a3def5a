#!/usr/bin/env bash
# Runs the Go package's tests (bindings/go) against a built libsamba.so.
# Usage: run_go.sh LIBSAMBA_PATH [EXAMPLE_BINARY DIGITS_DATA]. With the last
# two, the losses are also checked against the C example's. Exit 77 (skipped)
# without go.
set -euo pipefail
lib=$1
export SAMBA_EXAMPLE=${2:-} SAMBA_DIGITS=${3:-}
root="$(cd "$(dirname "$0")/../.." && pwd)"
PATH="$PATH:/usr/local/go/bin"
if ! command -v go >/dev/null 2>&1; then
  echo "skipped: no go (make setup installs Debian's golang-go when none is present)"
  exit 77
fi
libdir="$(cd "$(dirname "$lib")" && pwd)"
cd "$root/bindings/go"
# samba.h includes the typed op functions generated into the build tree.
generated=${SAMBA_GENERATED_INCLUDE:-$libdir/generated/include}
CGO_ENABLED=1 CGO_CFLAGS="-I$root/include -I$generated" CGO_LDFLAGS="-L$libdir -Wl,-rpath,$libdir" GOPROXY=off GOFLAGS=-mod=mod \
  exec go test -count=1 ./...
