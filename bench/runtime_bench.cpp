// The runtime end to end: the seed's ResFFNLogReg (784 features, 10
// classes: gemm1, layer_norm, tanh, gemm2, layer_norm, residual add,
// sigmoid, gemm3, cross_entropy) compiled and run on the emulated device at
// batch/hidden 16/256, 256/1024 and 1024/2048: a training step (FWD, BCKWD,
// OPT with SGD and momentum) and forward-only inference (an inference
// compile). And the fixed costs on a tiny graph: one section call, and the
// median and 99th percentile of 10,000 whole runs.
//
// FLOP counts are the model's matrix products (2 * batch * (784 H + H H +
// 10 H) forward; three times that for a training step: forward, and the
// input and weight gradients); the elementwise work is not counted.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>

#include "compiler/compile.h"
#include "engine/ops/autograd.h"
#include "engine/ops/registry.h"
#include "engine/pef/reader.h"
#include "engine/pef/writer.h"
#include "engine/rng/lazy_param.h"
#include "engine/runtime/runtime.h"

using namespace samba;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int64_t kFeatures = 784, kClasses = 10;

Tensor tensor_of(const std::string& name, const Dims& shape, const char* init, bool param) {
  auto m = std::make_shared<const rng::Materializer>(pef::MaterializerDesc{init, {}});
  rng::MaterializeOptions o;
  o.seed = 7;
  Tensor t = rng::make_parameter(name, DType::Float32, shape, m, o, false);
  t.impl()->requires_grad = param;
  t.impl()->is_parameter = param;
  return t;
}

struct ResFFN {
  int64_t hidden;
  Tensor w1, b1, w2, b2, w3, b3, g1, n1, g2, n2;
  explicit ResFFN(int64_t h)
      : hidden(h),
        w1(tensor_of("gemm1.weight", {h, kFeatures}, "linear_weight", true)),
        b1(tensor_of("gemm1.bias", {h}, "zeros", true)),
        w2(tensor_of("gemm2.weight", {h, h}, "linear_weight", true)),
        b2(tensor_of("gemm2.bias", {h}, "zeros", true)),
        w3(tensor_of("gemm3.weight", {kClasses, h}, "linear_weight", true)),
        b3(tensor_of("gemm3.bias", {kClasses}, "zeros", true)),
        g1(tensor_of("norm1.weight", {h}, "ones", true)),
        n1(tensor_of("norm1.bias", {h}, "zeros", true)),
        g2(tensor_of("norm2.weight", {h}, "ones", true)),
        n2(tensor_of("norm2.bias", {h}, "zeros", true)) {}

  std::vector<Tensor> params() const { return {w1, b1, w2, b2, w3, b3, g1, n1, g2, n2}; }

  std::vector<Tensor> forward(std::span<const Tensor> in) const {
    const Attrs ln{{"normalized_shape", std::vector<int64_t>{hidden}}};
    Tensor h = call1("linear", {in[0], w1, b1});
    h = call1("tanh", {call1("layer_norm", {h, g1, n1}, ln)});
    Tensor r = call1("linear", {h, w2, b2});
    r = call1("layer_norm", {r, g2, n2}, ln);
    Tensor s = call1("sigmoid", {call1("add", {r, h})});
    Tensor logits = call1("linear", {s, w3, b3});
    return {call1("cross_entropy", {logits, in[1]}), logits};
  }
};

Tensor named_input(Tensor t, const char* name) {
  t.impl()->name = name;
  return t;
}

std::vector<Tensor> batch_of(int64_t b) {
  Tensor x = tensor_of("x", {b, kFeatures}, "normal", false);
  Tensor y = Tensor::empty({b}, DType::Int64);
  for (int64_t i = 0; i < b; ++i) y.data<int64_t>()[i] = i % kClasses;
  return {named_input(x, "x"), named_input(y, "y")};
}

std::unique_ptr<runtime::Runtime> load(compiler::GraphSpec spec, ThreadPool& pool) {
  pef::ProgramDesc p = compiler::compile_program({std::move(spec)}, {});
  return std::make_unique<runtime::Runtime>(pef::parse_pef(pef::serialize_pef(p)), pool, nullptr);
}

void run_resffn(benchmark::State& state, bool train) {
  const int64_t b = state.range(0), h = state.range(1);
  ThreadPool pool(2);
  ThreadPool::Scope scope(&pool);
  ResFFN net(h);
  compiler::GraphSpec spec;
  spec.name = "resffn";
  spec.inputs = batch_of(b);
  spec.model = [&net](std::span<const Tensor> in) { return net.forward(in); };
  spec.backward.loss_indices = {0};
  spec.inference = !train;
  if (train) {
    compiler::OptimizerSpec sgd;
    sgd.kind = compiler::OptimizerKind::SGD;
    sgd.defaults = Attrs{{"lr", 0.01}, {"momentum", 0.9}};
    sgd.groups.push_back({net.params(), {}});
    spec.optimizers.push_back(sgd);
  }
  auto rt = load(spec, pool);
  runtime::RunRequest r;
  r.inputs = batch_of(b);
  r.outputs = {rt->program().desc().tensors[static_cast<size_t>(rt->program().desc().graphs[0].outputs[0])].name};
  rt->run(r);  // warm-up: first touch of every device page
  for (auto _ : state) benchmark::DoNotOptimize(rt->run(r));
  const double flops = 2.0 * static_cast<double>(b) *
                       static_cast<double>(kFeatures * h + h * h + kClasses * h) * (train ? 3.0 : 1.0);
  state.counters["GFLOP_per_s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["samples_per_s"] =
      benchmark::Counter(static_cast<double>(b), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_ResFFNTrainStep(benchmark::State& state) { run_resffn(state, true); }
void BM_ResFFNInference(benchmark::State& state) { run_resffn(state, false); }

// y = relu(x * w) on 16 floats: one fused kernel in one FWD section.
std::unique_ptr<runtime::Runtime> tiny(ThreadPool& pool, Tensor& w) {
  w = named_input(Tensor::zeros({16}, DType::Float32), "w");
  compiler::GraphSpec spec;
  spec.name = "tiny";
  spec.inputs = {named_input(Tensor::zeros({16}, DType::Float32), "x")};
  spec.inference = true;
  spec.model = [&w](std::span<const Tensor> in) -> std::vector<Tensor> {
    return {call1("relu", {call1("mul", {in[0], w})})};
  };
  return load(spec, pool);
}

void BM_TinySectionCall(benchmark::State& state) {
  ThreadPool pool(2);
  ThreadPool::Scope scope(&pool);
  Tensor w;
  auto rt = tiny(pool, w);
  runtime::RunRequest r;
  r.section_ids = {0};
  r.outputs = {"x"};  // read back 64 bytes, the least a run returns
  for (auto _ : state) benchmark::DoNotOptimize(rt->run(r));
}

void BM_TinyRunLatency(benchmark::State& state) {
  ThreadPool pool(2);
  ThreadPool::Scope scope(&pool);
  Tensor w;
  auto rt = tiny(pool, w);
  runtime::RunRequest r;
  r.inputs = {named_input(Tensor::zeros({16}, DType::Float32), "x")};
  constexpr int kRuns = 10000;
  std::vector<double> us(kRuns);
  for (auto _ : state) {
    for (int i = 0; i < kRuns; ++i) {
      const auto t0 = Clock::now();
      benchmark::DoNotOptimize(rt->run(r));
      us[static_cast<size_t>(i)] = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    }
  }
  std::sort(us.begin(), us.end());
  state.counters["p50_us"] = us[kRuns / 2];
  state.counters["p99_us"] = us[kRuns * 99 / 100];
  state.counters["p99_over_p50"] = us[kRuns * 99 / 100] / us[kRuns / 2];
}

}  // namespace

BENCHMARK(BM_ResFFNTrainStep)
    ->Args({16, 256})
    ->Args({256, 1024})
    ->Args({1024, 2048})
    ->ArgNames({"batch", "hidden"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_ResFFNInference)
    ->Args({16, 256})
    ->Args({256, 1024})
    ->Args({1024, 2048})
    ->ArgNames({"batch", "hidden"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_TinySectionCall)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TinyRunLatency)->Iterations(1)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
