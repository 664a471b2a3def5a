// The nn ops of the example models, called eagerly on the session pool (2
// threads here): layer_norm forward and backward at the ResFFNLogReg hidden
// sizes, softmax forward and backward, cross_entropy forward and backward
// (10 classes as in the models, and 1000), and conv2d forward and both
// backward products at the digits conv net's shapes and at a larger
// ResNet-like layer, and max_pool2d forward and backward (2x2, stride 2).
//
// Counters: bytes_per_second counts what the op must read and write at least
// (each input and output once), to be read against memcpy's rate in
// machine_bench; GFLOPS counts 2 m n k of a convolution's implicit GEMM and
// is left out where the op is not arithmetic-bound.
#include <benchmark/benchmark.h>

#include "engine/ops/autograd.h"
#include "engine/ops/registry.h"

using namespace samba;

namespace {

Tensor filled(const Dims& shape, float scale, int salt = 0) {
  Tensor t = Tensor::empty(shape, DType::Float32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = scale * static_cast<float>(((i + salt) * 7919) % 1000 - 500) / 500.0f;
  return t;
}

Tensor labels(int64_t n, int64_t classes) {
  Tensor t = Tensor::empty({n}, DType::Int64);
  for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = (i * 7) % classes;
  return t;
}

void set_rates(benchmark::State& state, double bytes, double flops = 0) {
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
  if (flops > 0)
    state.counters["GFLOPS"] =
        benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// ---- layer_norm ---------------------------------------------------------------

Attrs norm_attrs(int64_t h) { return {{"normalized_shape", std::vector<int64_t>{h}}}; }

void BM_LayerNormForward(benchmark::State& state) {
  const int64_t rows = state.range(0), h = state.range(1);
  Tensor x = filled({rows, h}, 1.0f), w = filled({h}, 1.0f, 1), b = filled({h}, 0.1f, 2);
  autograd::NoGradGuard ng;
  const OpDef& op = OpRegistry::global().get("layer_norm");
  const Attrs a = norm_attrs(h);
  std::array<Tensor, 3> in{x, w, b};
  for (auto _ : state) benchmark::DoNotOptimize(call(op, in, a));
  set_rates(state, 4.0 * static_cast<double>(2 * rows * h));
}
BENCHMARK(BM_LayerNormForward)
    ->ArgNames({"rows", "hidden"})
    ->Args({256, 1024})
    ->Args({1024, 2048})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// dx, dweight, dbias from grad and x: reads two arrays, writes one.
void BM_LayerNormBackward(benchmark::State& state) {
  const int64_t rows = state.range(0), h = state.range(1);
  Tensor g = filled({rows, h}, 1.0f, 3), x = filled({rows, h}, 1.0f), w = filled({h}, 1.0f, 1);
  autograd::NoGradGuard ng;
  const OpDef& op = OpRegistry::global().get("layer_norm_backward");
  const Attrs a = norm_attrs(h);
  std::array<Tensor, 3> in{g, x, w};
  for (auto _ : state) benchmark::DoNotOptimize(call(op, in, a));
  set_rates(state, 4.0 * static_cast<double>(3 * rows * h));
}
BENCHMARK(BM_LayerNormBackward)
    ->ArgNames({"rows", "hidden"})
    ->Args({256, 1024})
    ->Args({1024, 2048})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// ---- softmax ------------------------------------------------------------------

void BM_SoftmaxForward(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  Tensor x = filled({rows, cols}, 4.0f);
  autograd::NoGradGuard ng;
  const OpDef& op = OpRegistry::global().get("softmax");
  std::array<Tensor, 1> in{x};
  const Attrs a{{"dim", int64_t{-1}}};
  for (auto _ : state) benchmark::DoNotOptimize(call(op, in, a));
  set_rates(state, 4.0 * static_cast<double>(2 * rows * cols));
}
BENCHMARK(BM_SoftmaxForward)
    ->ArgNames({"rows", "cols"})
    ->Args({1024, 10})
    ->Args({1024, 2048})
    ->Args({256, 32768})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

void BM_SoftmaxBackward(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  Tensor g = filled({rows, cols}, 1.0f, 5), y = filled({rows, cols}, 0.5f, 6);
  autograd::NoGradGuard ng;
  const OpDef& op = OpRegistry::global().get("softmax_backward");
  std::array<Tensor, 2> in{g, y};
  const Attrs a{{"dim", int64_t{-1}}};
  for (auto _ : state) benchmark::DoNotOptimize(call(op, in, a));
  set_rates(state, 4.0 * static_cast<double>(3 * rows * cols));
}
BENCHMARK(BM_SoftmaxBackward)
    ->ArgNames({"rows", "cols"})
    ->Args({1024, 10})
    ->Args({1024, 2048})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// ---- cross_entropy --------------------------------------------------------------

void BM_CrossEntropyForward(benchmark::State& state) {
  const int64_t rows = state.range(0), classes = state.range(1);
  Tensor x = filled({rows, classes}, 4.0f), y = labels(rows, classes);
  autograd::NoGradGuard ng;
  const OpDef& op = OpRegistry::global().get("cross_entropy");
  std::array<Tensor, 2> in{x, y};
  const Attrs none;
  for (auto _ : state) benchmark::DoNotOptimize(call(op, in, none));
  set_rates(state, 4.0 * static_cast<double>(rows * classes) + 8.0 * static_cast<double>(rows));
}
BENCHMARK(BM_CrossEntropyForward)
    ->ArgNames({"rows", "classes"})
    ->Args({16, 10})
    ->Args({1024, 10})
    ->Args({1024, 1000})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// The gradient with respect to the scores, from the loss's gradient (a scalar).
void BM_CrossEntropyBackward(benchmark::State& state) {
  const int64_t rows = state.range(0), classes = state.range(1);
  Tensor x = filled({rows, classes}, 4.0f), y = labels(rows, classes);
  Tensor g = Tensor::scalar(1.0, DType::Float32);
  autograd::NoGradGuard ng;
  const OpDef& op = OpRegistry::global().get("cross_entropy_backward");
  std::array<Tensor, 3> in{g, x, y};
  const Attrs none;
  for (auto _ : state) benchmark::DoNotOptimize(call(op, in, none));
  set_rates(state, 4.0 * static_cast<double>(2 * rows * classes) + 8.0 * static_cast<double>(rows));
}
BENCHMARK(BM_CrossEntropyBackward)
    ->ArgNames({"rows", "classes"})
    ->Args({16, 10})
    ->Args({1024, 10})
    ->Args({1024, 1000})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// ---- conv2d ---------------------------------------------------------------------

// Args: batch, in channels, side (square images), out channels; 3x3, stride 1,
// padding 1, so the output is side x side.
struct ConvShape {
  int64_t n, c, side, o;
  explicit ConvShape(const benchmark::State& s)
      : n(s.range(0)), c(s.range(1)), side(s.range(2)), o(s.range(3)) {}
  Dims input() const { return {n, c, side, side}; }
  Dims weight() const { return {o, c, 3, 3}; }
  Dims output() const { return {n, o, side, side}; }
  double flops() const {
    return 2.0 * static_cast<double>(n * side * side) * static_cast<double>(o * c * 9);
  }
  double bytes() const {
    return 4.0 * static_cast<double>(numel_of(input()) + numel_of(weight()) + numel_of(output()));
  }
};

const Attrs& conv_attrs() {
  static const Attrs a{{"padding", std::vector<int64_t>{1, 1}}};
  return a;
}

void BM_Conv2dForward(benchmark::State& state) {
  const ConvShape s(state);
  Tensor x = filled(s.input(), 1.0f), w = filled(s.weight(), 0.1f, 1), b = filled({s.o}, 0.1f, 2);
  autograd::NoGradGuard ng;
  const OpDef& op = OpRegistry::global().get("conv2d");
  std::array<Tensor, 3> in{x, w, b};
  for (auto _ : state) benchmark::DoNotOptimize(call(op, in, conv_attrs()));
  set_rates(state, s.bytes(), s.flops());
}

void BM_Conv2dBackwardInput(benchmark::State& state) {
  const ConvShape s(state);
  Tensor g = filled(s.output(), 1.0f, 3), w = filled(s.weight(), 0.1f, 1);
  autograd::NoGradGuard ng;
  const OpDef& op = OpRegistry::global().get("conv2d_backward_input");
  Attrs a = conv_attrs();
  const Dims input = s.input();
  a.set("input_size", std::vector<int64_t>(input.begin(), input.end()));
  std::array<Tensor, 2> in{g, w};
  for (auto _ : state) benchmark::DoNotOptimize(call(op, in, a));
  set_rates(state, s.bytes(), s.flops());
}

void BM_Conv2dBackwardWeight(benchmark::State& state) {
  const ConvShape s(state);
  Tensor g = filled(s.output(), 1.0f, 3), x = filled(s.input(), 1.0f);
  autograd::NoGradGuard ng;
  const OpDef& op = OpRegistry::global().get("conv2d_backward_weight");
  Attrs a = conv_attrs();
  const Dims weight = s.weight();
  a.set("weight_size", std::vector<int64_t>(weight.begin(), weight.end()));
  std::array<Tensor, 2> in{g, x};
  for (auto _ : state) benchmark::DoNotOptimize(call(op, in, a));
  set_rates(state, s.bytes(), s.flops());
}

// The digits conv net's two layers at batch 256, and a 56x56 layer of 64
// channels at batch 8 (a ResNet stage).
#define CONV_SHAPES(bm)                            \
  BENCHMARK(bm)                                    \
      ->ArgNames({"batch", "cin", "side", "cout"}) \
      ->Args({256, 1, 8, 16})                      \
      ->Args({256, 16, 8, 32})                     \
      ->Args({8, 64, 56, 64})                      \
      ->UseRealTime()                              \
      ->Unit(benchmark::kMicrosecond)
CONV_SHAPES(BM_Conv2dForward);
CONV_SHAPES(BM_Conv2dBackwardInput);
CONV_SHAPES(BM_Conv2dBackwardWeight);

// ---- max_pool2d -------------------------------------------------------------------

// Args: batch, channels, side; 2x2 windows, stride 2 (the digits conv net's
// pooling, and a 56x56 ResNet-like stage).
Dims pool_input(const benchmark::State& s) { return {s.range(0), s.range(1), s.range(2), s.range(2)}; }
const Attrs& pool_attrs() {
  static const Attrs a{{"kernel_size", std::vector<int64_t>{2, 2}}};
  return a;
}

// The op's kernel alone, on an output allocated once, as in a compiled
// program (an eager call's time is mostly the first touch of a new output).
void run_pool_kernel(benchmark::State& state, const char* op, std::vector<Tensor> in,
                     const Dims& out_shape) {
  const OpDef& def = OpRegistry::global().get(op);
  const Attrs attrs = def.resolve(pool_attrs());
  std::vector<Tensor> out{filled(out_shape, 0.0f)};
  KernelContext kc{def, in, out, attrs};
  for (auto _ : state) {
    def.kernel(kc);
    benchmark::ClobberMemory();
  }
}

void BM_MaxPool2dForward(benchmark::State& state) {
  const Dims in = pool_input(state);
  run_pool_kernel(state, "max_pool2d", {filled(in, 1.0f)}, {in[0], in[1], in[2] / 2, in[3] / 2});
  set_rates(state, 4.0 * static_cast<double>(numel_of(in)) * 1.25);
}

void BM_MaxPool2dBackward(benchmark::State& state) {
  const Dims in = pool_input(state);
  run_pool_kernel(state, "max_pool2d_backward",
                  {filled({in[0], in[1], in[2] / 2, in[3] / 2}, 1.0f, 5), filled(in, 1.0f)}, in);
  set_rates(state, 4.0 * static_cast<double>(numel_of(in)) * 2.25);
}

#define POOL_SHAPES(bm)                    \
  BENCHMARK(bm)                            \
      ->ArgNames({"batch", "c", "side"})   \
      ->Args({256, 16, 8})                 \
      ->Args({256, 32, 8})                 \
      ->Args({8, 64, 56})                  \
      ->UseRealTime()                      \
      ->Unit(benchmark::kMicrosecond)
POOL_SHAPES(BM_MaxPool2dForward);
POOL_SHAPES(BM_MaxPool2dBackward);

}  // namespace

BENCHMARK_MAIN();
