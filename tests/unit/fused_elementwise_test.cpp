// Fused elementwise kernels: a chain the compiler grouped into one kernel runs
// as one tiled pass (engine/runtime/fused_elementwise.h). Each result is
// compared with the program compiled at opt_level 0, where every op is its
// own kernel: the same block functions run on the same values, so the
// results are bit for bit the same.
#include "engine/runtime/fused_elementwise.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "compile_test_util.h"
#include "compiler/compile.h"
#include "engine/ops/operands.h"
#include "engine/runtime/execution_context.h"
#include "engine/runtime/runtime.h"
#include "op_test_util.h"

namespace samba::runtime {
namespace {

using compiler::GraphSpec;
using testing::bytes_of;
using testing::named;
using testing::rand_tensor;
using testing::round_trip;

// 64 rows of 129: tiles of 256 elements straddle rows (a bias is gathered),
// and with two threads the pass is split over tasks.
constexpr int64_t kRows = 64, kCols = 129;

Tensor x_input(DType dt = DType::Float32) { return named(rand_tensor({kRows, kCols}, dt, 3), "x"); }

// sigmoid(tanh(0.5 x + 0.25) * x) + x: scalar operands, a chain of five ops.
Tensor chain(const Tensor& x) {
  Tensor t = call1(
      "tanh", {call1("add", {call1("mul", {x, ops::wrap_scalar(0.5)}), ops::wrap_scalar(0.25)})});
  return call1("add", {call1("sigmoid", {call1("mul", {t, x})}), x});
}

GraphSpec inference(std::function<std::vector<Tensor>(std::span<const Tensor>)> model,
                    std::vector<Tensor> inputs) {
  return testing::inference_graph("chain", std::move(model), std::move(inputs));
}

std::unique_ptr<Runtime> load(const GraphSpec& s, int opt_level, ThreadPool& pool) {
  compiler::CompileOptions o;
  o.opt_level = opt_level;
  return std::make_unique<Runtime>(round_trip(compiler::compile_program({s}, o)), pool, nullptr);
}

int fused_kernels(const Runtime& rt) {
  int n = 0;
  for (const KernelPlan& k : rt.program().kernels()) n += k.fused != nullptr;
  return n;
}

// The outputs of one run of `s` at opt_level 0 and 1 (as raw bytes), after
// checking how many kernels of the fused program run as one pass.
void expect_same_as_unfused(const GraphSpec& s, int want_fused) {
  ThreadPool pool(2);
  auto fused = load(s, 1, pool);
  auto plain = load(s, 0, pool);
  EXPECT_EQ(fused_kernels(*fused), want_fused);
  EXPECT_EQ(fused_kernels(*plain), 0);
  RunRequest r;
  r.inputs = s.inputs;
  auto got = fused->run(r);
  auto want = plain->run(r);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].dtype(), want[i].dtype());
    EXPECT_EQ(bytes_of(got[i]), bytes_of(want[i])) << "output " << i;
  }
}

TEST(FusedElementwise, ChainWithScalarOperandsIsBitIdenticalToTheUnfusedProgram) {
  expect_same_as_unfused(
      inference([](auto in) -> std::vector<Tensor> { return {chain(in[0])}; }, {x_input()}), 1);
}

TEST(FusedElementwise, BiasAlongTheLastDimIsReadRowByRow) {
  Tensor w = named(rand_tensor({kCols}, DType::Float32, 4), "w");
  Tensor b = named(rand_tensor({kCols}, DType::Float32, 5), "b");
  auto model = [&](auto in) -> std::vector<Tensor> {
    Tensor h = call1("gelu", {call1("add", {call1("mul", {in[0], w}), b})},
                     {{"approximate", std::string("tanh")}});
    return {
        call1("leaky_relu", {call1("sub", {h, b}, {{"alpha", 2.0}})}, {{"negative_slope", 0.1}})};
  };
  expect_same_as_unfused(inference(model, {x_input()}), 1);
}

TEST(FusedElementwise, IntermediateReadByAnotherKernelIsStored) {
  // t feeds the chain and a reduction; u is only the chain's.
  auto model = [](auto in) -> std::vector<Tensor> {
    Tensor t = call1("tanh", {call1("mul", {in[0], ops::wrap_scalar(0.5)})});
    Tensor u = call1("exp", {t});
    return {call1("div", {call1("silu", {u}), in[0]}), call1("sum", {t})};
  };
  GraphSpec s = inference(model, {x_input()});
  expect_same_as_unfused(s, 1);
  ThreadPool pool(1);
  auto rt = load(s, 1, pool);
  for (const KernelPlan& k : rt->program().kernels()) {
    if (!k.fused) continue;
    // mul's, exp's and silu's results stay in tiles; tanh's is stored for the sum.
    ASSERT_EQ(k.fused->unstored().size(), 3u) << k.name;
    for (int32_t t : k.fused->unstored()) EXPECT_NE(k.steps[1].outputs[0], t) << k.name;
  }
}

// The memory of a chain's internal intermediates is never written: filled
// with a marker before the run, it still holds it after, while the result
// (the graph's one output) is `want`.
void expect_unstored_untouched(const GraphSpec& s, size_t unstored, const Tensor& want) {
  auto program = std::make_shared<const Program>(round_trip(compiler::compile_program({s}, {})));
  const pef::ProgramDesc& d = program->desc();
  DeviceMemory state(d.memory.arena_bytes);
  ExecutionContext ctx(program, state);
  ThreadPool pool(2);
  ASSERT_EQ(program->sections().size(), 1u);
  const KernelPlan& k = program->kernels()[static_cast<size_t>(program->sections()[0].kernels[0])];
  ASSERT_TRUE(k.fused);
  ASSERT_EQ(k.fused->unstored().size(), unstored);
  // Only bytes no stored tensor of the program shares can keep the marker.
  auto range = [&](int32_t t) {
    const auto& td = d.tensors[static_cast<size_t>(program->root(t))];
    return std::pair<uint64_t, uint64_t>{td.arena_offset, td.arena_offset + td.nbytes};
  };
  std::vector<int32_t> checked;
  for (int32_t u : k.fused->unstored()) {
    bool shared = false;
    for (int32_t t : {d.graphs[0].inputs[0], d.graphs[0].outputs[0]})
      shared |= range(t).first < range(u).second && range(u).first < range(t).second;
    if (!shared) checked.push_back(u);
  }
  ASSERT_FALSE(checked.empty())
      << "the memory plan puts every intermediate over the input or output";
  constexpr uint32_t kMarker = 0x7fc0beefu;
  for (int32_t u : checked) {
    auto* p = static_cast<uint32_t*>(ctx.tensor(u).raw_data());
    std::fill_n(p, ctx.tensor(u).numel(), kMarker);
  }
  write_initial_values(d, state);  // constants and parameters
  ctx.tensor(d.graphs[0].inputs[0]).copy_from(s.inputs[0]);
  RunValues values;
  values.argins = &ctx.argin_values();
  pool.arena().execute([&] {
    ThreadPool::Scope scope(&pool);
    ctx.run_section(0, values);
  });
  for (int32_t u : checked) {
    const auto* p = static_cast<const uint32_t*>(ctx.tensor(u).raw_data());
    EXPECT_EQ(std::count(p, p + ctx.tensor(u).numel(), kMarker), ctx.tensor(u).numel())
        << d.tensors[u].name;
  }
  EXPECT_EQ(bytes_of(ctx.tensor(d.graphs[0].outputs[0]).contiguous()), bytes_of(want));
}

TEST(FusedElementwise, InternalIntermediatesAreNotWrittenToMemory) {
  GraphSpec s =
      inference([](auto in) -> std::vector<Tensor> { return {chain(in[0])}; }, {x_input()});
  autograd::NoGradGuard ng;
  expect_unstored_untouched(s, 5, chain(s.inputs[0]));  // all but the final add
}

// Reading such an intermediate by name would give whatever its bytes held:
// it is refused, naming the kernel; a stored one reads back its value.
TEST(FusedElementwise, ReadingAnIntermediateNeverStoredIsRefused) {
  GraphSpec s =
      inference([](auto in) -> std::vector<Tensor> { return {chain(in[0])}; }, {x_input()});
  ThreadPool pool(2);
  auto rt = load(s, 1, pool);
  RunRequest r;
  r.inputs = s.inputs;
  auto out = rt->run(r);
  const KernelPlan& k = rt->program().kernels()[static_cast<size_t>(rt->program().sections()[0].kernels[0])];
  ASSERT_TRUE(k.fused);
  const std::string inner = rt->program().desc().tensors[static_cast<size_t>(k.fused->unstored()[0])].name;
  try {
    rt->read(inner);
    FAIL() << "reading '" << inner << "' succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::InvalidState);
    EXPECT_NE(std::string(e.what()).find(k.name), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(inner), std::string::npos) << e.what();
  }
  const std::string result = rt->program().desc().tensors[static_cast<size_t>(rt->program().desc().graphs[0].outputs[0])].name;
  EXPECT_EQ(bytes_of(rt->read(result)), bytes_of(out[0]));
  // At opt level 0 every intermediate is stored and readable.
  auto plain = load(s, 0, pool);
  plain->run(r);
  EXPECT_NO_THROW(plain->read(inner));
}

TEST(FusedElementwise, ChainsThatDoNotQualifyRunOpByOp) {
  // A column broadcast, a bf16 chain, a float64 operand and a strided view.
  Tensor col = named(rand_tensor({kRows, 1}, DType::Float32, 6), "col");
  Tensor wide = named(rand_tensor({kRows, kCols}, DType::Float64, 7), "wide");
  auto model = [](auto in) -> std::vector<Tensor> {
    return {call1("tanh", {call1("add", {in[0], in[1]})})};
  };
  expect_same_as_unfused(inference(model, {x_input(), col}), 0);
  expect_same_as_unfused(inference([](auto in) -> std::vector<Tensor> { return {chain(in[0])}; },
                                   {x_input(DType::BFloat16)}),
                         0);
  expect_same_as_unfused(inference(model, {x_input(), wide}), 0);
  // A transposed view read in place: its elements are not the output's order.
  Tensor tall = named(rand_tensor({kCols, kRows}, DType::Float32, 8), "tall");
  auto transposed = [](auto in) -> std::vector<Tensor> {
    Tensor t = call1("transpose", {in[1]}, {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}});
    return {call1("tanh", {call1("add", {in[0], t})})};
  };
  expect_same_as_unfused(inference(transposed, {x_input(), tall}), 0);
}

// One SGD step (lr 0.5) on the weight w of a model whose first output is
// the loss, compiled at `opt_level`: the loss, w's gradient and the updated
// w as bytes. `inspect` sees the loaded program first.
std::vector<std::vector<unsigned char>> sgd_step(
    const Tensor& x, const Tensor& w, std::function<Tensor(const Tensor& x)> loss, int opt_level,
    const std::function<void(const Program&)>& inspect) {
  GraphSpec s;
  s.name = "train";
  s.inputs = {x};
  s.model = [loss](std::span<const Tensor> in) -> std::vector<Tensor> { return {loss(in[0])}; };
  s.backward.loss_indices = {0};
  compiler::OptimizerSpec o;
  o.kind = compiler::OptimizerKind::SGD;
  o.defaults = Attrs{{"lr", 0.5}};
  o.groups.push_back({{w}, {}});
  s.optimizers.push_back(o);
  ThreadPool pool(2);
  auto rt = load(s, opt_level, pool);
  inspect(rt->program());
  RunRequest r;
  r.inputs = s.inputs;
  auto out = rt->run(r);
  return {bytes_of(out[0]), bytes_of(rt->read(w.name(), true)), bytes_of(rt->read(w.name()))};
}

void expect_same_step(const std::vector<std::vector<unsigned char>>& got,
                      const std::vector<std::vector<unsigned char>>& want) {
  EXPECT_EQ(got[0], want[0]) << "loss";
  EXPECT_EQ(got[1], want[1]) << "gradient";
  EXPECT_EQ(got[2], want[2]) << "updated weight";
}

// Training: the forward chain and the backward chains of its gradient
// (tanh_backward, sigmoid_backward and the products around them) fused,
// against the unfused program: gradients and updated weights bit for bit.
TEST(FusedElementwise, TrainingStepIsBitIdenticalToTheUnfusedProgram) {
  auto step = [](int opt_level, int* fused_in_backward) {
    Tensor w = named(rand_tensor({kCols}, DType::Float32, 8), "w", true);
    *fused_in_backward = 0;
    return sgd_step(
        x_input(), w, [w](const Tensor& x) { return call1("mean", {chain(call1("mul", {x, w}))}); },
        opt_level, [&](const Program& p) {
          for (const SectionPlan& sp : p.sections())
            for (int32_t k : sp.kernels)
              *fused_in_backward += sp.type == pef::SectionType::BCKWD && p.kernels()[k].fused;
        });
  };
  int fused_backward = 0, plain_backward = 0;
  const auto got = step(1, &fused_backward);
  const auto want = step(0, &plain_backward);
  EXPECT_GT(fused_backward, 0);
  EXPECT_EQ(plain_backward, 0);
  expect_same_step(got, want);
}

// ---- a producer (GEMM, convolution) followed by a chain ----------------------

using Ints = std::vector<int64_t>;

int producer_kernels(const Program& p) {
  int n = 0;
  for (const KernelPlan& k : p.kernels()) n += k.fused && k.fused->has_producer();
  return n;
}

// conv2d (+ bias) -> relu -> mul(0.5) -> add(0.25): 8 output channels of
// 10 x 12, two images. Stride 1 takes the direct kernel, which runs the
// chain on each image's channels as it stores them; stride 2 takes im2col,
// which does not, and the chain then runs as one pass after it.
GraphSpec conv_chain(int64_t stride) {
  Tensor w = named(rand_tensor({8, 3, 3, 3}, DType::Float32, 11), "w");
  Tensor b = named(rand_tensor({8}, DType::Float32, 12), "b");
  Tensor x = named(rand_tensor({2, 3, 10, 12}, DType::Float32, 13), "x");
  return inference(
      [w, b, stride](auto in) -> std::vector<Tensor> {
        Tensor y = call1("conv2d", {in[0], w, b}, {{"padding", Ints{1}}, {"stride", Ints{stride}}});
        Tensor r = call1("mul", {call1("relu", {y}), ops::wrap_scalar(0.5)});
        return {call1("add", {r, ops::wrap_scalar(0.25)})};
      },
      {x});
}

TEST(FusedEpilogue, ConvolutionRunsItsChainAsItStoresEachBlock) {
  for (int64_t stride : {1, 2}) {
    SCOPED_TRACE(stride);
    GraphSpec s = conv_chain(stride);
    expect_same_as_unfused(s, 1);
    ThreadPool pool(2);
    EXPECT_EQ(producer_kernels(load(s, 1, pool)->program()), 1);
  }
}

// A lone relu after a producer runs in the producer's registers (the direct
// convolution's stores) or as the GEMM's own relu epilogue (im2col at stride
// 2, a batched matmul): bit for bit the relu kernel's results, NaN and -0
// included. Half the weights are negative and the bias -0, so images of
// zeros give -0 sums; a NaN in the input spreads to its neighbours.
TEST(FusedEpilogue, ALoneReluRunsInTheProducersRegisters) {
  Tensor w = named(rand_tensor({8, 3, 3, 3}, DType::Float32, 21), "w");
  Tensor b = named(Tensor::empty({8}, DType::Float32), "b");
  for (int64_t o = 0; o < 8; ++o) {
    b.data<float>()[o] = -0.0f;
    for (int64_t i = 0; i < 27; ++i)
      if (o % 2 == 0) w.data<float>()[o * 27 + i] = -std::abs(w.data<float>()[o * 27 + i]);
  }
  Tensor x = named(rand_tensor({2, 3, 10, 12}, DType::Float32, 22), "x");
  float* xd = x.data<float>();
  for (int64_t i = 0; i < 120; ++i) xd[i] = 0.0f;  // the first channel of image 0
  xd[200] = std::nanf("");
  auto relu_kernels = [](const Program& p) {
    int n = 0;
    for (const KernelPlan& k : p.kernels())
      n += k.fused && k.fused->in_registers() == ops::Activation::Relu;
    return n;
  };
  for (int64_t stride : {1, 2}) {
    SCOPED_TRACE(stride);
    GraphSpec s = inference(
        [w, b, stride](auto in) -> std::vector<Tensor> {
          return {call1("relu", {call1("conv2d", {in[0], w, b},
                                       {{"padding", Ints{1}}, {"stride", Ints{stride}}})})};
        },
        {x});
    expect_same_as_unfused(s, 1);
    ThreadPool pool(2);
    EXPECT_EQ(relu_kernels(load(s, 1, pool)->program()), 1);
  }
  Tensor a = named(rand_tensor({3, 20, 33}, DType::Float32, 23), "a");
  a.data<float>()[40] = std::nanf("");
  Tensor m = named(rand_tensor({3, 33, 40}, DType::Float32, 24), "m");
  GraphSpec s = inference(
      [](auto in) -> std::vector<Tensor> {
        return {call1("relu", {call1("matmul", {in[0], in[1]})})};
      },
      {a, m});
  expect_same_as_unfused(s, 1);
  ThreadPool pool(2);
  EXPECT_EQ(relu_kernels(load(s, 1, pool)->program()), 1);
  // A longer chain is not a lone relu: it runs as the tail.
  EXPECT_EQ(relu_kernels(load(conv_chain(1), 1, pool)->program()), 0);
}

// conv2d -> relu -> 2x2 max pooling (stride 2), and conv2d -> pooling, in
// inference: one conv2d_max_pool2d kernel, bit for bit the unfused ops'
// results (a NaN in the input, odd output sizes whose last row and column
// no window covers). Other poolings, and training (whose backward reads the
// relu's and the convolution's results), keep the ops apart.
TEST(FusedEpilogue, ConvolutionReluAndTwoByTwoPoolingBecomeOneKernel) {
  Tensor w = named(rand_tensor({20, 3, 3, 3}, DType::Float32, 31), "w");
  Tensor b = named(rand_tensor({20}, DType::Float32, 32), "b");
  Tensor x = named(rand_tensor({3, 3, 9, 11}, DType::Float32, 33), "x");
  x.data<float>()[50] = std::nanf("");
  auto kernels_of = [](const Program& p, std::string_view op) {
    int n = 0;
    for (const KernelPlan& k : p.kernels())
      for (const OpStep& st : k.steps) n += st.op->name == op;
    return n;
  };
  struct Case {
    bool relu;
    Attrs pool;
    bool fused;
  };
  const Case cases[] = {
      {true, {{"kernel_size", Ints{2, 2}}}, true},
      {false, {{"kernel_size", Ints{2}}, {"stride", Ints{2, 2}}}, true},
      {true, {{"kernel_size", Ints{3, 3}}}, false},
      {true, {{"kernel_size", Ints{2, 2}}, {"stride", Ints{1, 1}}}, false},
      {true, {{"kernel_size", Ints{2, 2}}, {"ceil_mode", true}}, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("relu {} fused {}", c.relu, c.fused));
    GraphSpec s = inference(
        [&](auto in) -> std::vector<Tensor> {
          Tensor y = call1("conv2d", {in[0], w, b}, {{"padding", Ints{1}}});
          if (c.relu) y = call1("relu", {y});
          return {call1("max_pool2d", {y}, c.pool)};
        },
        {x});
    // A relu the pooling does not take runs in the convolution's registers.
    expect_same_as_unfused(s, c.fused || !c.relu ? 0 : 1);
    ThreadPool pool(2);
    auto rt = load(s, 1, pool);
    EXPECT_EQ(kernels_of(rt->program(), "conv2d_max_pool2d"), c.fused ? 1 : 0);
    EXPECT_EQ(kernels_of(rt->program(), "max_pool2d"), c.fused ? 0 : 1);
  }
  // Training: the same layer under SGD keeps its three ops.
  Tensor wt = named(rand_tensor({20, 3, 3, 3}, DType::Float32, 34), "wt", true);
  int fused = -1, pools = -1;
  sgd_step(
      x, wt,
      [wt, b](const Tensor& in) {
        Tensor y = call1("relu", {call1("conv2d", {in, wt, b}, {{"padding", Ints{1}}})});
        return call1("mean", {call1("max_pool2d", {y}, {{"kernel_size", Ints{2, 2}}})});
      },
      1,
      [&](const Program& p) {
        fused = kernels_of(p, "conv2d_max_pool2d");
        pools = kernels_of(p, "max_pool2d");
      });
  EXPECT_EQ(fused, 0);
  EXPECT_EQ(pools, 1);
}

// linear -> tanh (folded into the GEMM's own epilogue) -> add(residual) ->
// sigmoid -> mul(row vector): the chain runs on each GEMM block; a batched
// matmul -> leaky_relu -> sub(row) likewise.
TEST(FusedEpilogue, ProductsRunTheirChainOnEachBlock) {
  Tensor w = named(rand_tensor({96, kCols}, DType::Float32, 14), "w");
  Tensor b = named(rand_tensor({96}, DType::Float32, 15), "b");
  Tensor scale = named(rand_tensor({96}, DType::Float32, 16), "scale");
  Tensor res = named(rand_tensor({kRows, 96}, DType::Float32, 17), "res");
  auto linear = [&](auto in) -> std::vector<Tensor> {
    Tensor h = call1("tanh", {call1("linear", {in[0], w, b})});
    return {call1("mul", {call1("sigmoid", {call1("add", {h, in[1]})}), scale})};
  };
  expect_same_as_unfused(inference(linear, {x_input(), res}), 1);
  Tensor a = named(rand_tensor({3, 20, 33}, DType::Float32, 18), "a");
  Tensor m = named(rand_tensor({3, 33, 40}, DType::Float32, 19), "m");
  Tensor row = named(rand_tensor({40}, DType::Float32, 20), "row");
  auto matmul = [&](auto in) -> std::vector<Tensor> {
    Tensor h = call1("leaky_relu", {call1("matmul", {in[0], in[1]})}, {{"negative_slope", 0.1}});
    return {call1("sub", {h, row})};
  };
  GraphSpec s = inference(matmul, {a, m});
  expect_same_as_unfused(s, 1);
  ThreadPool pool(2);
  EXPECT_EQ(producer_kernels(load(s, 1, pool)->program()), 1);
}

// ResFFN's normalizations: layer_norm -> tanh, and layer_norm -> add(residual)
// -> sigmoid, each row finished by the chain as the normalization stores it.
TEST(FusedEpilogue, LayerNormRunsItsChainOnEachRow) {
  Tensor g = named(rand_tensor({kCols}, DType::Float32, 26), "g");
  Tensor b = named(rand_tensor({kCols}, DType::Float32, 27), "b");
  const Attrs ln{{"normalized_shape", Ints{kCols}}};
  auto model = [&](auto in) -> std::vector<Tensor> {
    Tensor h = call1("tanh", {call1("layer_norm", {in[0], g, b}, ln)});
    Tensor y = call1("sigmoid", {call1("add", {call1("layer_norm", {h, g, b}, ln), in[0]})});
    return {y};
  };
  GraphSpec s = inference(model, {x_input()});
  expect_same_as_unfused(s, 2);
  ThreadPool pool(2);
  EXPECT_EQ(producer_kernels(load(s, 1, pool)->program()), 2);
}

// softmax and log_softmax along the last dim finish each row with the
// chain; along another dim (not contiguous rows) the chain runs after.
TEST(FusedEpilogue, SoftmaxRunsItsChainOnEachRow) {
  for (int64_t dim : {-1, 0}) {
    SCOPED_TRACE(dim);
    auto model = [dim](auto in) -> std::vector<Tensor> {
      Tensor p = call1("softmax", {in[0]}, {{"dim", dim}});
      Tensor y = call1("add", {call1("mul", {p, ops::wrap_scalar(3.0)}), in[0]});
      Tensor l = call1("log_softmax", {in[0]}, {{"dim", dim}});
      return {y, call1("neg", {call1("exp", {l})})};
    };
    GraphSpec s = inference(model, {x_input()});
    expect_same_as_unfused(s, 2);
    ThreadPool pool(2);
    EXPECT_EQ(producer_kernels(load(s, 1, pool)->program()), 2);
  }
}

// Neither the convolution's output nor relu's or mul's is written: the
// convolution stores into the result's bytes and the chain overwrites them.
TEST(FusedEpilogue, ProductAndIntermediatesAreNotWrittenToMemory) {
  GraphSpec s = conv_chain(1);
  Tensor want;
  {
    ThreadPool pool(2);
    RunRequest r;
    r.inputs = s.inputs;
    want = load(s, 0, pool)->run(r)[0];
  }
  expect_unstored_untouched(s, 3, want);
}

TEST(FusedEpilogue, ChainsTheRuntimeCannotTakeRunStepByStep) {
  // A column operand (not along the last dim): formed by the compiler, which
  // leaves operand layouts to the runtime; planned as steps one by one.
  Tensor w = named(rand_tensor({96, kCols}, DType::Float32, 21), "w");
  Tensor col = named(rand_tensor({kRows, 1}, DType::Float32, 22), "col");
  auto model = [&](auto in) -> std::vector<Tensor> {
    return {call1("exp", {call1("add", {call1("linear", {in[0], w}), in[1]})})};
  };
  expect_same_as_unfused(inference(model, {x_input(), col}), 0);
  // A bf16 product: the compiler does not join its chain.
  Tensor w16 = named(rand_tensor({96, kCols}, DType::BFloat16, 23), "w16");
  auto bf16 = [&](auto in) -> std::vector<Tensor> {
    return {call1("exp", {call1("linear", {in[0], w16})})};
  };
  expect_same_as_unfused(inference(bf16, {x_input(DType::BFloat16)}), 0);
  // The product read by a later kernel too is stored, and the chain still fused.
  auto kept = [&](auto in) -> std::vector<Tensor> {
    Tensor y = call1("linear", {in[0], w});
    return {call1("exp", {call1("mul", {y, ops::wrap_scalar(0.5)})}), call1("sum", {y})};
  };
  GraphSpec s = inference(kept, {x_input()});
  expect_same_as_unfused(s, 1);
  ThreadPool pool(2);
  auto rt = load(s, 1, pool);
  for (const KernelPlan& k : rt->program().kernels())
    if (k.fused) {
      EXPECT_TRUE(k.fused->has_producer());
      for (int32_t t : k.fused->unstored()) EXPECT_NE(t, k.steps[0].outputs[0]);
    }
}

// Training through conv2d -> relu -> layer_norm -> tanh: forward kernels led
// by the convolution and the normalization, their products kept for the
// backward where it reads them; gradients and the updated
// weights bit for bit those of the unfused program.
TEST(FusedEpilogue, TrainingStepIsBitIdenticalToTheUnfusedProgram) {
  auto step = [](int opt_level, int* producers) {
    Tensor w = named(rand_tensor({8, 3, 3, 3}, DType::Float32, 24), "w", true);
    Tensor x = named(rand_tensor({2, 3, 10, 12}, DType::Float32, 25), "x");
    auto loss = [w](const Tensor& in) {
      Tensor y = call1("conv2d", {in, w}, {{"padding", Ints{1}}});
      Tensor z = call1("layer_norm", {call1("relu", {y})}, {{"normalized_shape", Ints{12}}});
      return call1("mean", {call1("tanh", {z})});
    };
    return sgd_step(x, w, loss, opt_level,
                    [&](const Program& p) { *producers = producer_kernels(p); });
  };
  int fused = 0, plain = 0;
  const auto got = step(1, &fused);
  const auto want = step(0, &plain);
  EXPECT_EQ(fused, 2);
  EXPECT_EQ(plain, 0);
  expect_same_step(got, want);
}

}  // namespace
}  // namespace samba::runtime
