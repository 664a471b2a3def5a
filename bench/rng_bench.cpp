// Materialization throughput: a 16M-element tensor (64 MiB as float32, 32
// MiB as bfloat16) filled by the built-in materializers, with init_threads 1
// and 2. Reported per second of wall time (values_per_s, GB_per_s: bytes
// written) and per second of CPU time the process received, scaled by the
// thread count (values_per_s_on_cpu: what the threads deliver when they are
// not preempted; on an idle machine the two agree). Decimal units.
//
//   uniform          uniform(a = -1, b = 1)
//   normal           normal(0, 1), Box-Muller
//   normal_inverse   normal(0, 1), inverse transform sampling
//   kaiming_uniform  kaiming_uniform on [4096, 4096]
#include <benchmark/benchmark.h>
#include <time.h>

#include <string>

#include "engine/rng/materializer.h"

using namespace samba;
using namespace samba::rng;

namespace {

constexpr int64_t kRows = 4096, kCols = 4096;

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void BM_Materialize(benchmark::State& state, const char* kind, bool inverse, DType dtype) {
  const int threads = static_cast<int>(state.range(0));
  rng::MaterializerDesc desc{kind, {}};
  if (desc.kind == "uniform") desc.params = {{"a", -1.0}, {"b", 1.0}};
  const MaterializeOptions options{42, "encoder.layer0.weight", threads, inverse,
                                   Bf16Rounding::NearestEven};
  Tensor t = Tensor::empty({kRows, kCols}, dtype, true);  // pages mapped before timing
  materialize(desc, t, options);                          // the pool's threads started
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) {
    materialize(desc, t, options);
    benchmark::ClobberMemory();
  }
  const double cpu = process_cpu_seconds() - cpu0;
  const double values = static_cast<double>(t.numel());
  state.counters["values_per_s"] =
      benchmark::Counter(values, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB_per_s"] = benchmark::Counter(static_cast<double>(t.nbytes()) * 1e-9,
                                                  benchmark::Counter::kIsIterationInvariantRate);
  state.counters["values_per_s_on_cpu"] =
      cpu > 0 ? values * static_cast<double>(state.iterations()) * threads / cpu : 0;
  state.SetLabel(std::string(kind) + (inverse ? " inverse" : "") + " " +
                 std::string(dtype_name(dtype)));
}

#define SAMBA_MATERIALIZE_BENCH(name, kind, inverse)                             \
  BENCHMARK_CAPTURE(BM_Materialize, name##_f32, kind, inverse, DType::Float32)   \
      ->Arg(1)                                                                   \
      ->Arg(2)                                                                   \
      ->UseRealTime()                                                            \
      ->Unit(benchmark::kMillisecond);                                           \
  BENCHMARK_CAPTURE(BM_Materialize, name##_bf16, kind, inverse, DType::BFloat16) \
      ->Arg(1)                                                                   \
      ->Arg(2)                                                                   \
      ->UseRealTime()                                                            \
      ->Unit(benchmark::kMillisecond)

SAMBA_MATERIALIZE_BENCH(uniform, "uniform", false);
SAMBA_MATERIALIZE_BENCH(normal, "normal", false);
SAMBA_MATERIALIZE_BENCH(normal_inverse, "normal", true);
SAMBA_MATERIALIZE_BENCH(kaiming_uniform, "kaiming_uniform", false);

}  // namespace

BENCHMARK_MAIN();
