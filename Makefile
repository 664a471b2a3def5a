# make wraps cmake. `make demo` and `make test` work on a fresh Debian
# machine: both install what is missing first (scripts/setup.sh).
#
#   make setup     install missing system packages (apt-get; idempotent), fetch the Rust crates
#   make           Release build in $(BUILD)
#   make test      build, then run every test (unit, C ABI, install, examples)
#   make asan      the test suite under AddressSanitizer + UBSan (clang, build-asan/)
#   make tsan      the test suite under ThreadSanitizer (build-tsan/)
#   make fuzz      the libFuzzer targets under ASan + UBSan (the same build-asan/), FUZZ_SECONDS
#                  each, with coverage per engine folder; `make fuzz-ci`: FUZZ_CI_SECONDS each
#                  from the fixed seed FUZZ_CI_SEED (a finding there is reproducible)
#   make tsan-concurrency  only the concurrency and loader tests under ThreadSanitizer
#                  (what CI runs: builds only their targets, in build-tsan/)
#   make demo      build examples/c/resffn_logreg, compile it to a PEF, train it on the digits
#   make bench     build and run the benchmarks (bench/run.sh)
#   make bench-dist  the data-parallel benchmark under mpirun (2 ranks) and the
#                  scaling model calibrated on it (bench/dist, docs/DISTRIBUTED.md)
#   make bench-peers  Samba's end-to-end benchmarks beside PyTorch, JAX and ONNX Runtime
#                  (bench/peers/run_peers.sh: installs the peers into bench/.venv;
#                  PEERS_ARGS=--gpt2-only for GPT-2 alone)
#   make docs      the API reference as HTML in $(BUILD)/docs/html (Doxygen: the C
#                  headers' doc comments and the Python package's docstrings)
#   make install   install into $(PREFIX) (header, libraries, CMake package, samba.pc)
BUILD      ?= build
JOBS       ?= $(shell nproc)
PREFIX     ?= /usr/local
CMAKE_GEN  := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
CTEST_ARGS ?=
PEERS_ARGS ?=
# Sanitizer builds: -O1 keeps them fast enough to run the whole suite (but
# for the engine's files outside its kernels, which CMakeLists.txt builds at
# -O0 to halve the build: docs/testing.md); -g1 gives stack traces with lines
# at a fraction of the cost of full debug info.
FUZZ_SECONDS    ?= 600
FUZZ_CI_SECONDS ?= 45
FUZZ_CI_SEED    ?= 1
FUZZ_TARGETS    := pef_fuzz pef_run_fuzz checkpoint_fuzz safetensors_fuzz onnx_import_fuzz
# CI's gate leaves out onnx_import_fuzz: libonnx 1.12's own shape inference
# keeps yielding crash classes to fuzzing (each guarded as found, see
# docs/fuzzing.md); it rejoins the gate after a clean `make fuzz` run.
FUZZ_CI_TARGETS := pef_fuzz pef_run_fuzz checkpoint_fuzz safetensors_fuzz
SAN_FLAGS  := -DCMAKE_BUILD_TYPE=Debug -DSAMBA_BUILD_BENCH=OFF -DCMAKE_C_FLAGS_DEBUG="-O1 -g1" \
              -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1"

.PHONY: all setup configure build test asan tsan tsan-concurrency fuzz fuzz-ci fuzz-build demo bench bench-dist bench-peers docs install clean format

all: build

# Also fills cargo's registry cache with the Rust crates' locked
# dependencies, so their build and tests (rust.binding) then work offline.
setup:
	@bash scripts/setup.sh
	@PATH="$$PATH:$$HOME/.cargo/bin"; if command -v cargo >/dev/null 2>&1; then \
	  cargo fetch --locked --manifest-path bindings/rust/Cargo.toml; fi

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$(PREFIX)

configure: $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: setup
	$(MAKE) build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

# One ASan + UBSan tree serves the test suite and the fuzz targets: built
# with clang and libFuzzer's coverage instrumentation in every engine file
# (SAMBA_FUZZ), so CI compiles the engine under ASan once, not twice.
ASAN_CONFIGURE := CC=clang CXX=clang++ cmake -S . -B build-asan $(CMAKE_GEN) $(SAN_FLAGS) \
                  -DSAMBA_SANITIZE=address -DSAMBA_FUZZ=ON

asan: setup
	$(ASAN_CONFIGURE)
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

tsan: setup
	cmake -S . -B build-tsan $(CMAKE_GEN) $(SAN_FLAGS) -DSAMBA_SANITIZE=thread
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

# Only the fuzz targets (and the library they link) of the ASan tree; after
# `make asan` there is nothing left to build.
fuzz-build: setup
	$(ASAN_CONFIGURE)
	cmake --build build-asan -j $(JOBS) --target $(FUZZ_TARGETS)

fuzz: fuzz-build
	bash tests/fuzz/run_fuzzers.sh build-asan $(FUZZ_SECONDS) --coverage $(FUZZ_TARGETS)

# A fixed seed: the same build explores the same inputs on every run, so a
# CI failure is a reproducible finding, never the luck of the draw. `make
# fuzz` draws a new seed each time to explore further.
fuzz-ci: fuzz-build
	FUZZ_SEED=$(FUZZ_CI_SEED) bash tests/fuzz/run_fuzzers.sh build-asan $(FUZZ_CI_SECONDS) $(FUZZ_CI_TARGETS)

# The tests that run threads against each other: concurrent inference on one
# session, runs on the flow graph's workers, the pinned pool, the profiler's
# per-thread buffers, the C ABI's batch loader (samba_loader's background
# thread), the data-parallel reducer and its ring. The whole suite under
# TSan would not fit CI's budget on 2 cores.
# TSAN_OPTIONS' suppressions: tests/tsan.supp says why each is there.
TSAN_TARGETS := runtime_test runtime_run_test pinned_pool_test profiler_test capi_pinned_loader_test bucket_reducer_test ring_allreduce_test
TSAN_TESTS   := ^(Runtime|RuntimeRun|PinnedPool|StagedCopy|Profiler|BucketReducer|RingMean)\.|^capi\.pinned_loader_test$$
tsan-concurrency: setup
	cmake -S . -B build-tsan $(CMAKE_GEN) $(SAN_FLAGS) -DSAMBA_SANITIZE=thread
	cmake --build build-tsan -j $(JOBS) --target $(TSAN_TARGETS)
	# A test that fails is run once more (its output stays in the log): the
	# timing checks of the profiler tests can miss under TSan's slowdown. A
	# race that shows up in both runs fails the step.
	cd build-tsan && TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/tests/tsan.supp" \
	  ctest --output-on-failure -j $(JOBS) --repeat until-pass:2 -R '$(TSAN_TESTS)' $(CTEST_ARGS)

# Builds only what the demo needs, so a first `make demo` is quick: the
# ResFFNLogReg app compiled to a PEF (out/resffn_logreg.pef, with its .log)
# and trained on the emulated device, writing a profile Perfetto opens
# (out/resffn_logreg.trace.json).
demo: setup
	$(MAKE) configure
	cmake --build $(BUILD) -j $(JOBS) --target resffn_logreg
	@mkdir -p out
	$(BUILD)/examples/resffn_logreg compile -b 64 -p out/resffn_logreg.pef
	$(BUILD)/examples/resffn_logreg run -p out/resffn_logreg.pef --epochs 30 \
	  --checkpoint out/resffn_logreg.ckpt --profile out/resffn_logreg.trace.json --min-accuracy 0.95

bench: setup
	$(MAKE) configure
	cmake -S . -B $(BUILD) -DSAMBA_BUILD_BENCH=ON
	cmake --build $(BUILD) -j $(JOBS)
	bash bench/run.sh $(BUILD)

# Builds only the data-parallel benchmark (it needs MPI: libopenmpi-dev).
bench-dist: setup
	$(MAKE) configure
	cmake -S . -B $(BUILD) -DSAMBA_BUILD_BENCH=ON
	cmake --build $(BUILD) -j $(JOBS) --target samba dist_bench
	bash bench/dist/run_dist_bench.sh $(BUILD)

# Needs the network (PyPI) on its first run; nothing else depends on it.
# PEERS_ARGS=--gpt2-only runs only the GPT-2 benchmarks; --no-gpt2 leaves them out.
bench-peers: setup
	bash bench/peers/run_peers.sh $(PEERS_ARGS) $(BUILD)

docs: setup
	$(MAKE) configure
	cmake --build $(BUILD) --target samba_typed_ops_header
	mkdir -p $(BUILD)/docs
	SAMBA_DOCS_OUT=$(BUILD)/docs SAMBA_GENERATED_INCLUDE=$(BUILD)/generated/include \
	  SAMBA_DOCS_INPUT_PYTHON=bindings/python/sambaflow SAMBA_DOCS_WARN_AS_ERROR=NO \
	  SAMBA_DOCS_WARN_LOG=$(BUILD)/docs/warnings.log doxygen docs/Doxyfile
	@echo "API reference: $(BUILD)/docs/html/index.html ($$(wc -l < $(BUILD)/docs/warnings.log) warnings in $(BUILD)/docs/warnings.log)"

# PREFIX given here wins over the one the build was configured with.
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

format:
	clang-format -i $$(git ls-files '*.h' '*.hpp' '*.cpp' '*.c')

clean:
	rm -rf $(BUILD) build-asan build-tsan
