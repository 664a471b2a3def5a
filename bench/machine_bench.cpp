// The machine's own limits, measured in the same run as the engine's
// benchmarks so every kernel figure has a ceiling beside it:
//   - FMA peak: fused multiply-adds on registers only (no memory traffic);
//   - memcpy / memset bandwidth on buffers far larger than the caches.
// Each runs on 1 and 2 threads. The threads are plain std::threads started
// together and timed by wall clock (manual time), so the figure is what the
// whole machine delivers, not a per-thread average.
//
// Each rate is also reported per second of CPU time the threads actually got
// ("..._on_cpu"). On an idle machine the two agree; on a shared one (CI, a
// busy workstation) the wall-clock rate drops while the CPU-time rate still
// shows what the hardware can do.
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct ParallelTime {
  double wall = 0;  // release of the threads to the end of the last one
  double cpu = 0;   // CPU seconds, summed over the threads
};

// Runs fn(thread_index) on `threads` threads released together.
template <typename Fn>
ParallelTime timed_parallel(int threads, Fn&& fn) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> cpu(threads);
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      const double start = thread_cpu_seconds();
      fn(t);
      cpu[t] = thread_cpu_seconds() - start;
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  const auto start = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  for (auto& th : pool) th.join();
  ParallelTime r;
  r.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (double c : cpu) r.cpu += c;
  return r;
}

// Runs the benchmark loop with `threads` threads each doing work(t) per
// iteration, and reports `name` (the rate of `amount` per iteration) by wall
// time and by CPU time. Both are decimal (1 G = 1e9).
template <typename Fn>
void run_rate(benchmark::State& state, int threads, const char* name, double amount, Fn&& work) {
  double cpu = 0;
  for (auto _ : state) {
    const ParallelTime t = timed_parallel(threads, work);
    state.SetIterationTime(t.wall);
    cpu += t.cpu;
    benchmark::ClobberMemory();
  }
  state.counters[name] = benchmark::Counter(amount, benchmark::Counter::kIsIterationInvariantRate);
  // Each thread's rate while it ran, summed: amount * threads / total CPU.
  const double total = amount * static_cast<double>(state.iterations());
  state.counters[std::string(name) + "_on_cpu"] = cpu > 0 ? total * threads / cpu : 0;
}

#if defined(__FMA__) && defined(__AVX__)
// Enough independent accumulators to cover FMA latency x FMA ports (4 cycles
// x 2 ports on current x86 cores needs 8; 12 leaves headroom).
constexpr int kAccumulators = 12;
constexpr int kLanes = 8;  // floats per __m256
constexpr int64_t kFmaSteps = 20'000'000;

// acc = acc * a + b converges (|a| < 1), so values stay normal and finite.
float fma_kernel(int64_t steps) {
  __m256 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm256_set1_ps(0.01f * static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.9999f), b = _mm256_set1_ps(1e-4f);
  for (int64_t s = 0; s < steps; ++s) {
    for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  __m256 total = acc[0];
  for (int i = 1; i < kAccumulators; ++i) total = _mm256_add_ps(total, acc[i]);
  alignas(32) float lanes[kLanes];
  _mm256_store_ps(lanes, total);
  float sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}

void BM_FmaPeakFloat32(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  std::vector<float> sink(threads);
  const double flops_per_iteration = 2.0 * kLanes * kAccumulators * kFmaSteps * threads;
  run_rate(state, threads, "FLOP/s", flops_per_iteration,
           [&](int t) { sink[t] = fma_kernel(kFmaSteps); });
  benchmark::DoNotOptimize(sink.data());
}
BENCHMARK(BM_FmaPeakFloat32)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
#endif

constexpr size_t kBufferBytes = size_t{256} << 20;

// Two 256 MiB buffers shared by the bandwidth benchmarks, written once so
// every page is resident before anything is timed.
struct Buffers {
  std::vector<char> src = std::vector<char>(kBufferBytes, 1);
  std::vector<char> dst = std::vector<char>(kBufferBytes, 2);
};
Buffers& buffers() {
  static Buffers b;
  return b;
}

// Each thread takes one contiguous slice of the buffers. "B/s" counts the
// buffer once: memcpy moves twice that over the memory bus (a read and a
// write per byte), memset once.
template <typename Fn>
void bandwidth_benchmark(benchmark::State& state, Fn&& slice_op) {
  const int threads = static_cast<int>(state.range(0));
  Buffers& b = buffers();
  const size_t slice = kBufferBytes / threads;
  run_rate(state, threads, "B/s", static_cast<double>(kBufferBytes), [&](int t) {
    const size_t begin = slice * t;
    slice_op(b.dst.data() + begin, b.src.data() + begin, slice);
  });
}

void BM_Memcpy256MiB(benchmark::State& state) {
  bandwidth_benchmark(state,
                      [](char* dst, const char* src, size_t n) { std::memcpy(dst, src, n); });
}
BENCHMARK(BM_Memcpy256MiB)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void BM_Memset256MiB(benchmark::State& state) {
  bandwidth_benchmark(state, [](char* dst, const char*, size_t n) { std::memset(dst, 3, n); });
}
BENCHMARK(BM_Memset256MiB)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
