#!/usr/bin/env bash
# Installs the system packages Samba builds with (Debian bookworm names).
# Idempotent: when everything is installed it only checks, and returns at
# once; otherwise it runs apt-get update and installs only what is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache
  libtbb-dev libeigen3-dev libflatbuffers-dev flatbuffers-compiler libzstd-dev libdlpack-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev libfmt-dev
  libxxhash-dev zlib1g-dev doxygen abigail-tools
  clang llvm lld libclang-dev libclang-rt-dev
  python3-numpy python3-pytest python3-torch python3-torchvision python3-venv
  libcpp-httplib-dev wrk libonnx-dev libtorch-dev python3-onnx
  libopenmpi-dev openmpi-bin
  libdnnl-dev ocl-icd-opencl-dev
)

# libcpp-httplib-dev: the inference server example (examples/server); wrk
# drives its benchmark. libonnx-dev: the ONNX importer (parser, checker,
# shape inference). libtorch-dev: the optional LibTorch bridge
# (include/samba/torch.hpp), its example and test. python3-onnx (1.12, the
# version of libonnx-dev): the ONNX backend test suite. libopenmpi-dev and
# openmpi-bin: data-parallel training (docs/DISTRIBUTED.md) and its tests.
# libdnnl-dev: oneDNN, the reference kernels bench/kernel_peers_bench.cpp
# measures Samba's GEMM and convolution beside (not linked into the engine);
# ocl-icd-opencl-dev: Debian's oneDNN CMake package requires OpenCL, which
# libdnnl-dev only recommends, so --no-install-recommends leaves it out.

# libclang-dev: bindgen (the samba-sys crate's build) parses samba.h with it.
# lld: the sanitizer trees link their tests with it (GNU ld is about four
# times slower on their 300 MB executables).
# libclang-rt-dev: clang's sanitizer and libFuzzer runtimes and their headers
# (make asan, tsan, fuzz), which clang only recommends.
# The Rust and Go bindings' toolchains: Debian's, unless one is already
# installed (rustup's in ~/.cargo/bin, Go's in /usr/local/go/bin).
command -v cargo >/dev/null 2>&1 || [ -x "$HOME/.cargo/bin/cargo" ] || packages+=(cargo)
command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ] || packages+=(golang-go)

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: not a Debian-like system; install the equivalents of: ${packages[*]}" >&2
  exit 1
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# The Hugging Face tests' venv (PyPI; idempotent), once the system packages are in.
python_env() { bash "$(dirname "$0")/setup_python_env.sh"; }

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  python_env
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || {
    echo "setup: not root and no sudo; as root run: apt-get install ${missing[*]}" >&2
    exit 1
  }
  SUDO=(sudo)
fi
# env, not a variable prefix: sudo would drop DEBIAN_FRONTEND from the environment.
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
python_env
