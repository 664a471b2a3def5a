// autocast_bf16 and bf16 compiles: casts around products, the sensitive ops
// in fp32, fp32 parameters with fp32 gradients, the mode recorded in the
// PEF, and a small classifier that trains to the accuracy of its fp32
// compile.
#include "compiler/passes/mixed_precision.h"

#include <cmath>

#include "compile_test_util.h"
#include "compiler/passes/pipeline.h"
#include "engine/pef/pef_log.h"
#include "engine/runtime/runtime.h"
#include "pass_test_util.h"

namespace samba::compiler::testing {
namespace {

Tensor f32(const std::string& name, const Dims& shape, uint32_t seed, bool requires_grad = false) {
  return samba::testing::named(rand_tensor(shape, DType::Float32, seed, -0.5, 0.5), name,
                               requires_grad);
}

// linear, layer_norm, relu, matmul by a second weight, softmax, and the
// cross-entropy of the logits: a product feeding every kind of op.
struct Net {
  Tensor w1 = f32("w1", {8, 6}, 1, true), b1 = f32("b1", {8}, 2, true);
  Tensor w2 = f32("w2", {8, 4}, 3, true);
  std::vector<Tensor> forward(std::span<const Tensor> in) const {
    Tensor h = call1("linear", {in[0], w1, b1});
    h = call1("relu", {call1("layer_norm", {h}, {{"normalized_shape", Dims{8}}})});
    Tensor logits = call1("matmul", {h, w2});
    return {call1("cross_entropy", {logits, in[1]}),
            call1("softmax", {logits}, {{"dim", int64_t{-1}}})};
  }
};

Tensor labels(int64_t n, int64_t classes) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<double>(i % classes));
  return samba::testing::named(make(v, {n}, DType::Int64), "y");
}

const Node* producer(const Graph& g, ValueId v) {
  return g.value(v).producer == kNone ? nullptr : &g.node(g.value(v).producer);
}

// The dtype input `i` of node `n` reaches it with, and whether a cast made it.
DType input_dtype(const Graph& g, const Node& n, size_t i) { return g.value(n.inputs.at(i)).dtype; }
bool cast_input(const Graph& g, const Node& n, size_t i) {
  const Node* p = producer(g, n.inputs.at(i));
  return p && p->op->name == "cast";
}

const Node& only(const Graph& g, std::string_view op) {
  const Node* found = nullptr;
  for (const Node& n : g.nodes)
    if (n.op->name == op) {
      EXPECT_EQ(found, nullptr) << "two " << op << " nodes";
      found = &n;
    }
  if (!found) throw Error(Status::NotFound, fmt::format("no {} node", op));
  return *found;
}

TEST(MixedPrecision, ProductsTakeBf16OperandsAndSensitiveOpsRunInFloat32) {
  Net net;
  const Graph traced = record({f32("x", {5, 6}, 4), labels(5, 4)},
                              [&](std::span<const Tensor> in) { return net.forward(in); });
  const Graph g = autocast_bf16(traced);
  g.verify();
  EXPECT_EQ(count_ops(traced, "cast"), 0);

  for (std::string_view product : {"linear", "matmul"}) {
    const Node& n = only(g, product);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      EXPECT_EQ(input_dtype(g, n, i), DType::BFloat16) << product << " input " << i;
      EXPECT_TRUE(cast_input(g, n, i)) << product << " input " << i;
    }
    EXPECT_EQ(g.value(n.outputs[0]).dtype, DType::BFloat16) << product;
  }
  // layer_norm reads the bf16 linear through a cast up; relu follows it (fp32).
  const Node& ln = only(g, "layer_norm");
  EXPECT_EQ(input_dtype(g, ln, 0), DType::Float32);
  EXPECT_TRUE(cast_input(g, ln, 0));
  EXPECT_EQ(g.value(only(g, "relu").outputs[0]).dtype, DType::Float32);
  for (std::string_view sensitive : {"cross_entropy", "softmax"}) {
    const Node& n = only(g, sensitive);
    EXPECT_EQ(input_dtype(g, n, 0), DType::Float32) << sensitive;
    EXPECT_TRUE(cast_input(g, n, 0)) << sensitive;
    EXPECT_EQ(g.value(n.outputs[0]).dtype, DType::Float32) << sensitive;
  }
  // The integer labels are not cast; one bf16 copy of the logits serves both readers.
  EXPECT_EQ(input_dtype(g, only(g, "cross_entropy"), 1), DType::Int64);
  EXPECT_EQ(only(g, "cross_entropy").inputs[0], only(g, "softmax").inputs[0]);
  // Parameters and outputs keep their traced dtypes.
  for (ValueId p : g.parameters) EXPECT_EQ(g.value(p).dtype, DType::Float32) << g.value(p).name;
  ASSERT_EQ(g.outputs.size(), traced.outputs.size());
  for (size_t i = 0; i < g.outputs.size(); ++i)
    EXPECT_EQ(g.value(g.outputs[i]).dtype, DType::Float32);
}

TEST(MixedPrecision, ProductsOfIntegersOrFloat64AreLeftAlone) {
  const Tensor a = samba::testing::named(make({1, 2, 3, 4}, {2, 2}, DType::Int64), "a");
  const Tensor d = samba::testing::named(make({1, 2, 3, 4}, {2, 2}, DType::Float64), "d");
  const Graph traced = record({a, d}, [](std::span<const Tensor> in) -> std::vector<Tensor> {
    return {call1("matmul", {in[0], in[0]}), call1("matmul", {in[1], in[1]})};
  });
  const Graph g = autocast_bf16(traced);
  EXPECT_EQ(count_ops(g, "cast"), 0);
  for (const Node& n : g.nodes) EXPECT_NE(g.value(n.outputs[0]).dtype, DType::BFloat16);
}

TEST(MixedPrecision, AProductOutputIsGivenBackInItsTracedDtype) {
  const Tensor w = f32("w", {3, 4}, 5, true);
  const Graph traced =
      record({f32("x", {2, 4}, 6)}, [&](std::span<const Tensor> in) -> std::vector<Tensor> {
        return {call1("tanh", {call1("linear", {in[0], w})})};
      });
  const Graph g = autocast_bf16(traced);
  const Value& out = g.value(g.outputs[0]);
  EXPECT_EQ(out.dtype, DType::Float32);
  ASSERT_NE(producer(g, out.id), nullptr);
  EXPECT_EQ(producer(g, out.id)->op->name, "cast");  // tanh ran in bf16, the app gets fp32
  EXPECT_EQ(g.value(only(g, "tanh").outputs[0]).dtype, DType::BFloat16);
  // What it computes is the fp32 graph's, to bf16 precision.
  expect_same_results(traced, g, {f32("x", {2, 4}, 6)}, 2e-2);
}

TEST(MixedPrecision, AFollowerThatRefusesMixedDtypesRunsAsTraced) {
  // Attention wants one dtype: a bf16 query (a linear's result) beside fp32
  // keys and values gets its traced fp32 back, and computes the same.
  const Tensor w = f32("w", {4, 4}, 7, true);
  const std::vector<Tensor> inputs = {f32("x", {1, 3, 4}, 8), f32("k", {1, 3, 4}, 9),
                                      f32("v", {1, 3, 4}, 10)};
  const Graph traced = record(inputs, [&](std::span<const Tensor> in) -> std::vector<Tensor> {
    return {call("scaled_dot_product_attention", {call1("linear", {in[0], w}), in[1], in[2]})[0]};
  });
  const Graph g = autocast_bf16(traced);
  const Node& attention = only(g, "scaled_dot_product_attention");
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(input_dtype(g, attention, i), DType::Float32) << i;
  EXPECT_TRUE(cast_input(g, attention, 0));
  expect_same_results(traced, g, inputs, 2e-2);
}

TEST(MixedPrecision, ModesByNameAndUnknownOnesRefused) {
  EXPECT_EQ(mixed_precision_from_name("bf16"), MixedPrecision::Bf16);
  EXPECT_EQ(mixed_precision_from_name("mp1"), MixedPrecision::Bf16);
  EXPECT_EQ(mixed_precision_from_name("none"), MixedPrecision::None);
  EXPECT_EQ(mixed_precision_from_name("mp0"), MixedPrecision::None);
  try {
    mixed_precision_from_name("fp16");
    FAIL() << "fp16 is not a mode";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("'fp16' is not supported; expected 'none' or 'bf16'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(pass_names(1, MixedPrecision::Bf16).front(), "autocast_bf16");
  EXPECT_EQ(pass_names(1, MixedPrecision::None), pass_names(1));
}

GraphSpec training_spec(const Net& net, const Tensor& x, const Tensor& y, double lr) {
  GraphSpec s;
  s.name = "net";
  s.inputs = {x, y};
  s.model = [&net](std::span<const Tensor> in) { return net.forward(in); };
  s.backward.loss_indices = {0};
  OptimizerSpec sgd;
  sgd.kind = OptimizerKind::SGD;
  sgd.defaults = Attrs{{"lr", lr}};
  sgd.groups.push_back({{net.w1, net.b1, net.w2}, {}});
  s.optimizers.push_back(sgd);
  return s;
}

TEST(MixedPrecision, TrainingKeepsFloat32MasterWeightsAndGradients) {
  Net net;
  const Tensor x = f32("x", {5, 6}, 4), y = labels(5, 4);
  CompileOptions o;
  o.mixed_precision = MixedPrecision::Bf16;
  std::vector<CompiledGraph> compiled;
  const pef::ProgramDesc p = compile_program({training_spec(net, x, y, 0.1)}, o, &compiled);
  const Graph& g = compiled.at(0).graph;
  for (ValueId pid : g.parameters) {
    const Value& param = g.value(pid);
    EXPECT_EQ(param.dtype, DType::Float32) << param.name;
    ASSERT_NE(param.grad, kNone) << param.name;
    EXPECT_EQ(g.value(param.grad).dtype, DType::Float32) << param.name;
  }
  // The backward's products run in bf16 too (autograd of the bf16 forward).
  int bf16_backward_products = 0;
  for (const Node& n : g.nodes)
    if (n.phase == Phase::Backward && n.op->fusion == Fusion::Contraction)
      bf16_backward_products += g.value(n.outputs[0]).dtype == DType::BFloat16;
  EXPECT_GE(bf16_backward_products, 2);

  auto entry = [&](std::string_view key) {
    for (const auto& [k, v] : p.metadata)
      if (k == key) return v;
    return std::string("(absent)");
  };
  EXPECT_EQ(entry("compiler.mixed_precision"), "bf16");
  EXPECT_EQ(entry("compiler.passes").rfind("autocast_bf16, ", 0), 0u) << entry("compiler.passes");
  EXPECT_NE(pef::format_pef_log(p).find("mixed precision bf16"), std::string::npos);
  // An fp32 compile has no entry and says so in its log.
  const pef::ProgramDesc fp32 = compile_program({training_spec(net, x, y, 0.1)}, CompileOptions{});
  for (const auto& kv : fp32.metadata) EXPECT_NE(kv.first, "compiler.mixed_precision");
  EXPECT_NE(pef::format_pef_log(fp32).find("mixed precision none"), std::string::npos);
}

// Two Gaussian blobs per class in 6 dims, labelled by which half of the
// classes' centres is nearest: separable, so both compiles reach ~100%.
struct Blobs {
  Tensor x, y;
};
Blobs blobs(int64_t n, uint32_t seed) {
  const Tensor noise = rand_tensor({n, 6}, DType::Float32, seed, -0.6, 0.6);
  const std::vector<double> e = values(noise);
  std::vector<double> xs(static_cast<size_t>(n * 6)), ys(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = (i * 7 + seed) % 4;
    ys[i] = static_cast<double>(c);
    for (int64_t d = 0; d < 6; ++d)
      xs[i * 6 + d] = e[i * 6 + d] + (d == c ? 2.0 : 0.0) + (d == 4 + c % 2 ? 1.0 : 0.0);
  }
  return {samba::testing::named(make(xs, {n, 6}, DType::Float32), "x"),
          samba::testing::named(make(ys, {n}, DType::Int64), "y")};
}

struct Trained {
  double loss = 0;
  double accuracy = 0;
};

Trained train(MixedPrecision mode, int steps) {
  Net net;  // the same initial weights for every mode
  const Blobs data = blobs(64, 11);
  CompileOptions o;
  o.mixed_precision = mode;
  ThreadPool pool(2);
  runtime::Runtime rt(
      samba::testing::round_trip(compile_program({training_spec(net, data.x, data.y, 0.5)}, o)),
      pool, nullptr);
  runtime::RunRequest req;
  req.inputs = {data.x, data.y};
  Trained t;
  std::vector<Tensor> out;
  for (int s = 0; s < steps; ++s) out = rt.run(req);
  t.loss = values(out.at(0))[0];
  // Accuracy of the last step's probabilities (computed before its update).
  const std::vector<double> prob = values(out.at(1)), label = values(data.y);
  int correct = 0;
  for (size_t i = 0; i < label.size(); ++i) {
    size_t best = 0;
    for (size_t c = 1; c < 4; ++c)
      if (prob[i * 4 + c] > prob[i * 4 + best]) best = c;
    correct += static_cast<double>(best) == label[i];
  }
  t.accuracy = static_cast<double>(correct) / static_cast<double>(label.size());
  for (const char* name : {"w1", "b1", "w2"})
    EXPECT_EQ(rt.read(name).dtype(), DType::Float32) << name;
  return t;
}

TEST(MixedPrecision, TrainingInBf16ReachesTheAccuracyOfFloat32) {
  const Trained fp32 = train(MixedPrecision::None, 60), bf16 = train(MixedPrecision::Bf16, 60);
  EXPECT_LT(fp32.loss, 0.05);  // the task is learnt, so the comparison says something
  EXPECT_GE(fp32.accuracy, 0.95);
  // Stated tolerance: the final loss within 0.01 absolute (about half of
  // fp32's; bf16 keeps 8 significant bits), accuracy within two points.
  EXPECT_NEAR(bf16.loss, fp32.loss, 0.01);
  EXPECT_NEAR(bf16.accuracy, fp32.accuracy, 0.02);
  EXPECT_NE(bf16.loss, fp32.loss);  // the bf16 compile really computed in bf16
}

// conv2d, relu, a reshape and a linear into the loss: the convolution and
// its weight gradient run on bf16 operands and the conv net trains as in fp32.
struct ConvNet {
  Tensor w = f32("conv.w", {4, 1, 3, 3}, 21, true), b = f32("conv.b", {4}, 22, true);
  Tensor fc = f32("fc.w", {3, 64}, 23, true);
  std::vector<Tensor> forward(std::span<const Tensor> in) const {
    Tensor h = call1("relu", {call1("conv2d", {in[0], w, b})});
    h = call1("reshape", {h}, {{"shape", Dims{8, 64}}});
    return {call1("cross_entropy", {call1("linear", {h, fc}), in[1]})};
  }
};

double conv_loss_after(MixedPrecision mode, int steps, Graph* graph) {
  ConvNet net;
  const Tensor x = f32("x", {8, 1, 6, 6}, 24), y = labels(8, 3);
  GraphSpec s;
  s.name = "conv";
  s.inputs = {x, y};
  s.model = [&net](std::span<const Tensor> in) { return net.forward(in); };
  OptimizerSpec sgd;
  sgd.kind = OptimizerKind::SGD;
  sgd.defaults = Attrs{{"lr", 0.5}};
  sgd.groups.push_back({{net.w, net.b, net.fc}, {}});
  s.optimizers.push_back(sgd);
  CompileOptions o;
  o.mixed_precision = mode;
  std::vector<CompiledGraph> compiled;
  const pef::ProgramDesc p = compile_program({s}, o, &compiled);
  if (graph) *graph = compiled.at(0).graph;
  ThreadPool pool(2);
  runtime::Runtime rt(samba::testing::round_trip(p), pool, nullptr);
  runtime::RunRequest req;
  req.inputs = {x, y};
  double loss = 0;
  for (int i = 0; i < steps; ++i) loss = values(rt.run(req).at(0))[0];
  return loss;
}

TEST(MixedPrecision, ConvolutionsRunInBf16AndTrainAsInFloat32) {
  Graph g;
  const double first = conv_loss_after(MixedPrecision::Bf16, 1, nullptr);
  const double bf16 = conv_loss_after(MixedPrecision::Bf16, 40, &g),
               fp32 = conv_loss_after(MixedPrecision::None, 40, nullptr);
  int convolutions = 0;
  for (const Node& n : g.nodes) {
    if (n.op->name.rfind("conv2d", 0) != 0) continue;
    ++convolutions;
    for (ValueId in : n.inputs) {
      if (in != kNone) {
        EXPECT_EQ(g.value(in).dtype, DType::BFloat16) << n.name;
      }
    }
  }
  EXPECT_EQ(convolutions, 2);    // the forward and the weight gradient (x needs none)
  EXPECT_LT(fp32, 0.5 * first);  // it learns
  EXPECT_NEAR(bf16, fp32, 0.02 + 0.05 * fp32);
}

}  // namespace
}  // namespace samba::compiler::testing
