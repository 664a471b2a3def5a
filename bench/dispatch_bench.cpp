// The fixed cost of calling an op eagerly: dispatch (lookup, attribute
// resolution, inference, output allocation) around a kernel that does almost
// nothing.
#include <benchmark/benchmark.h>

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

BENCHMARK_MAIN();
