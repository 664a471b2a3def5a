#!/usr/bin/env bash
# Installs the system packages Samba builds with. Idempotent: when everything
# is installed it only checks, and returns at once.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache
  libtbb-dev libeigen3-dev libflatbuffers-dev flatbuffers-compiler libzstd-dev libdlpack-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev libfmt-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
