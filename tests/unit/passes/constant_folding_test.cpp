// fold_constants: work on constants is done at compile time, except for
// outputs and ops whose results are drawn at run time.
#include "compiler/passes/passes.h"
#include "pass_test_util.h"

namespace samba::compiler::testing {
namespace {

TEST(CompilerConstantFolding, TurnsAConstantSubgraphIntoOneConstant) {
  Graph before =
      record({named("x", {3}, 1)}, [](std::span<const Tensor> in) -> std::vector<Tensor> {
        Tensor scale =
            call1("add", {call1("mul", {make({2.0}, {}), make({3.0}, {})}), make({1.0}, {})});
        return {call1("mul", {in[0], scale})};
      });
  ASSERT_EQ(before.nodes.size(), 3u);

  Graph after = fold_constants(before);
  after.verify();
  ASSERT_EQ(after.nodes.size(), 1u);
  const Node& mul = after.nodes[0];
  const Value& scale = after.value(mul.inputs[1]);
  EXPECT_EQ(scale.kind, ValueKind::Constant);
  EXPECT_EQ(scale.producer, kNone);
  EXPECT_DOUBLE_EQ(scale.host.item_double(), 7.0);
  // The operands folded into 7 are no longer part of the graph.
  int constants = 0;
  for (const Value& v : after.values) constants += v.kind == ValueKind::Constant;
  EXPECT_EQ(constants, 1);
  expect_same_results(before, after, {named("x", {3}, 1)});
}

TEST(CompilerConstantFolding, LeavesOutputsAndRandomOpsToRunTime) {
  Graph before =
      record({named("x", {4}, 1)}, [](std::span<const Tensor> in) -> std::vector<Tensor> {
        Tensor dropped =
            call1("dropout", {make({1, 2, 3, 4}, {4})}, {{"p", 0.0}, {"seed", int64_t{3}}});
        return {call1("neg", {make({5.0}, {})}), call1("add", {in[0], dropped})};
      });
  Graph after = fold_constants(before);
  after.verify();
  EXPECT_EQ(after.dump(), before.dump());
  expect_same_results(before, after, {named("x", {4}, 1)});
}

}  // namespace
}  // namespace samba::compiler::testing
