// The machine's own limits, measured in the same run as the engine's
// benchmarks so every kernel figure has a ceiling beside it:
//   - FMA peak: fused multiply-adds on registers only (no memory traffic),
//     with every vector ISA the CPU has (AVX-512 and AVX2+FMA), and the
//     bf16 dot-product peak where AVX512_BF16 exists;
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
#include <string>
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

// ---- arithmetic peaks, per vector ISA the CPU has ---------------------------
//
// Each kernel is compiled for its own ISA (target attributes) whatever the
// build's flags, and registered only when the CPU runs it, so the widest
// peak is always measured: a build without AVX-512 code generation on an
// AVX-512 machine still reports the 512-bit peak, which is the machine's.

constexpr int64_t kPeakSteps = 20'000'000;

// Enough independent accumulators to cover FMA latency x FMA ports (4
// cycles x 2 ports needs 8); AVX-512's 32 registers allow 16.
constexpr int kAvx2Accumulators = 12;
constexpr int kAvx512Accumulators = 16;

// acc = acc * a + b converges (|a| < 1), so values stay normal and finite.
__attribute__((target("avx2,fma"))) float fma_avx2(int64_t steps) {
  __m256 acc[kAvx2Accumulators];
  for (int i = 0; i < kAvx2Accumulators; ++i) acc[i] = _mm256_set1_ps(0.01f * static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.9999f), b = _mm256_set1_ps(1e-4f);
  for (int64_t s = 0; s < steps; ++s)
    for (int i = 0; i < kAvx2Accumulators; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  __m256 total = acc[0];
  for (int i = 1; i < kAvx2Accumulators; ++i) total = _mm256_add_ps(total, acc[i]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, total);
  float sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}

__attribute__((target("avx512f"))) float fma_avx512(int64_t steps) {
  __m512 acc[kAvx512Accumulators];
  for (int i = 0; i < kAvx512Accumulators; ++i) acc[i] = _mm512_set1_ps(0.01f * static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.9999f), b = _mm512_set1_ps(1e-4f);
  for (int64_t s = 0; s < steps; ++s)
    for (int i = 0; i < kAvx512Accumulators; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  __m512 total = acc[0];
  for (int i = 1; i < kAvx512Accumulators; ++i) total = _mm512_add_ps(total, acc[i]);
  return _mm512_reduce_add_ps(total);
}

// VDPBF16PS: per float lane, two bf16 products added to the accumulator,
// so 16 lanes x 2 products x (multiply + add) = 64 FLOPs per instruction.
__attribute__((target("avx512f,avx512bf16"))) float dot_bf16_avx512(int64_t steps) {
  __m512 acc[kAvx512Accumulators];
  for (int i = 0; i < kAvx512Accumulators; ++i) acc[i] = _mm512_setzero_ps();
  // Small operands: the sums grow by 2e-4 a step and stay far from overflow.
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.01f), _mm512_set1_ps(0.01f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.01f), _mm512_set1_ps(0.01f));
  for (int64_t s = 0; s < steps; ++s)
    for (int i = 0; i < kAvx512Accumulators; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  __m512 total = acc[0];
  for (int i = 1; i < kAvx512Accumulators; ++i) total = _mm512_add_ps(total, acc[i]);
  return _mm512_reduce_add_ps(total);
}

struct PeakKernel {
  const char* name;       // benchmark name: BM_<what>/<isa>
  const char* isa;        // what the CPU must have, as __builtin_cpu_supports names it
  const char* isa_extra;  // a second requirement, or nullptr
  float (*kernel)(int64_t steps);
  double flops_per_step;
};

// Widest first within each kind: peers.py takes the first FMA peak listed as
// the machine's.
const PeakKernel kPeakKernels[] = {
    {"BM_FmaPeakFloat32/avx512", "avx512f", nullptr, fma_avx512, 2.0 * 16 * kAvx512Accumulators},
    {"BM_FmaPeakFloat32/avx2", "avx2", "fma", fma_avx2, 2.0 * 8 * kAvx2Accumulators},
    {"BM_DotPeakBfloat16/avx512_bf16", "avx512f", "avx512bf16", dot_bf16_avx512, 64.0 * kAvx512Accumulators},
};

bool cpu_has(const char* feature) {
  // __builtin_cpu_supports needs a literal, so each name the table uses is spelled out.
  const std::string f = feature;
  if (f == "avx2") return __builtin_cpu_supports("avx2");
  if (f == "fma") return __builtin_cpu_supports("fma");
  if (f == "avx512f") return __builtin_cpu_supports("avx512f");
  if (f == "avx512bf16") return __builtin_cpu_supports("avx512bf16");
  return false;
}

void register_peaks() {
  __builtin_cpu_init();
  std::string widest_fma;
  for (const PeakKernel& k : kPeakKernels) {
    if (!cpu_has(k.isa) || (k.isa_extra && !cpu_has(k.isa_extra))) continue;
    const std::string name = k.name;
    if (widest_fma.empty() && name.rfind("BM_FmaPeakFloat32/", 0) == 0)
      widest_fma = name.substr(name.find('/') + 1);
    benchmark::RegisterBenchmark(k.name,
                                 [k](benchmark::State& state) {
                                   const int threads = static_cast<int>(state.range(0));
                                   std::vector<float> sink(threads);
                                   run_rate(state, threads, "FLOP/s", k.flops_per_step * kPeakSteps * threads,
                                            [&](int t) { sink[t] = k.kernel(kPeakSteps); });
                                   benchmark::DoNotOptimize(sink.data());
                                 })
        ->ArgName("threads")
        ->Arg(1)
        ->Arg(2)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::AddCustomContext("fma_peak_isa", widest_fma.empty() ? "none" : widest_fma);
}

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

int main(int argc, char** argv) {
  register_peaks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
