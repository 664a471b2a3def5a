// Host -> device copies of 64 MiB and 256 MiB: a plain memcpy (one call, as
// a transfer without staging would be; and split over the pool) against the
// staged copy through pinned blocks (engine/memory/staged_copy.h) on 1 and 2
// threads. GB_per_s counts bytes copied (each byte read once and written
// once; decimal units), per second of wall time; GB_per_s_on_cpu per second
// of CPU time the process received, times the threads, as in rng_bench.
#include <benchmark/benchmark.h>
#include <time.h>

#include <cstring>
#include <vector>

#include "engine/core/parallel.h"
#include "engine/memory/pinned_pool.h"
#include "engine/memory/staged_copy.h"

using namespace samba;

namespace {

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Source and destination, both touched once so no page fault is timed.
struct Buffers {
  std::vector<char> src, dst;
  explicit Buffers(size_t n) : src(n, 1), dst(n, 2) {}
};

template <class Copy>
void run(benchmark::State& state, int threads, Copy&& copy) {
  const auto bytes = static_cast<size_t>(state.range(0)) << 20;
  Buffers b(bytes);
  ThreadPool pool(threads);
  ThreadPool::Scope scope(&pool);
  copy(b.dst.data(), b.src.data(), bytes);
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) {
    copy(b.dst.data(), b.src.data(), bytes);
    benchmark::ClobberMemory();
  }
  const double cpu = process_cpu_seconds() - cpu0;
  const auto gb = static_cast<double>(bytes) * 1e-9;
  state.counters["GB_per_s"] =
      benchmark::Counter(gb, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB_per_s_on_cpu"] =
      cpu > 0 ? gb * static_cast<double>(state.iterations()) * threads / cpu : 0;
}

void BM_Memcpy(benchmark::State& state) {
  run(state, 1, [](char* d, const char* s, size_t n) { std::memcpy(d, s, n); });
}

void BM_MemcpyParallel(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(1));
  run(state, threads, [&](char* d, const char* s, size_t n) {
    // One memcpy per thread, so glibc picks its large-copy path.
    const auto per = static_cast<int64_t>(n) / threads;
    parallel_for(static_cast<int64_t>(n), per, [&](int64_t b, int64_t e) {
      std::memcpy(d + b, s + b, static_cast<size_t>(e - b));
    });
  });
}

void BM_StagedCopy(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(1));
  run(state, threads, [](char* d, const char* s, size_t n) { staged_copy(d, s, n); });
  const auto st = pinned_pool().stats();
  state.SetLabel(st.locked ? "staging locked" : "staging NOT locked (RLIMIT_MEMLOCK)");
}

BENCHMARK(BM_Memcpy)->Arg(64)->Arg(256)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MemcpyParallel)
    ->Args({64, 2})
    ->Args({256, 2})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StagedCopy)
    ->Args({64, 1})
    ->Args({64, 2})
    ->Args({256, 1})
    ->Args({256, 2})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
