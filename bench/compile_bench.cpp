// Compile time: an MLP of L layers (linear + relu, hidden 64, batch 32) with
// a cross-entropy loss and SGD with momentum, traced, differentiated,
// optimized at o1, planned and lowered to a PEF program (and, in the
// second benchmark, serialized). The target: 1,000 layers in at most a
// second, growing about linearly from 250 to 2,000.
#include <benchmark/benchmark.h>

#include "compiler/compile.h"
#include "engine/pef/writer.h"

namespace {

using namespace samba;

struct Mlp {
  std::vector<Tensor> weights, biases;
  explicit Mlp(int layers) {
    for (int i = 0; i < layers; ++i) {
      Tensor w = Tensor::zeros({64, 64}, DType::Float32), b = Tensor::zeros({64}, DType::Float32);
      w.impl()->name = "l" + std::to_string(i) + ".weight";
      b.impl()->name = "l" + std::to_string(i) + ".bias";
      w.impl()->requires_grad = b.impl()->requires_grad = true;
      weights.push_back(w);
      biases.push_back(b);
    }
  }
};

compiler::GraphSpec spec_of(const Mlp& m) {
  compiler::GraphSpec s;
  s.name = "mlp";
  Tensor x = Tensor::zeros({32, 64}, DType::Float32), y = Tensor::zeros({32}, DType::Int64);
  x.impl()->name = "x";
  y.impl()->name = "y";
  s.inputs = {x, y};
  s.model = [&m](std::span<const Tensor> in) -> std::vector<Tensor> {
    Tensor h = in[0];
    for (size_t i = 0; i < m.weights.size(); ++i)
      h = call1("relu", {call1("linear", {h, m.weights[i], m.biases[i]})});
    return {call1("cross_entropy", {h, in[1]})};
  };
  compiler::OptimizerSpec sgd;
  sgd.kind = compiler::OptimizerKind::SGD;
  sgd.defaults = Attrs{{"lr", 0.1}, {"momentum", 0.9}};
  compiler::ParamGroup group;
  for (size_t i = 0; i < m.weights.size(); ++i) {
    group.params.push_back(m.weights[i]);
    group.params.push_back(m.biases[i]);
  }
  sgd.groups.push_back(std::move(group));
  s.optimizers.push_back(std::move(sgd));
  return s;
}

void BM_CompileMlp(benchmark::State& state) {
  const Mlp m(static_cast<int>(state.range(0)));
  const compiler::GraphSpec s = spec_of(m);
  compiler::CompileOptions o;
  o.embed_weights = false;
  size_t kernels = 0;
  for (auto _ : state) {
    pef::ProgramDesc p = compiler::compile_program({s}, o);
    kernels = p.kernels.size();
    benchmark::DoNotOptimize(p);
  }
  state.counters["layers"] = static_cast<double>(state.range(0));
  state.counters["kernels"] = static_cast<double>(kernels);
  state.counters["us_per_layer"] =
      benchmark::Counter(static_cast<double>(state.range(0)), benchmark::Counter::kIsIterationInvariantRate |
                                                                benchmark::Counter::kInvert);
}
BENCHMARK(BM_CompileMlp)->Arg(250)->Arg(500)->Arg(1000)->Arg(2000)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_CompileAndSerializeMlp(benchmark::State& state) {
  const Mlp m(static_cast<int>(state.range(0)));
  const compiler::GraphSpec s = spec_of(m);
  compiler::CompileOptions o;
  o.embed_weights = false;
  for (auto _ : state) {
    auto bytes = pef::serialize_pef(compiler::compile_program({s}, o));
    benchmark::DoNotOptimize(bytes);
  }
}
BENCHMARK(BM_CompileAndSerializeMlp)->Arg(1000)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
