// Fused elementwise kernels: a chain the compiler grouped into one kernel runs
// as one tiled pass (engine/runtime/fused_elementwise.h). Each result is
// compared with the program compiled at opt_level 0, where every op is its
// own kernel: the same block functions run on the same values, so the
// results are bit for bit the same.
#include "engine/runtime/fused_elementwise.h"

#include <gtest/gtest.h>

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
  GraphSpec s;
  s.name = "chain";
  s.inference = true;
  s.inputs = std::move(inputs);
  s.model = std::move(model);
  return s;
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
// is right.
TEST(FusedElementwise, InternalIntermediatesAreNotWrittenToMemory) {
  GraphSpec s =
      inference([](auto in) -> std::vector<Tensor> { return {chain(in[0])}; }, {x_input()});
  auto program = std::make_shared<const Program>(round_trip(compiler::compile_program({s}, {})));
  const pef::ProgramDesc& d = program->desc();
  DeviceMemory state(d.memory.arena_bytes);
  ExecutionContext ctx(program, state);
  ThreadPool pool(2);
  ASSERT_EQ(program->sections().size(), 1u);
  const KernelPlan& k = program->kernels()[static_cast<size_t>(program->sections()[0].kernels[0])];
  ASSERT_TRUE(k.fused);
  ASSERT_EQ(k.fused->unstored().size(), 5u);  // all but the final add
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
  write_initial_values(d, state);  // the constants 0.5 and 0.25
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
  autograd::NoGradGuard ng;
  EXPECT_EQ(bytes_of(ctx.tensor(d.graphs[0].outputs[0]).contiguous()),
            bytes_of(chain(s.inputs[0])));
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

// Training: the forward chain and the backward chains of its gradient
// (tanh_backward, sigmoid_backward and the products around them) fused,
// against the unfused program: gradients and updated weights bit for bit.
TEST(FusedElementwise, TrainingStepIsBitIdenticalToTheUnfusedProgram) {
  auto spec = [](const Tensor& w) {
    GraphSpec s;
    s.name = "train";
    s.inputs = {x_input()};
    s.model = [w](std::span<const Tensor> in) -> std::vector<Tensor> {
      Tensor x = call1("mul", {in[0], w});
      return {call1("mean", {chain(x)})};
    };
    s.backward.loss_indices = {0};
    compiler::OptimizerSpec o;
    o.kind = compiler::OptimizerKind::SGD;
    o.defaults = Attrs{{"lr", 0.5}};
    o.groups.push_back({{w}, {}});
    s.optimizers.push_back(o);
    return s;
  };
  auto run = [&](int opt_level, int* fused_in_backward) {
    Tensor w = named(rand_tensor({kCols}, DType::Float32, 8), "w", true);
    ThreadPool pool(2);
    GraphSpec s = spec(w);
    auto rt = load(s, opt_level, pool);
    *fused_in_backward = 0;
    for (const SectionPlan& sp : rt->program().sections())
      for (int32_t k : sp.kernels)
        *fused_in_backward +=
            sp.type == pef::SectionType::BCKWD && rt->program().kernels()[k].fused;
    RunRequest r;
    r.inputs = s.inputs;
    auto loss = rt->run(r);
    return std::vector<std::vector<unsigned char>>{bytes_of(loss[0]), bytes_of(rt->read("w", true)),
                                                   bytes_of(rt->read("w"))};
  };
  int fused_backward = 0, plain_backward = 0;
  const auto got = run(1, &fused_backward);
  const auto want = run(0, &plain_backward);
  EXPECT_GT(fused_backward, 0);
  EXPECT_EQ(plain_backward, 0);
  EXPECT_EQ(got[0], want[0]) << "loss";
  EXPECT_EQ(got[1], want[1]) << "gradient";
  EXPECT_EQ(got[2], want[2]) << "updated weight";
}

}  // namespace
}  // namespace samba::runtime
