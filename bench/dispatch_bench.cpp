// The fixed cost of calling an op eagerly: dispatch (lookup, attribute
// resolution, inference, output allocation) around a kernel that does almost
// nothing; and what the pool's parallel_for costs after the pool sat idle.
#include <benchmark/benchmark.h>

#include <chrono>

#include "engine/core/parallel.h"
#include "engine/ops/registry.h"

using namespace samba;

static void BM_EagerTinyAdd(benchmark::State& state) {
  Tensor a = Tensor::zeros({4}, DType::Float32), b = Tensor::zeros({4}, DType::Float32);
  const OpDef& add = OpRegistry::global().get("add");
  std::array<Tensor, 2> in{a, b};
  Attrs none;
  for (auto _ : state) benchmark::DoNotOptimize(call(add, in, none));
}
BENCHMARK(BM_EagerTinyAdd);

static void BM_EagerTinyAddByName(benchmark::State& state) {
  Tensor a = Tensor::zeros({4}, DType::Float32), b = Tensor::zeros({4}, DType::Float32);
  for (auto _ : state) benchmark::DoNotOptimize(call1("add", {a, b}));
}
BENCHMARK(BM_EagerTinyAddByName);

static void BM_EagerTinySumWithAttrs(benchmark::State& state) {
  Tensor a = Tensor::zeros({4, 4}, DType::Float32);
  Attrs attrs{{"dim", std::vector<int64_t>{1}}, {"keepdim", true}};
  for (auto _ : state) benchmark::DoNotOptimize(call1("sum", {a}, attrs));
}
BENCHMARK(BM_EagerTinySumWithAttrs);

static void BM_TensorAllocate(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(Tensor::empty({4}, DType::Float32));
}
BENCHMARK(BM_TensorAllocate);

// Busy for `us` microseconds on the calling thread.
static void spin_for_us(double us) {
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
             .count() < us) {
  }
}

// A parallel_for of two 10 us halves on a pool of 2 threads, after the
// calling thread worked alone for `gap` us (in the pool's arena, as a run's
// kernels are): 10 us when the worker takes its half at once; more once the
// gap is long enough for an idle worker to sleep, by what waking it costs.
static void BM_ParallelForAfterIdle(benchmark::State& state) {
  ThreadPool pool(2);
  ThreadPool::Scope scope(&pool);
  const auto gap = static_cast<double>(state.range(0));
  pool.arena().execute([&] {
    for (auto _ : state) {
      spin_for_us(gap);
      const auto start = std::chrono::steady_clock::now();
      parallel_for(2, 1, [](int64_t, int64_t) { spin_for_us(10.0); });
      state.SetIterationTime(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  });
}
BENCHMARK(BM_ParallelForAfterIdle)
    ->ArgName("idle_us")
    ->Arg(0)
    ->Arg(20)
    ->Arg(50)
    ->Arg(100)
    ->Arg(1000)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
