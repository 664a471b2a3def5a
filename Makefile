# make wraps cmake. `make demo` and `make test` work on a fresh machine:
# both install what is missing first.
BUILD     ?= build
JOBS      ?= $(shell nproc)
PREFIX    ?= /usr/local
CMAKE_GEN := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
CTEST_ARGS ?=

.PHONY: all setup configure build test asan tsan demo bench install clean format

all: build

setup:
	@bash scripts/setup.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$(PREFIX)

configure: $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: setup
	$(MAKE) build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer.
asan: setup
	cmake -S . -B build-asan $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DSAMBA_SANITIZE=address \
	  -DSAMBA_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS=-O1
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

# The test suite under ThreadSanitizer.
tsan: setup
	cmake -S . -B build-tsan $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DSAMBA_SANITIZE=thread \
	  -DSAMBA_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS=-O1
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

demo: setup
	$(MAKE) build
	$(BUILD)/examples/c/eager_logreg examples/data/digits.csv.gz

bench: setup
	$(MAKE) build
	bash bench/run.sh $(BUILD)

install: build
	cmake --install $(BUILD)

format:
	clang-format -i $$(git ls-files '*.h' '*.hpp' '*.cpp' '*.c')

clean:
	rm -rf $(BUILD) build-asan build-tsan
