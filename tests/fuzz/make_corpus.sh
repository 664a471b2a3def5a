#!/usr/bin/env bash
# Rewrites the valid seeds of the fuzz corpora (tests/fuzz/corpus/*/valid-*)
# from the models of tests/fuzz/fuzz_models.h, for when the PEF or checkpoint
# format or the compiler changes and the corpus replay reports stale seeds.
# Other files of the corpora (reproducers of fixed findings) are kept.
#
#   tests/fuzz/make_corpus.sh [BUILD]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
cmake --build "$build" --target fuzz_seed_writer
rm -f tests/fuzz/corpus/*/valid-*
"$build/tests/fuzz/fuzz_seed_writer" tests/fuzz/corpus
ls -l tests/fuzz/corpus/*
