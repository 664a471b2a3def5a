// eliminate_dead_code: unread results go, effects and outputs stay.
#include "compiler/passes/passes.h"
#include "pass_test_util.h"

namespace samba::compiler::testing {
namespace {

TEST(CompilerDeadCode, ErasesUnreadChainsAndKeepsInPlaceUpdatesAndOutputs) {
  Tensor w = parameter("w", {3, 4}, 1), counter = named("counter", {3}, 2);
  Graph before =
      record({named("x", {2, 4}, 3)}, [&](std::span<const Tensor> in) -> std::vector<Tensor> {
        Tensor a = call1("linear", {in[0], w});
        call1("exp", {call1("tanh", {a})});                 // a chain nothing reads
        call("add_", {counter, make({1, 1, 1}, {3})}, {});  // an effect nothing reads
        return {call1("relu", {a})};
      });
  ASSERT_EQ(before.nodes.size(), 5u);

  Graph after = eliminate_dead_code(before);
  after.verify();
  EXPECT_EQ(count_ops(after, "tanh"), 0);
  EXPECT_EQ(count_ops(after, "exp"), 0);
  EXPECT_EQ(count_ops(after, "linear"), 1);
  EXPECT_EQ(count_ops(after, "add_"), 1);
  EXPECT_EQ(count_ops(after, "relu"), 1);
  // The erased nodes' results are gone from the graph too.
  EXPECT_EQ(after.values.size(), before.values.size() - 2);
  for (const Value& v : after.values)
    EXPECT_TRUE(v.name != "tanh_1" && v.name != "exp_2") << v.name;
  expect_same_results(before, after, {named("x", {2, 4}, 3)});
}

TEST(CompilerDeadCode, KeepsEverythingOfAGraphWithoutDeadNodes) {
  Graph before =
      record({named("x", {5}, 1)}, [](std::span<const Tensor> in) -> std::vector<Tensor> {
        return {call1("sigmoid", {call1("neg", {in[0]})})};
      });
  Graph after = eliminate_dead_code(before);
  EXPECT_EQ(after.dump(), before.dump());
}

}  // namespace
}  // namespace samba::compiler::testing
