// GEMM throughput of the contraction ops: linear forward (the MLP layer
// shape 1024 x 784 -> 2048 with bias, in fp32 and in bf16), the two backward
// products of that layer (dX = dY W, dW = dYᵀ X), a smaller layer, the raw
// GEMM layer with each fused epilogue, and Eigen's own single-threaded SGEMM
// of the same shape as the per-core reference. Figures are GFLOP/s (2 m n k per product).
#include <benchmark/benchmark.h>

#include <Eigen/Core>

#include "bench/flop_counter.h"
#include "engine/core/parallel.h"
#include "engine/kernels/gemm.h"
#include "engine/ops/autograd.h"
#include "engine/ops/registry.h"

using namespace samba;

namespace {

Tensor filled(const Dims& shape, float scale) {
  Tensor t = Tensor::empty(shape, DType::Float32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = scale * static_cast<float>((i * 7919) % 1000 - 500) / 500.0f;
  return t;
}

// Runs the body on a pool of `threads` (the session's pool when 0) with the
// given float kernel.
template <typename F>
void on_pool(int threads, ops::GemmKernel kernel, F body) {
  ops::set_gemm_kernel(kernel);
  if (threads == 0) {
    body();
  } else {
    ThreadPool pool(threads);
    ThreadPool::Scope scope(&pool);
    body();
  }
  ops::set_gemm_kernel(ops::GemmKernel::Auto);
}

// Args: batch, in, out, threads (0 = the default pool), kernel (0 = auto, 1 = Eigen tiles).
void BM_LinearForward(benchmark::State& state) {
  const int64_t batch = state.range(0), in = state.range(1), out = state.range(2);
  const auto kernel = state.range(4) ? ops::GemmKernel::Eigen : ops::GemmKernel::Auto;
  on_pool(static_cast<int>(state.range(3)), kernel, [&] {
    Tensor x = filled({batch, in}, 1.0f), w = filled({out, in}, 0.05f), b = filled({out}, 0.1f);
    autograd::NoGradGuard ng;
    FlopCounter fc(state, batch, out, in);
    for (auto _ : state) benchmark::DoNotOptimize(call1("linear", {x, w, b}));
  });
}
BENCHMARK(BM_LinearForward)
    ->ArgNames({"batch", "in", "out", "threads", "eigen"})
    ->Args({1024, 784, 2048, 0, 0})
    ->Args({1024, 784, 2048, 0, 1})
    ->Args({1024, 784, 2048, 1, 0})
    ->Args({256, 784, 1024, 0, 0})
    ->Args({256, 784, 1024, 0, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The same linear on bf16 input, weight and bias (fp32 accumulation, the
// output rounded to bf16 once), beside BM_LinearForward's fp32 rows: the
// bf16 kernels' gain (vdpbf16ps at the avx512_bf16 level, the fp32 kernel on
// widened panels below it). Args: batch, in, out, threads (0 = the default pool).
void BM_LinearForwardBf16(benchmark::State& state) {
  const int64_t batch = state.range(0), in = state.range(1), out = state.range(2);
  on_pool(static_cast<int>(state.range(3)), ops::GemmKernel::Auto, [&] {
    Tensor x = filled({batch, in}, 1.0f).to(DType::BFloat16);
    Tensor w = filled({out, in}, 0.05f).to(DType::BFloat16);
    Tensor b = filled({out}, 0.1f).to(DType::BFloat16);
    autograd::NoGradGuard ng;
    FlopCounter fc(state, batch, out, in);
    for (auto _ : state) benchmark::DoNotOptimize(call1("linear", {x, w, b}));
  });
}
BENCHMARK(BM_LinearForwardBf16)
    ->ArgNames({"batch", "in", "out", "threads"})
    ->Args({1024, 784, 2048, 0})
    ->Args({1024, 784, 2048, 1})
    ->Args({256, 784, 1024, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// dX = dY W: (batch, out) @ (out, in).
void BM_LinearBackwardInput(benchmark::State& state) {
  const int64_t batch = state.range(0), in = state.range(1), out = state.range(2);
  Tensor dy = filled({batch, out}, 1.0f), w = filled({out, in}, 0.05f);
  autograd::NoGradGuard ng;
  FlopCounter fc(state, batch, in, out);
  for (auto _ : state) benchmark::DoNotOptimize(call1("matmul", {dy, w}));
}
BENCHMARK(BM_LinearBackwardInput)
    ->ArgNames({"batch", "in", "out"})
    ->Args({1024, 784, 2048})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// dW = dYᵀ X: (out, batch) @ (batch, in) with dY read transposed in place.
void BM_LinearBackwardWeight(benchmark::State& state) {
  const int64_t batch = state.range(0), in = state.range(1), out = state.range(2);
  Tensor dy = filled({batch, out}, 1.0f), x = filled({batch, in}, 1.0f);
  autograd::NoGradGuard ng;
  FlopCounter fc(state, out, in, batch);
  for (auto _ : state) benchmark::DoNotOptimize(call1("matmul_tn", {dy, x}));
}
BENCHMARK(BM_LinearBackwardWeight)
    ->ArgNames({"batch", "in", "out"})
    ->Args({1024, 784, 2048})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The three GEMMs of ResFFNLogReg (784 features, 10 classes) at each
// benchmarked batch/hidden size, on the session pool: gemm1 784 -> H, gemm2
// H -> H, gemm3 H -> 10, each as the forward product (linear with bias) and
// the two backward products (dX = dY W, dW = dYᵀ X; gemm1 has no dX, the
// image needs no gradient). Args: batch, in, out, product (0 fwd, 1 dX, 2 dW).
void BM_ModelGemm(benchmark::State& state) {
  const int64_t batch = state.range(0), in = state.range(1), out = state.range(2);
  const int64_t product = state.range(3);
  Tensor x = filled({batch, in}, 1.0f), w = filled({out, in}, 0.05f), b = filled({out}, 0.1f);
  Tensor dy = filled({batch, out}, 1.0f);
  autograd::NoGradGuard ng;
  FlopCounter fc(state, batch, out, in);
  if (product == 0) {
    for (auto _ : state) benchmark::DoNotOptimize(call1("linear", {x, w, b}));
  } else if (product == 1) {
    for (auto _ : state) benchmark::DoNotOptimize(call1("matmul", {dy, w}));
  } else {
    for (auto _ : state) benchmark::DoNotOptimize(call1("matmul_tn", {dy, x}));
  }
  static const char* const kProducts[] = {"fwd", "dX", "dW"};
  state.SetLabel(kProducts[product]);
}
void model_gemm_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"batch", "in", "out", "product"});
  const int64_t sizes[][2] = {{16, 256}, {256, 1024}, {1024, 2048}};
  for (const auto& s : sizes) {
    const int64_t batch = s[0], h = s[1];
    for (int64_t p : {0, 2}) b->Args({batch, 784, h, p});
    for (int64_t p : {0, 1, 2}) b->Args({batch, h, h, p});
    for (int64_t p : {0, 1, 2}) b->Args({batch, h, 10, p});
  }
}
BENCHMARK(BM_ModelGemm)->Apply(model_gemm_shapes)->Unit(benchmark::kMicrosecond)->UseRealTime();

// c = op(a) @ op(b) as GEMM-layer arguments; a transposed operand is stored
// (k, m) or (n, k).
ops::GemmArgs<float> gemm_args(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                               const Tensor& c) {
  ops::GemmArgs<float> g;
  g.m = c.shape()[0], g.n = c.shape()[1], g.k = trans_b ? b.shape()[1] : b.shape()[0];
  g.a = {a.data<float>(), a.shape()[1], trans_a};
  g.b = {b.data<float>(), b.shape()[1], trans_b};
  g.c = c.data<float>();
  g.ldc = g.n;
  return g;
}

// The GEMM layer alone: no op dispatch, the output reused.
void time_gemm(benchmark::State& state, const ops::GemmArgs<float>& g) {
  FlopCounter fc(state, static_cast<double>(g.m), static_cast<double>(g.n),
                 static_cast<double>(g.k));
  for (auto _ : state) {
    ops::gemm(g);
    benchmark::ClobberMemory();
  }
}

// The GEMM layer with bias and each activation.
void BM_GemmEpilogue(benchmark::State& state) {
  const int64_t m = 1024, k = 784, n = 2048;
  const auto act = static_cast<ops::Activation>(state.range(0));
  Tensor x = filled({m, k}, 1.0f), w = filled({n, k}, 0.05f), b = filled({n}, 0.1f);
  Tensor c = Tensor::empty({m, n}, DType::Float32);
  ops::GemmArgs<float> g = gemm_args(x, false, w, true, c);
  g.bias = b.data<float>();
  g.act = act;
  time_gemm(state, g);
  state.SetLabel("bias+" + std::string(ops::activation_name(act)));
}
BENCHMARK(BM_GemmEpilogue)->DenseRange(0, 5)->Unit(benchmark::kMillisecond)->UseRealTime();

// The products of a GPT-2 small training step (1024 tokens: batch 8 x 128,
// hidden 768, vocabulary 50257) at the GEMM layer, each in the operand layout
// the step's ops give it: Hugging Face's Conv1D forward (addmm, weight stored
// in x out), its dX (matmul_nt) and dW (matmul_tn), and the LM head's forward
// (linear), dX (matmul) and dW (matmul_tn). Args: m, n, k, trans_a, trans_b,
// threads (0 = the default pool; 1 shows one core's kernel efficiency).
void BM_Gpt2Gemm(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const bool ta = state.range(3) != 0, tb = state.range(4) != 0;
  on_pool(static_cast<int>(state.range(5)), ops::GemmKernel::Auto, [&] {
    Tensor a = filled(ta ? Dims{k, m} : Dims{m, k}, 1.0f);
    Tensor b = filled(tb ? Dims{n, k} : Dims{k, n}, 0.05f);
    Tensor c = Tensor::empty({m, n}, DType::Float32);
    time_gemm(state, gemm_args(a, ta, b, tb, c));
  });
}
void gpt2_gemm_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "n", "k", "ta", "tb", "threads"});
  const int64_t t = 1024, vocab = 50257;
  const int64_t layers[][2] = {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}};
  for (int64_t threads : {0, 1}) {
    for (const auto& l : layers) {
      const int64_t in = l[0], out = l[1];
      b->Args({t, out, in, 0, 0, threads});  // Conv1D forward: x @ W
      b->Args({t, in, out, 0, 1, threads});  // dX = dY @ Wᵀ
      b->Args({in, out, t, 1, 0, threads});  // dW = xᵀ @ dY
    }
    b->Args({t, vocab, 768, 0, 1, threads});  // LM head forward: x @ Wᵀ
    b->Args({t, 768, vocab, 0, 0, threads});  // dX = dLogits @ W
    b->Args({vocab, 768, t, 1, 0, threads});  // dW = dLogitsᵀ @ x
  }
}
BENCHMARK(BM_Gpt2Gemm)->Apply(gpt2_gemm_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();

// Small products on one thread, x @ W with W stored (k, n) as ONNX's MatMul
// and x @ Wᵀ as linear: the shapes where packing the operands costs as much
// as the arithmetic (an ONNX chain's 8 x 32 by 32 x 32, the ResFFN b16
// layers). Args: m, n, k, trans_b.
void BM_SmallGemm(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const bool tb = state.range(3) != 0;
  on_pool(1, ops::GemmKernel::Auto, [&] {
    Tensor a = filled({m, k}, 1.0f);
    Tensor b = filled(tb ? Dims{n, k} : Dims{k, n}, 0.05f);
    Tensor c = Tensor::empty({m, n}, DType::Float32);
    time_gemm(state, gemm_args(a, false, b, tb, c));
  });
}
void small_gemm_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "n", "k", "tb"});
  const int64_t shapes[][3] = {{1, 256, 256},  {4, 256, 256},   {8, 32, 32},    {16, 64, 64},
                               {16, 256, 256}, {32, 128, 128},  {64, 64, 64},   {128, 128, 128},
                               {256, 64, 64},  {512, 128, 128}, {1024, 32, 32}, {64, 512, 128},
                               {16, 256, 784}, {16, 10, 256}};
  for (int64_t tb : {0, 1})
    for (const auto& s : shapes) b->Args({s[0], s[1], s[2], tb});
}
BENCHMARK(BM_SmallGemm)->Apply(small_gemm_shapes)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Eigen's single-threaded SGEMM of the linear forward shape: the per-core reference.
void BM_EigenSgemmSingleThread(benchmark::State& state) {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  Mat x = Mat::Random(m, k), w = Mat::Random(n, k), c(m, n);
  FlopCounter fc(state, m, n, k);
  for (auto _ : state) {
    c.noalias() = x * w.transpose();
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_EigenSgemmSingleThread)
    ->ArgNames({"m", "k", "n"})
    ->Args({1024, 784, 2048})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
