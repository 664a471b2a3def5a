#!/usr/bin/env bash
# Regenerates the malformed-PEF corpus (tests/pef_corpus/malformed) and the
# valid PEFs it is made from (tests/pef_corpus/valid): builds the generator
# in the given build directory (default: build) and runs it. Deterministic;
# commit the result. The corpus test (ctest -R pef_corpus) reads the files.
#
#   tests/pef_corpus/generate.sh [build dir] [files per class and model]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${1:-$root/build}"
per_model="${2:-3}"
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSAMBA_BUILD_BENCH=OFF
fi
cmake --build "$build" --target pef_corpus_generate -j "${JOBS:-2}"
"$build/tests/pef_corpus_generate" "$here/malformed" "$here/valid" "$per_model"
du -sh "$here/malformed" "$here/valid"
