// The end-to-end benchmark models (bench/e2e_models.h) measure what they
// claim: compiled and run on the runtime they compute what the same model
// computes eagerly, a training step trains, and the contraction FLOP counts
// the rates are derived from agree with the compiler's own estimates of the
// GEMM kernels.
#include <gtest/gtest.h>

#include "bench/e2e_models.h"
#include "engine/ops/autograd.h"
#include "engine/runtime/runtime.h"
#include "op_test_util.h"

namespace samba::bench {
namespace {

using testing::values;

void expect_close(const Tensor& got, const Tensor& want, double tol) {
  const auto g = values(got), w = values(want);
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(g[i], w[i], tol * std::max(1.0, std::abs(w[i]))) << i;
}

Tensor run_inference(const pef::ProgramDesc& desc, const Tensor& image) {
  ThreadPool pool(2);
  runtime::Runtime rt(desc, pool, nullptr);
  runtime::RunRequest r;
  r.inputs = {image};
  auto outs = rt.run(r);
  EXPECT_EQ(outs.size(), 1u);
  return outs.at(0);
}

TEST(BenchModels, ResFFNInferenceMatchesTheEagerModel) {
  ResFFNLogReg m(16, 32);
  const Tensor logits = run_inference(compile_to_pef(m.spec(true)), m.image());
  autograd::NoGradGuard ng;
  const Tensor want = m.logits(m.image());
  ASSERT_EQ(logits.shape(), (Dims{16, kClasses}));
  expect_close(logits, want, 1e-4);
}

TEST(BenchModels, ConvNetInferenceMatchesTheEagerModel) {
  DigitsConvNet m(8);
  const Tensor logits = run_inference(compile_to_pef(m.spec(true)), m.image());
  autograd::NoGradGuard ng;
  const Tensor want = m.logits(m.image());
  ASSERT_EQ(logits.shape(), (Dims{8, kClasses}));
  expect_close(logits, want, 1e-4);
}

// The first step's loss is the eager loss of the initial weights, and
// repeated steps on one batch drive it down.
TEST(BenchModels, ResFFNTrainingStepsLowerTheLoss) {
  ResFFNLogReg m(16, 32);
  ThreadPool pool(2);
  runtime::Runtime rt(compile_to_pef(m.spec(false)), pool, nullptr);
  runtime::RunRequest r;
  r.inputs = {m.image(), m.label()};
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    auto outs = rt.run(r);
    ASSERT_EQ(outs.size(), 2u);  // loss, logits
    (step == 0 ? first : last) = outs[0].item_double();
  }
  autograd::NoGradGuard ng;
  const double want = call1("cross_entropy", {m.logits(m.image()), m.label()}).item_double();
  EXPECT_NEAR(first, want, 1e-5);
  EXPECT_LT(last, 0.8 * first);
}

// Contraction FLOP of the model, counted by hand in e2e_models.h, against
// the compiler's estimates for the kernels that hold a linear or matmul
// (which add the bias: m n more per linear).
double pef_contraction_flops(const pef::ProgramDesc& d) {
  double f = 0;
  for (const auto& k : d.kernels)
    if (k.fusion == Fusion::Contraction) f += k.flops;
  return f;
}

TEST(BenchModels, ResFFNFlopCountsAgreeWithTheCompilersEstimates) {
  for (auto [batch, hidden] : {std::pair<int64_t, int64_t>{16, 64}, {64, 256}}) {
    ResFFNLogReg m(batch, hidden);
    const double infer = pef_contraction_flops(compile_to_pef(m.spec(true)));
    const double train = pef_contraction_flops(compile_to_pef(m.spec(false)));
    // Within the bias additions (b * (2h + 10) of 2 b (784 h + h h + 10 h)).
    EXPECT_NEAR(infer / m.forward_flops(), 1.0, 0.01) << batch << "x" << hidden;
    EXPECT_NEAR(train / m.train_flops(), 1.0, 0.01) << batch << "x" << hidden;
    // Backward does both products of gemm2 and gemm3 but only dW of gemm1.
    EXPECT_GT(m.train_flops(), 2.0 * m.forward_flops());
    EXPECT_LT(m.train_flops(), 3.0 * m.forward_flops());
  }
}

TEST(BenchModels, ConvNetFlopCountsAgreeWithTheCompilersEstimates) {
  // conv2d and its two gradients carry the implicit GEMM's count in the
  // registry, so the PEF's contraction kernels add up to the hand count.
  DigitsConvNet m(32);
  const double infer = pef_contraction_flops(compile_to_pef(m.spec(true)));
  const double train = pef_contraction_flops(compile_to_pef(m.spec(false)));
  EXPECT_NEAR(infer / m.forward_flops(), 1.0, 0.01);
  EXPECT_NEAR(train / m.train_flops(), 1.0, 0.01);
}

}  // namespace
}  // namespace samba::bench
