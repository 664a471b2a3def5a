// The runtime's own costs, on programs compiled for the purpose:
//   - the fixed cost of one section call on a tiny graph (one fused
//     elementwise kernel over 16 floats): through run() with section_ids,
//     and through ExecutionContext::run_section directly;
//   - the latency distribution of a whole run() on that graph (input bound,
//     output returned) over 10,000 runs: p50, p99 and their ratio;
//   - a fused elementwise chain, sigmoid(tanh(0.5 x + 0.25) * x) + x, over
//     16M floats compiled into one kernel, against the same ops called
//     eagerly one by one (each a pass over memory): bytes_per_second counts
//     the chain's own traffic (x read once, the result written once), to be
//     read against memcpy's rate over the same bytes (BM_MemcpyChainBytes,
//     in the same run) and in machine_bench. The compiled chain's counters
//     say whether the runtime runs it as one fused pass and the bytes that
//     pass moves (moved_MB: x read and the result written, each once, when
//     no intermediate is stored).
// All on a pool of 2 threads.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

#include "compiler/compile.h"
#include "engine/ops/autograd.h"
#include "engine/ops/operands.h"
#include "engine/pef/reader.h"
#include "engine/pef/writer.h"
#include "engine/runtime/fused_elementwise.h"
#include "engine/runtime/runtime.h"

using namespace samba;

namespace {

constexpr int kThreads = 2;
constexpr int64_t kTiny = 16;
constexpr int64_t kChain = int64_t{1} << 24;

Tensor input_named(int64_t n, const char* name) {
  Tensor t = Tensor::empty({n}, DType::Float32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(i % 101) * 0.02f - 1.0f;
  t.impl()->name = name;
  return t;
}

Tensor tiny_model(const Tensor& x) {
  return call1("relu",
               {call1("add", {call1("mul", {x, ops::wrap_scalar(2.0)}), ops::wrap_scalar(1.0)})});
}

Tensor chain_model(const Tensor& x) {
  Tensor t = call1(
      "tanh", {call1("add", {call1("mul", {x, ops::wrap_scalar(0.5)}), ops::wrap_scalar(0.25)})});
  return call1("add", {call1("sigmoid", {call1("mul", {t, x})}), x});
}

pef::ProgramDesc compile_inference(int64_t n, Tensor (*model)(const Tensor&)) {
  compiler::GraphSpec s;
  s.name = "elementwise";
  s.inference = true;
  s.inputs = {input_named(n, "x")};
  s.model = [model](std::span<const Tensor> in) -> std::vector<Tensor> { return {model(in[0])}; };
  return pef::parse_pef(pef::serialize_pef(compiler::compile_program({s}, {})));
}

// A program with an execution context of its own, run on the pool's arena.
struct DirectRun {
  std::shared_ptr<const runtime::Program> program;
  runtime::DeviceMemory state;
  std::unique_ptr<runtime::ExecutionContext> ctx;
  runtime::RunValues values;

  explicit DirectRun(pef::ProgramDesc desc)
      : program(std::make_shared<const runtime::Program>(std::move(desc))),
        state(program->desc().memory.arena_bytes),
        ctx(std::make_unique<runtime::ExecutionContext>(program, state)) {
    values.argins = &ctx->argin_values();
    // The constants (the chain's 0.5 and 0.25), as a Runtime's load does.
    runtime::write_initial_values(program->desc(), state);
  }
  const runtime::KernelPlan& only_kernel() const {
    return program->kernels()[static_cast<size_t>(program->sections()[0].kernels[0])];
  }
};

// ---- the tiny graph ------------------------------------------------------------

void BM_SectionCallRun(benchmark::State& state) {
  ThreadPool pool(kThreads);
  runtime::Runtime rt(compile_inference(kTiny, tiny_model), pool, nullptr);
  runtime::RunRequest r;
  r.section_ids = {rt.program().sections()[0].id};
  rt.run(r);
  for (auto _ : state) benchmark::DoNotOptimize(rt.run(r));
  state.counters["kernels"] = static_cast<double>(rt.program().sections()[0].kernels.size());
}
BENCHMARK(BM_SectionCallRun)->UseRealTime();

// Times run_section of section 0 on the pool's arena, after one untimed call.
void time_first_section(benchmark::State& state, ThreadPool& pool, DirectRun& d) {
  pool.arena().execute([&] {
    ThreadPool::Scope scope(&pool);
    d.ctx->run_section(0, d.values);
    for (auto _ : state) {
      d.ctx->run_section(0, d.values);
      benchmark::ClobberMemory();
    }
  });
}

void BM_SectionCallDirect(benchmark::State& state) {
  ThreadPool pool(kThreads);
  DirectRun d(compile_inference(kTiny, tiny_model));
  time_first_section(state, pool, d);
  state.counters["kernels"] = static_cast<double>(d.program->sections()[0].kernels.size());
}
BENCHMARK(BM_SectionCallDirect)->UseRealTime();

// 10,000 whole runs (bind x, run FWD, return the output), each timed.
void BM_TinyRunLatency(benchmark::State& state) {
  ThreadPool pool(kThreads);
  runtime::Runtime rt(compile_inference(kTiny, tiny_model), pool, nullptr);
  runtime::RunRequest r;
  r.inputs = {input_named(kTiny, "x")};
  for (int i = 0; i < 100; ++i) rt.run(r);
  std::vector<double> ns;
  ns.reserve(static_cast<size_t>(state.max_iterations));
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(rt.run(r));
    ns.push_back(
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ns.begin(), ns.end());
  auto rank = [&](double q) {
    return ns[static_cast<size_t>(std::ceil(q * static_cast<double>(ns.size()))) - 1];
  };
  const double p50 = rank(0.50), p99 = rank(0.99);
  state.counters["p50_us"] = p50 * 1e-3;
  state.counters["p99_us"] = p99 * 1e-3;
  state.counters["p999_us"] = rank(0.999) * 1e-3;
  state.counters["max_us"] = ns.back() * 1e-3;
  state.counters["p99_over_p50"] = p99 / p50;
}
BENCHMARK(BM_TinyRunLatency)->Iterations(10000)->UseRealTime()->Unit(benchmark::kMicrosecond);

// ---- the elementwise chain -----------------------------------------------------

void BM_ElementwiseChainCompiled(benchmark::State& state) {
  ThreadPool pool(kThreads);
  DirectRun d(compile_inference(kChain, chain_model));
  const pef::ProgramDesc& desc = d.program->desc();
  d.ctx->tensor(desc.graphs[0].inputs[0]).copy_from(input_named(kChain, "x"));
  time_first_section(state, pool, d);
  state.SetBytesProcessed(state.iterations() * 8 * kChain);
  state.counters["kernels"] = static_cast<double>(d.program->sections()[0].kernels.size());
  state.counters["GFLOPS_pef"] = benchmark::Counter(d.only_kernel().flops * 1e-9,
                                                    benchmark::Counter::kIsIterationInvariantRate);
  const auto& fused = d.only_kernel().fused;
  state.counters["fused"] = fused ? 1 : 0;
  state.counters["moved_MB"] = d.only_kernel().bytes * 1e-6;
}
BENCHMARK(BM_ElementwiseChainCompiled)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_ElementwiseChainEager(benchmark::State& state) {
  ThreadPool pool(kThreads);
  ThreadPool::Scope scope(&pool);
  Tensor x = input_named(kChain, "x");
  autograd::NoGradGuard ng;
  for (auto _ : state) benchmark::DoNotOptimize(chain_model(x));
  state.SetBytesProcessed(state.iterations() * 8 * kChain);
}
BENCHMARK(BM_ElementwiseChainEager)->UseRealTime()->Unit(benchmark::kMillisecond);

// The floor for the chain: copying x's bytes to another buffer of the same
// size, split over the pool as the fused pass is (read 4 bytes, write 4
// bytes per element).
void BM_MemcpyChainBytes(benchmark::State& state) {
  ThreadPool pool(kThreads);
  ThreadPool::Scope scope(&pool);
  Tensor x = input_named(kChain, "x");
  Tensor y = Tensor::empty({kChain}, DType::Float32);
  const float* src = x.data<float>();
  float* dst = y.data<float>();
  pool.arena().execute([&] {
    for (auto _ : state) {
      parallel_for(kChain, int64_t{1} << 16, [&](int64_t b, int64_t e) {
        std::memcpy(dst + b, src + b, static_cast<size_t>(e - b) * sizeof(float));
      });
      benchmark::ClobberMemory();
    }
  });
  state.SetBytesProcessed(state.iterations() * 8 * kChain);
}
BENCHMARK(BM_MemcpyChainBytes)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
