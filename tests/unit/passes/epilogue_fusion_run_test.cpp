// fuse_gemm_epilogues in whole compiles: x @ W + b followed by relu, traced
// as matmul, add and relu, is one kernel per layer at o1 in inference and in
// training (where the pass meets the backward and the optimizer), its PEF
// loads and runs, and training gives the results of the unfused o0 compile.
#include <gtest/gtest.h>

#include "compile_test_util.h"
#include "compiler/compile.h"
#include "engine/ops/autograd.h"
#include "engine/runtime/runtime.h"
#include "op_test_util.h"

namespace samba::compiler {
namespace {

using samba::testing::make;
using samba::testing::named;
using samba::testing::rand_tensor;
using samba::testing::round_trip;
using samba::testing::values;

// Two layers as an ONNX or torch export writes them: matmul by a (k, n)
// weight, a bias add (a [1, n] row in the second) and relu.
struct Net {
  Tensor w1 = named(rand_tensor({6, 5}, DType::Float32, 1, -0.5, 0.5), "w1", true);
  Tensor b1 = named(rand_tensor({5}, DType::Float32, 2, -0.5, 0.5), "b1", true);
  Tensor w2 = named(rand_tensor({5, 3}, DType::Float32, 3, -0.5, 0.5), "w2", true);
  Tensor b2 = named(rand_tensor({1, 3}, DType::Float32, 4, -0.5, 0.5), "b2", true);

  Tensor logits(const Tensor& x) const {
    Tensor h = call1("relu", {call1("add", {call1("matmul", {x, w1}), b1})});
    return call1("relu", {call1("add", {b2, call1("matmul", {h, w2})})});
  }
};

Tensor x_input() { return named(rand_tensor({8, 6}, DType::Float32, 5), "x"); }
Tensor y_input() { return named(make({0, 2, 1, 1, 0, 2, 2, 1}, {8}, DType::Int64), "y"); }

GraphSpec inference(const Net& n) {
  GraphSpec s;
  s.name = "net";
  s.inference = true;
  s.inputs = {x_input()};
  s.model = [&n](std::span<const Tensor> in) -> std::vector<Tensor> { return {n.logits(in[0])}; };
  return s;
}

GraphSpec training(const Net& n) {
  GraphSpec s;
  s.name = "net";
  s.inputs = {x_input(), y_input()};
  s.model = [&n](std::span<const Tensor> in) -> std::vector<Tensor> {
    return {call1("cross_entropy", {n.logits(in[0]), in[1]})};
  };
  s.backward.loss_indices = {0};
  OptimizerSpec sgd;
  sgd.kind = OptimizerKind::SGD;
  sgd.defaults = Attrs{{"lr", 0.5}, {"momentum", 0.9}};
  sgd.groups.push_back({{n.w1, n.b1, n.w2, n.b2}, {}});
  s.optimizers.push_back(sgd);
  return s;
}

pef::ProgramDesc compiled(const GraphSpec& s, int level) {
  CompileOptions o;
  o.opt_level = level;
  return compile_program({s}, o);
}

int count_ops(const pef::ProgramDesc& p, std::string_view op) {
  int c = 0;
  for (const auto& k : p.kernels)
    for (const auto& call : k.ops) c += call.op == op;
  return c;
}

// The kernels computing the forward: those of the FWD sections.
size_t forward_kernels(const pef::ProgramDesc& p) {
  size_t n = 0;
  for (const auto& s : p.sections)
    if (s.type == pef::SectionType::FWD) n += s.kernels.size();
  return n;
}

TEST(EpilogueFusionRun, EachLayerIsOneGemmKernelAndTheLoadedPefComputesTheSame) {
  Net n;
  const pef::ProgramDesc p0 = compiled(inference(n), 0), p1 = compiled(inference(n), 1);
  EXPECT_EQ(forward_kernels(p0), 6u);  // matmul, add, relu twice
  ASSERT_EQ(forward_kernels(p1), 2u);
  EXPECT_EQ(count_ops(p1, "matmul") + count_ops(p1, "add") + count_ops(p1, "relu"), 0);
  for (const auto& k : p1.kernels) {
    ASSERT_EQ(k.ops.size(), 1u) << k.name;
    EXPECT_EQ(k.ops[0].op, "linear");
    EXPECT_EQ(k.ops[0].attrs.s("activation"), "relu");
  }
  ThreadPool pool(2);
  runtime::Runtime r0(round_trip(p0), pool, nullptr), r1(round_trip(p1), pool, nullptr);
  runtime::RunRequest req;
  req.inputs = {x_input()};
  const std::vector<double> want = values(r0.run(req)[0]), got = values(r1.run(req)[0]);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
  autograd::NoGradGuard eager;
  samba::testing::expect_values(n.logits(x_input()), got, 1e-5);
}

TEST(EpilogueFusionRun, AComputedWeightStaysAliveUntilTheFusedGemmReadsItsTranspose) {
  // W and b are intermediates and the bias is computed after the product:
  // the memory plan must keep W's bytes until the GEMM, now where the add
  // was, reads them through the transposed view.
  Tensor w0 = named(rand_tensor({6, 5}, DType::Float32, 1), "w0");
  GraphSpec s;
  s.name = "computed";
  s.inference = true;
  s.inputs = {x_input(), named(rand_tensor({5}, DType::Float32, 6), "c")};
  s.model = [&](std::span<const Tensor> in) -> std::vector<Tensor> {
    Tensor w = call1("tanh", {w0});
    Tensor y = call1("matmul", {in[0], w});
    Tensor b = call1("exp", {call1("sin", {in[1]})});
    return {call1("relu", {call1("add", {y, b})})};
  };
  const pef::ProgramDesc p0 = compiled(s, 0), p1 = compiled(s, 1);
  EXPECT_EQ(count_ops(p1, "matmul"), 0);
  ThreadPool pool(2);
  runtime::Runtime r0(round_trip(p0), pool, nullptr), r1(round_trip(p1), pool, nullptr);
  runtime::RunRequest req;
  req.inputs = s.inputs;
  const std::vector<double> want = values(r0.run(req)[0]), got = values(r1.run(req)[0]);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

TEST(EpilogueFusionRun, TrainingFusedMatchesTrainingUnfused) {
  Net n;
  const pef::ProgramDesc p0 = compiled(training(n), 0), p1 = compiled(training(n), 1);
  // The forward is two GEMM kernels; the backward's products stay matmuls.
  EXPECT_EQ(forward_kernels(p1), 3u);  // two layers and the loss
  int fused = 0;
  for (const auto& k : p1.kernels)
    for (const auto& call : k.ops)
      fused += call.op == "linear" && call.attrs.s("activation") == "relu";
  EXPECT_EQ(fused, 2);

  ThreadPool pool(2);
  runtime::Runtime r0(round_trip(p0), pool, nullptr), r1(round_trip(p1), pool, nullptr);
  runtime::RunRequest req;
  req.inputs = {x_input(), y_input()};
  for (int step = 0; step < 5; ++step) {
    const double l0 = values(r0.run(req)[0])[0], l1 = values(r1.run(req)[0])[0];
    EXPECT_NEAR(l1, l0, 1e-5 * std::max(1.0, std::abs(l0))) << "step " << step;
  }
  for (const char* name : {"w1", "b1", "w2", "b2"}) {
    const std::vector<double> a = values(r0.read(name)), b = values(r1.read(name));
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-5) << name << "[" << i << "]";
  }
  // The weights moved: the comparison is not of two untouched copies.
  EXPECT_NE(values(r1.read("w1")), values(n.w1));
}

}  // namespace
}  // namespace samba::compiler
