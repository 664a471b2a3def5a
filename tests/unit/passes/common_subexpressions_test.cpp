// eliminate_common_subexpressions: the same op on the same inputs is
// computed once; an in-place update in between makes inputs different.
#include "compiler/passes/passes.h"
#include "pass_test_util.h"

namespace samba::compiler::testing {
namespace {

TEST(CompilerCommonSubexpressions, MergesRepeatedNodesAndEqualConstants) {
  Tensor w = parameter("w", {3, 4}, 1);
  Graph before =
      record({named("x", {2, 4}, 2)}, [&](std::span<const Tensor> in) -> std::vector<Tensor> {
        Tensor a = call1("mul", {call1("linear", {in[0], w}), make({2.0}, {})});
        Tensor b = call1(
            "mul", {call1("linear", {in[0], w}), make({2.0}, {})});  // another tensor, same values
        return {call1("sub", {a, b}), call1("add", {a, b})};
      });
  ASSERT_EQ(count_ops(before, "linear"), 2);

  Graph after = eliminate_common_subexpressions(before);
  after.verify();
  EXPECT_EQ(count_ops(after, "linear"), 1);
  EXPECT_EQ(count_ops(after, "mul"), 1);
  int constants = 0;
  for (const Value& v : after.values) constants += v.kind == ValueKind::Constant;
  EXPECT_EQ(constants, 1);
  // sub and add now read the one product twice.
  for (const Node& n : after.nodes)
    if (n.op->name == "sub" || n.op->name == "add") {
      EXPECT_EQ(n.inputs[0], n.inputs[1]) << n.name;
    }
  expect_same_results(before, after, {named("x", {2, 4}, 2)});
}

TEST(CompilerCommonSubexpressions, KeepsReadsOnEitherSideOfAnInPlaceUpdate) {
  Tensor state = named("state", {4}, 1);
  Graph before =
      record({named("x", {4}, 2)}, [&](std::span<const Tensor> in) -> std::vector<Tensor> {
        Tensor old_exp = call1("exp", {state});
        call("add_", {state, in[0]}, {});
        Tensor new_exp = call1("exp", {state});
        return {call1("sub", {new_exp, old_exp})};
      });
  Graph after = eliminate_common_subexpressions(before);
  after.verify();
  EXPECT_EQ(count_ops(after, "exp"), 2);
  EXPECT_EQ(after.nodes.size(), before.nodes.size());
  expect_same_results(before, after, {named("x", {4}, 2)});
}

}  // namespace
}  // namespace samba::compiler::testing
