// An epoch through the BatchLoader (SambaLoader) when producing a batch takes
// as long as running it: 40 batches of 256 x 784 float32 inputs and int64
// labels, each produced in `work_ms` of busy CPU time and then run for
// `work_ms` of busy CPU time. With the loader preparing batches ahead on its
// own thread, the epoch costs about the runs alone; `ratio` is epoch time /
// (batches x work_ms), the goal is <= 1.2. The baseline produces
// each batch inline before its run (ratio about 2).
#include <benchmark/benchmark.h>

#include <chrono>

#include "engine/loader/batch_loader.h"

using namespace samba;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int64_t kBatches = 40;
constexpr int64_t kRows = 256, kFeatures = 784;

// Busy CPU work until `ms` milliseconds after `from` (a run, or a
// producer's decoding).
void spin(double ms, Clock::time_point from = Clock::now()) {
  const auto until = from + std::chrono::duration<double, std::milli>(ms);
  while (Clock::now() < until) {
  }
}

// A batch that takes `ms` to produce, filling its tensors included.
std::vector<Tensor> make_batch(int64_t i, double ms) {
  const auto t0 = Clock::now();
  Tensor x = Tensor::empty({kRows, kFeatures}, DType::Float32);
  Tensor y = Tensor::empty({kRows}, DType::Int64);
  float* xv = x.data<float>();
  for (int64_t k = 0; k < x.numel(); ++k) xv[k] = static_cast<float>((k + i) % 17);
  int64_t* yv = y.data<int64_t>();
  for (int64_t k = 0; k < kRows; ++k) yv[k] = (k + i) % 10;
  spin(ms, t0);
  return {x, y};
}

void report(benchmark::State& state, double ms, double seconds_per_epoch) {
  state.counters["ratio"] = seconds_per_epoch / (static_cast<double>(kBatches) * ms * 1e-3);
  state.counters["batches_per_s"] = static_cast<double>(kBatches) / seconds_per_epoch;
}

void BM_LoaderEpoch(benchmark::State& state) {
  const double ms = static_cast<double>(state.range(0));
  double total = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    BatchLoader loader({"x", "y"}, [ms](int64_t i) -> std::optional<std::vector<Tensor>> {
      if (i >= kBatches) return std::nullopt;
      return make_batch(i, ms);
    }, BatchLoader::Options{});
    int64_t n = 0;
    while (auto batch = loader.next()) {
      benchmark::DoNotOptimize(batch->front().raw_data());
      spin(ms);  // the run
      ++n;
    }
    if (n != kBatches) state.SkipWithError("the loader lost batches");
    total += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  report(state, ms, total / static_cast<double>(state.iterations()));
}

void BM_InlineEpoch(benchmark::State& state) {
  const double ms = static_cast<double>(state.range(0));
  double total = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < kBatches; ++i) {
      auto batch = make_batch(i, ms);
      benchmark::DoNotOptimize(batch.front().raw_data());
      spin(ms);
    }
    total += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  report(state, ms, total / static_cast<double>(state.iterations()));
}

}  // namespace

BENCHMARK(BM_LoaderEpoch)->Arg(2)->Arg(10)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);
BENCHMARK(BM_InlineEpoch)->Arg(2)->Arg(10)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

BENCHMARK_MAIN();
