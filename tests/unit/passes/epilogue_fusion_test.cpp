// fuse_gemm_epilogues: a bias add and an activation that are a product's
// only readers run inside its GEMM: matmul, add and activation become one
// linear over the weight's transpose (a view), and the graph still
// computes what it did.
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

// The one linear of a fused graph, after checking that no matmul, add or
// activation is left beside it.
const Node& only_linear(const Graph& g) {
  for (const Node& n : g.nodes)
    EXPECT_TRUE(n.op->name == "linear" || n.op->fusion == Fusion::View) << n.name << " is left";
  EXPECT_EQ(count_ops(g, "linear"), 1);
  for (const Node& n : g.nodes)
    if (n.op->name == "linear") return n;
  throw std::runtime_error("no linear");
}

Tensor matmul(const Tensor& x, const Tensor& w) { return call1("matmul", {x, w}); }
Tensor add(const Tensor& a, const Tensor& b) { return call1("add", {a, b}); }

TEST(CompilerEpilogueFusion, MatmulBiasAndReluBecomeOneLinearOverTheWeightsTranspose) {
  Tensor w = parameter("w", {4, 3}, 1), b = parameter("b", {3}, 2);
  const std::vector<Tensor> in = {named("x", {2, 4}, 3)};
  Graph before = record(in, [&](std::span<const Tensor> x) -> std::vector<Tensor> {
    return {call1("relu", {add(matmul(x[0], w), b)})};
  });
  ASSERT_EQ(before.nodes.size(), 3u);

  Graph after = fuse_gemm_epilogues(before);
  after.verify();
  const Node& lin = only_linear(after);
  EXPECT_EQ(lin.attrs.s("activation"), "relu");
  EXPECT_EQ(lin.outputs[0], after.outputs[0]);
  // The weight is the parameter's transpose, read in place.
  const Value& wt = after.value(lin.inputs[1]);
  ASSERT_TRUE(wt.is_view());
  EXPECT_EQ(after.value(wt.view_of).name, "w");
  EXPECT_EQ(wt.shape, (Dims{3, 4}));
  EXPECT_EQ(wt.strides, (Dims{1, 3}));
  EXPECT_EQ(after.value(lin.inputs[2]).name, "b");
  expect_same_results(before, after, in);
}

TEST(CompilerEpilogueFusion, ABiasAddedFirstToABatchOfMatricesIsFused) {
  Tensor w = parameter("w", {4, 5}, 1), b = parameter("b", {5}, 2);
  const std::vector<Tensor> in = {named("x", {2, 3, 4}, 3)};
  Graph before = record(in, [&](std::span<const Tensor> x) -> std::vector<Tensor> {
    return {call1("sigmoid", {add(b, matmul(x[0], w))})};
  });
  Graph after = fuse_gemm_epilogues(before);
  after.verify();
  EXPECT_EQ(only_linear(after).attrs.s("activation"), "sigmoid");
  expect_same_results(before, after, in);
}

TEST(CompilerEpilogueFusion, ABiasRowOfShapeOneByNIsReadAsAVector) {
  Tensor w = parameter("w", {4, 3}, 1), b = parameter("b", {1, 3}, 2);
  const std::vector<Tensor> in = {named("x", {5, 4}, 3)};
  Graph before = record(in, [&](std::span<const Tensor> x) -> std::vector<Tensor> {
    return {add(matmul(x[0], w), b)};
  });
  Graph after = fuse_gemm_epilogues(before);
  after.verify();
  const Node& lin = only_linear(after);
  EXPECT_EQ(lin.attrs.s("activation"), "none");
  const Value& bias = after.value(lin.inputs[2]);
  EXPECT_EQ(bias.shape, (Dims{3}));
  EXPECT_EQ(after.value(bias.view_of).name, "b");
  expect_same_results(before, after, in);
}

TEST(CompilerEpilogueFusion, ABiasAddedToALinearWithoutOneBecomesItsBias) {
  Tensor w = parameter("w", {3, 4}, 1), b = parameter("b", {3}, 2);
  const std::vector<Tensor> in = {named("x", {2, 4}, 3)};
  Graph before = record(in, [&](std::span<const Tensor> x) -> std::vector<Tensor> {
    return {call1("tanh", {add(call1("linear", {x[0], w}), b)})};
  });
  Graph after = fuse_gemm_epilogues(before);
  after.verify();
  ASSERT_EQ(after.nodes.size(), 1u);
  const Node& lin = only_linear(after);
  EXPECT_EQ(after.value(lin.inputs[1]).name, "w");  // no view: linear's own layout
  EXPECT_EQ(after.value(lin.inputs[2]).name, "b");
  EXPECT_EQ(lin.attrs.s("activation"), "tanh");
  expect_same_results(before, after, in);
}

TEST(CompilerEpilogueFusion, AMatmulFollowedByAnActivationAloneIsFused) {
  Tensor w = parameter("w", {4, 3}, 1);
  const std::vector<Tensor> in = {named("x", {2, 4}, 3)};
  Graph before = record(in, [&](std::span<const Tensor> x) -> std::vector<Tensor> {
    return {call1("gelu", {matmul(x[0], w)}, {{"approximate", std::string("none")}})};
  });
  Graph after = fuse_gemm_epilogues(before);
  after.verify();
  const Node& lin = only_linear(after);
  EXPECT_EQ(lin.attrs.s("activation"), "gelu_erf");
  EXPECT_EQ(lin.inputs.size(), 2u);
  expect_same_results(before, after, in);
}

TEST(CompilerEpilogueFusion, ABiasComputedInTheGraphAfterTheProductIsFused) {
  // The bias's node (one without inputs) runs between the matmul and the
  // add: the fused GEMM runs where the add did, after it.
  Tensor w = parameter("w", {4, 3}, 1);
  const std::vector<Tensor> in = {named("x", {2, 4}, 3)};
  Graph before = record(in, [&](std::span<const Tensor> x) -> std::vector<Tensor> {
    Tensor y = matmul(x[0], w);
    Tensor b = call1("ones", {}, {{"shape", std::vector<int64_t>{3}}, {"dtype", DType::Float64}});
    return {call1("relu", {add(y, b)})};
  });
  Graph after = fuse_gemm_epilogues(before);
  after.verify();
  EXPECT_EQ(count_ops(after, "matmul") + count_ops(after, "add") + count_ops(after, "relu"), 0);
  EXPECT_EQ(after.nodes.back().op->name, "linear");
  expect_same_results(before, after, in);
}

TEST(CompilerEpilogueFusion, AnAddOfTwoProductRowsTakesTheSecondAsTheFirstOnesBias) {
  Tensor w1 = parameter("w1", {4, 3}, 1), w2 = parameter("w2", {5, 3}, 2);
  const std::vector<Tensor> in = {named("x1", {1, 4}, 3), named("x2", {1, 5}, 4)};
  Graph before = record(in, [&](std::span<const Tensor> x) -> std::vector<Tensor> {
    return {add(matmul(x[0], w1), matmul(x[1], w2))};
  });
  Graph after = fuse_gemm_epilogues(before);
  after.verify();
  EXPECT_EQ(count_ops(after, "linear"), 1);
  EXPECT_EQ(count_ops(after, "matmul"), 1);
  EXPECT_EQ(count_ops(after, "add"), 0);
  expect_same_results(before, after, in);
}

// Graphs the pass must leave exactly as they are.
void expect_unchanged(const std::vector<Tensor>& in, ModelFn model) {
  Graph before = record(in, std::move(model));
  Graph after = fuse_gemm_epilogues(before);
  after.verify();
  EXPECT_EQ(after.dump(), before.dump());
}

TEST(CompilerEpilogueFusion, KeepsTheAddWhenTheProductHasOtherReaders) {
  Tensor w = parameter("w", {4, 4}, 1), b = parameter("b", {4}, 2);
  expect_unchanged({named("x", {2, 4}, 3)}, [&](std::span<const Tensor> x) -> std::vector<Tensor> {
    Tensor y = matmul(x[0], w);
    return {call1("relu", {add(y, b)}), call1("exp", {y})};
  });
  // A view of the product is a reader too, and so is the graph's output.
  expect_unchanged({named("x", {2, 4}, 3)}, [&](std::span<const Tensor> x) -> std::vector<Tensor> {
    Tensor y = matmul(x[0], w);
    return {add(y, b), call1("t", {y})};
  });
  expect_unchanged({named("x", {2, 4}, 3)}, [&](std::span<const Tensor> x) -> std::vector<Tensor> {
    Tensor y = matmul(x[0], w);
    return {add(y, b), y};
  });
}

TEST(CompilerEpilogueFusion, KeepsAddsThatAreNotABiasRow) {
  Tensor w = parameter("w", {4, 3}, 1);
  const std::vector<Tensor> in = {named("x", {2, 4}, 3)};
  for (const Dims& shape : {Dims{2, 3}, Dims{1}, Dims{2, 1}, Dims{1, 1, 3}}) {
    SCOPED_TRACE(dims_str(shape));
    Tensor b = parameter("b", shape, 2);
    expect_unchanged(in, [&](std::span<const Tensor> x) -> std::vector<Tensor> {
      return {add(matmul(x[0], w), b)};
    });
  }
  // alpha scales the bias; a float32 bias on a float64 product promotes.
  Tensor b = parameter("b", {3}, 2);
  expect_unchanged(in, [&](std::span<const Tensor> x) -> std::vector<Tensor> {
    return {call1("add", {matmul(x[0], w), b}, {{"alpha", 2.0}})};
  });
  Tensor b32 = parameter("b", {3}, 2).to(DType::Float32);
  b32.impl()->name = "b";
  expect_unchanged(in, [&](std::span<const Tensor> x) -> std::vector<Tensor> {
    return {add(matmul(x[0], w), b32)};
  });
}

TEST(CompilerEpilogueFusion, KeepsProductsTheLinearCannotCompute) {
  Tensor b = parameter("b", {3}, 2);
  // A batch of weights, and a vector x (matmul drops its dim).
  Tensor w3 = parameter("w", {2, 4, 3}, 1);
  expect_unchanged({named("x", {2, 5, 4}, 3)},
                   [&](std::span<const Tensor> x) -> std::vector<Tensor> {
                     return {call1("relu", {add(matmul(x[0], w3), b)})};
                   });
  Tensor w = parameter("w", {4, 3}, 1);
  expect_unchanged({named("x", {4}, 3)}, [&](std::span<const Tensor> x) -> std::vector<Tensor> {
    return {call1("relu", {add(matmul(x[0], w), b)})};
  });
  // Integer products have no GEMM epilogue.
  Tensor wi = samba::testing::make({1, 2, 3, 4, 5, 6}, {2, 3}, DType::Int64);
  Tensor bi = samba::testing::make({1, -1, 2}, {3}, DType::Int64);
  wi.impl()->name = "wi";
  bi.impl()->name = "bi";
  Tensor xi = samba::testing::make({1, 2, 3, 4}, {2, 2}, DType::Int64);
  xi.impl()->name = "x";
  expect_unchanged({xi}, [&](std::span<const Tensor> x) -> std::vector<Tensor> {
    return {call1("relu", {add(matmul(x[0], wi), bi)})};
  });
  // A linear that has a bias or an activation already.
  Tensor lw = parameter("lw", {3, 4}, 1);
  expect_unchanged({named("x", {2, 4}, 3)}, [&](std::span<const Tensor> x) -> std::vector<Tensor> {
    return {add(call1("linear", {x[0], lw, b}), b)};
  });
  expect_unchanged({named("x", {2, 4}, 3)}, [&](std::span<const Tensor> x) -> std::vector<Tensor> {
    return {add(call1("linear", {x[0], lw}, {{"activation", std::string("relu")}}), b)};
  });
}

TEST(CompilerEpilogueFusion, KeepsNodesOfDifferentPhasesApart) {
  Tensor w = parameter("w", {4, 3}, 1), b = parameter("b", {3}, 2);
  Graph before =
      record({named("x", {2, 4}, 3)}, [&](std::span<const Tensor> x) -> std::vector<Tensor> {
        return {add(matmul(x[0], w), b)};
      });
  for (Node& n : before.nodes)
    if (n.op->name == "add") n.phase = Phase::Backward;
  Graph after = fuse_gemm_epilogues(before);
  after.verify();
  EXPECT_EQ(after.dump(), before.dump());
}

}  // namespace
}  // namespace samba::compiler::testing
