// fuse_gemm_epilogues: an activation that is a linear's only reader runs
// inside the linear's GEMM.
#include "compiler/passes/passes.h"
#include "pass_test_util.h"

namespace samba::compiler::testing {
namespace {

TEST(CompilerEpilogueFusion, MovesTheOnlyReadingActivationIntoTheLinear) {
  Tensor w = parameter("w", {3, 4}, 1), b = parameter("b", {3}, 2);
  Graph before =
      record({named("x", {2, 4}, 3)}, [&](std::span<const Tensor> in) -> std::vector<Tensor> {
        return {call1("gelu", {call1("linear", {in[0], w, b})},
                      {{"approximate", std::string("tanh")}})};
      });
  ASSERT_EQ(before.nodes.size(), 2u);

  Graph after = fuse_gemm_epilogues(before);
  after.verify();
  ASSERT_EQ(after.nodes.size(), 1u);
  const Node& lin = after.nodes[0];
  EXPECT_EQ(lin.op->name, "linear");
  EXPECT_EQ(lin.attrs.s("activation"), "gelu_tanh");
  // The linear now computes the graph's output; its old result is gone.
  EXPECT_EQ(lin.outputs[0], after.outputs[0]);
  EXPECT_EQ(after.values.size(), before.values.size() - 1);
  expect_same_results(before, after, {named("x", {2, 4}, 3)}, 1e-12);
}

TEST(CompilerEpilogueFusion, KeepsTheActivationWhenTheLinearsResultHasOtherReaders) {
  Tensor w = parameter("w", {4, 4}, 1);
  Graph before =
      record({named("x", {2, 4}, 3)}, [&](std::span<const Tensor> in) -> std::vector<Tensor> {
        Tensor y = call1("linear", {in[0], w});
        return {call1("add", {call1("relu", {y}), y})};
      });
  Graph after = fuse_gemm_epilogues(before);
  after.verify();
  EXPECT_EQ(after.dump(), before.dump());
}

}  // namespace
}  // namespace samba::compiler::testing
