// Graph::erase_nodes, which every pass ends with: erased nodes and the values
// only they used leave the graph, and what stays is renumbered consistently.
#include "pass_test_util.h"

namespace samba::compiler::testing {
namespace {

Graph three_nodes() {
  return record({named("x", {3}, 1), named("unused", {2}, 2)},
                [](std::span<const Tensor> in) -> std::vector<Tensor> {
                  call1("exp", {in[0]});
                  return {call1("neg", {call1("tanh", {in[0]})})};
                });
}

std::vector<std::string> value_names(const Graph& g) {
  std::vector<std::string> out;
  for (const Value& v : g.values) out.push_back(v.name);
  return out;
}

TEST(CompilerEraseNodes, RenumbersTheNodesAndValuesThatStayInTheirOrder) {
  Graph g = three_nodes();
  ASSERT_EQ(g.nodes[0].op->name, "exp");
  g.erase_nodes({true, false, false});
  g.verify();
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].name, "tanh_1");
  EXPECT_EQ(g.nodes[1].name, "neg_2");
  // exp's result goes; an unread graph input stays, it is part of the interface.
  EXPECT_EQ(value_names(g), (std::vector<std::string>{"x", "unused", "tanh_1", "neg_2"}));
  for (const Node& n : g.nodes) {
    EXPECT_EQ(g.nodes[n.id].name, n.name);
    EXPECT_EQ(g.value(n.outputs[0]).producer, n.id);
  }
  EXPECT_EQ(g.value(g.nodes[1].inputs[0]).name, "tanh_1");
  EXPECT_EQ(g.value(g.outputs[0]).name, "neg_2");
  expect_same_results(three_nodes(), g, {named("x", {3}, 1), named("unused", {2}, 2)});
}

TEST(CompilerEraseNodes, RefusesToEraseTheProducerOfAValueStillInUse) {
  Graph g = three_nodes();
  try {
    g.erase_nodes({false, true, false});
    FAIL() << "erasing tanh, which neg reads, must fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::Internal);
    EXPECT_NE(std::string(e.what()).find("'tanh_1' is still used"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace samba::compiler::testing
