// The compiler: tracing, autograd on graphs, passes, kernels and sections,
// the memory plan and lowering to a PEF program. Compiled graphs are run
// with the IR interpreter and compared against eager computation and finite
// differences.
#include <gtest/gtest.h>

#include <set>

#include "compiler/compile.h"
#include "compiler/ir/interpreter.h"
#include "engine/ops/autograd.h"
#include "op_test_util.h"

namespace samba::compiler {
namespace {

using testing::make;
using testing::rand_tensor;
using testing::values;

Tensor param(const std::string& name, const Dims& shape, uint32_t seed, DType dt = DType::Float64) {
  Tensor t = rand_tensor(shape, dt, seed, -0.5, 0.5);
  t.impl()->name = name;
  t.impl()->requires_grad = true;
  return t;
}

Tensor input(const std::string& name, const Dims& shape, DType dt = DType::Float64, uint32_t seed = 7) {
  Tensor t = rand_tensor(shape, dt, seed);
  t.impl()->name = name;
  return t;
}

// A two-layer network with a residual-free tanh: out = W2 tanh(W1 x + b1) + b2.
struct Mlp {
  Tensor w1 = param("gemm1.weight", {6, 5}, 1), b1 = param("gemm1.bias", {6}, 2);
  Tensor w2 = param("gemm2.weight", {3, 6}, 3), b2 = param("gemm2.bias", {3}, 4);
  std::vector<Tensor> params() const { return {w1, b1, w2, b2}; }
  std::vector<Tensor> forward(const Tensor& x, const Tensor& target) const {
    Tensor h = call1("tanh", {call1("linear", {x, w1, b1})});
    Tensor out = call1("linear", {h, w2, b2});
    Tensor loss = call1("cross_entropy", {out, target});
    return {loss, out};
  }
};

GraphSpec mlp_spec(const Mlp& m, int64_t batch = 4) {
  GraphSpec s;
  s.name = "mlp";
  s.inputs = {input("x", {batch, 5})};
  Tensor target = make({0, 2, 1, 0, 1, 2, 0, 1}, {8}, DType::Int64);
  target = target.as_strided({batch}, {1}, 0).contiguous();
  target.impl()->name = "target";
  s.inputs.push_back(target);
  s.model = [&m](std::span<const Tensor> in) { return m.forward(in[0], in[1]); };
  return s;
}

int count_ops(const Graph& g, std::string_view op) {
  int c = 0;
  for (const Node& n : g.nodes) c += n.op->name == op;
  return c;
}

TEST(Compiler, TracesSymbolicallyAndNamesValues) {
  Mlp m;
  std::vector<CompiledGraph> out;
  GraphSpec s = mlp_spec(m);
  s.inference = true;
  CompileOptions o;
  o.opt_level = 0;
  pef::ProgramDesc p = compile_program({s}, o, &out);
  const Graph& g = out[0].graph;
  EXPECT_EQ(g.inputs.size(), 2u);
  EXPECT_EQ(g.parameters.size(), 4u);
  EXPECT_EQ(g.outputs.size(), 2u);
  EXPECT_EQ(count_ops(g, "linear"), 2);
  EXPECT_EQ(count_ops(g, "tanh"), 1);
  // Tracing never computes: the parameters were read only for their metadata.
  EXPECT_EQ(g.value(g.parameters[0]).name, "gemm1.weight");
  EXPECT_EQ(out[0].signature.size(), 4u);
  EXPECT_NE(out[0].signature[0].find("linear(x: float64[4, 5], gemm1.weight: float64[6, 5]"), std::string::npos)
      << out[0].signature[0];
  EXPECT_NE(g.dump().find("tanh"), std::string::npos);
}

TEST(Compiler, InferenceHasForwardOnly) {
  Mlp m;
  GraphSpec s = mlp_spec(m);
  s.inference = true;
  pef::ProgramDesc p = compile_program({s}, {});
  ASSERT_EQ(p.sections.size(), 1u);
  EXPECT_EQ(p.sections[0].type, pef::SectionType::FWD);
  for (const auto& t : p.tensors) {
    EXPECT_NE(t.role, pef::TensorRole::Gradient) << t.name;
    EXPECT_NE(t.role, pef::TensorRole::OptimizerState) << t.name;
    EXPECT_NE(t.role, pef::TensorRole::OutputGrad) << t.name;
  }
  EXPECT_TRUE(p.graphs[0].inference);
}

TEST(Compiler, O1FusesTheActivationIntoTheGemmAndO0KeepsOneOpPerKernel) {
  Mlp m;
  GraphSpec s = mlp_spec(m);
  s.inference = true;
  CompileOptions o0;
  o0.opt_level = 0;
  pef::ProgramDesc p0 = compile_program({s}, o0);
  for (const auto& k : p0.kernels) EXPECT_EQ(k.ops.size(), 1u) << k.name;
  EXPECT_EQ(p0.kernels.size(), 4u);  // linear, tanh, linear, cross_entropy
  pef::ProgramDesc p1 = compile_program({s}, {});
  ASSERT_EQ(p1.kernels.size(), 3u);
  EXPECT_EQ(p1.kernels[0].ops[0].op, "linear");
  EXPECT_EQ(p1.kernels[0].ops[0].attrs.s("activation"), "tanh");
}

// Values of every parameter's gradient computed by the compiled backward
// graph through the interpreter.
std::vector<Tensor> compiled_gradients(const CompiledGraph& cg, const std::vector<Tensor>& inputs,
                                       const std::vector<Tensor>& params) {
  const Graph& g = cg.graph;
  std::vector<Tensor> vals(g.values.size());
  for (size_t i = 0; i < g.inputs.size(); ++i) vals[g.inputs[i]] = inputs[i];
  for (size_t i = 0; i < g.parameters.size(); ++i) vals[g.parameters[i]] = params[i];
  for (ValueId og : g.output_grads)
    if (og != kNone) vals[og] = g.value(og).host;
  interpret(g, vals, {Phase::Forward, Phase::Backward});
  std::vector<Tensor> grads;
  for (ValueId p : g.parameters) grads.push_back(vals[g.value(p).grad]);
  return grads;
}

double loss_of(const Mlp& m, const std::vector<Tensor>& in) {
  autograd::NoGradGuard ng;
  return m.forward(in[0], in[1])[0].item_double();
}

TEST(Compiler, GradientsOfTheCompiledGraphMatchFiniteDifferences) {
  for (int level : {0, 1}) {
    SCOPED_TRACE(level);
    Mlp m;
    GraphSpec s = mlp_spec(m);
    s.backward.loss_indices = {0};
    CompileOptions o;
    o.opt_level = level;
    std::vector<CompiledGraph> out;
    pef::ProgramDesc p = compile_program({s}, o, &out);
    std::set<pef::SectionType> types;
    for (const auto& sec : p.sections) types.insert(sec.type);
    EXPECT_TRUE(types.count(pef::SectionType::FWD) && types.count(pef::SectionType::BCKWD));

    const std::vector<Tensor> grads = compiled_gradients(out[0], s.inputs, m.params());
    const double eps = 1e-6;
    const std::vector<Tensor> ps = m.params();
    for (size_t pi = 0; pi < ps.size(); ++pi) {
      const Tensor& p = ps[pi];
      ASSERT_TRUE(grads[pi].defined()) << p.name();
      const auto got = values(grads[pi]);
      double* data = p.data<double>();
      for (int64_t e = 0; e < p.numel(); ++e) {
        const double keep = data[e];
        data[e] = keep + eps;
        const double up = loss_of(m, s.inputs);
        data[e] = keep - eps;
        const double down = loss_of(m, s.inputs);
        data[e] = keep;
        EXPECT_NEAR(got[e], (up - down) / (2 * eps), 1e-6) << p.name() << "[" << e << "]";
      }
    }
  }
}

TEST(Compiler, ViewsAliasTheirBaseAndStridedInputsAreMadeContiguous) {
  Tensor w = param("w", {5, 3}, 9);
  GraphSpec s;
  s.name = "views";
  s.inference = true;
  s.inputs = {input("x", {4, 5})};
  s.model = [&](std::span<const Tensor> in) -> std::vector<Tensor> {
    Tensor wt = call1("transpose", {w}, {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}});  // [3, 5], strided
    Tensor y = call1("linear", {in[0], wt});                                            // reads wt in place
    Tensor flat = call1("reshape", {call1("transpose", {y}, {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}})},
                        {{"shape", std::vector<int64_t>{-1}}});  // needs a contiguous copy first
    return {flat};
  };
  std::vector<CompiledGraph> out;
  pef::ProgramDesc p = compile_program({s}, {}, &out);
  const Graph& g = out[0].graph;
  // The transposed weight is an alias of the parameter; the reshape of a
  // transposed value reads a contiguous copy (a cast to its own dtype), and
  // the output, a view, is copied out of its base (an alias cannot be one).
  int aliases = 0;
  for (const auto& t : p.tensors) aliases += t.role == pef::TensorRole::Alias;
  EXPECT_EQ(aliases, 3);
  EXPECT_EQ(count_ops(g, "cast"), 2);
  EXPECT_FALSE(g.value(g.outputs[0]).is_view());
  std::vector<Tensor> vals(g.values.size());
  vals[g.inputs[0]] = s.inputs[0];
  vals[g.parameters[0]] = w;
  interpret(g, vals, {Phase::Forward});
  Tensor want = call1("reshape", {call1("transpose", {call1("matmul", {s.inputs[0], w})}, {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}})},
                      {{"shape", std::vector<int64_t>{-1}}});
  EXPECT_EQ(values(vals[g.outputs[0]]), values(want));
}

TEST(Compiler, TracingErrorsNameTheOpAndTheInputShapes) {
  Tensor w = param("bad.weight", {6, 4}, 1);
  GraphSpec s;
  s.inference = true;
  s.inputs = {input("x", {2, 5})};
  s.model = [&](std::span<const Tensor> in) -> std::vector<Tensor> { return {call1("linear", {in[0], w})}; };
  try {
    compile_program({s}, {});
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.code(), Status::ShapeMismatch);
    EXPECT_NE(msg.find("while tracing op 'linear'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("x=x: float64[2, 5]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bad.weight: float64[6, 4]"), std::string::npos) << msg;
  }
}

TEST(Compiler, DropoutRatesAndSeedsBecomeArginsSharedWithTheBackward) {
  Tensor w = param("w", {4, 4}, 3);
  GraphSpec s;
  s.inputs = {input("x", {2, 4})};
  s.model = [&](std::span<const Tensor> in) -> std::vector<Tensor> {
    Tensor h = call1("dropout", {call1("linear", {in[0], w})}, {{"p", 0.25}, {"seed", int64_t{11}}});
    return {call1("mean", {h})};
  };
  std::vector<CompiledGraph> out;
  pef::ProgramDesc p = compile_program({s}, {}, &out);
  std::vector<std::string> rates, seeds;
  for (const auto& a : p.argins) {
    if (a.kind == pef::ArginKind::DropoutRate) rates.push_back(a.name);
    if (a.kind == pef::ArginKind::DropoutSeed) seeds.push_back(a.name);
  }
  ASSERT_EQ(rates.size(), 1u);
  ASSERT_EQ(seeds.size(), 1u);
  EXPECT_EQ(rates[0], "dropout_1.p");
  EXPECT_EQ(p.argins[0].default_value, AttrValue(0.25));
  int bound = 0;
  for (const Node& n : out[0].graph.nodes)
    if (n.op->name == "dropout") {
      EXPECT_EQ(n.bindings.size(), 2u) << n.name << " in phase " << phase_name(n.phase);
      ++bound;
    }
  EXPECT_EQ(bound, 2);  // the forward mask and the backward's
}

TEST(Compiler, PassesRemoveDeadCodeAndMergeCommonSubexpressions) {
  Tensor w = param("w", {3, 3}, 5);
  GraphSpec s;
  s.inference = true;
  s.inputs = {input("x", {2, 3})};
  s.model = [&](std::span<const Tensor> in) -> std::vector<Tensor> {
    Tensor a = call1("linear", {in[0], w});
    Tensor b = call1("linear", {in[0], w});      // the same as a
    call1("exp", {a});                            // unused
    Tensor c = call1("add", {call1("mul", {make({2.0}, {}), make({3.0}, {})}), b});  // 2 * 3 folds
    return {call1("add", {a, c})};
  };
  std::vector<CompiledGraph> out;
  compile_program({s}, {}, &out);
  const Graph& g = out[0].graph;
  EXPECT_EQ(count_ops(g, "linear"), 1);
  EXPECT_EQ(count_ops(g, "exp"), 0);
  EXPECT_EQ(count_ops(g, "mul"), 0);
  std::vector<Tensor> vals(g.values.size());
  vals[g.inputs[0]] = s.inputs[0];
  vals[g.parameters[0]] = w;
  interpret(g, vals, {Phase::Forward});
  Tensor a = call1("linear", {s.inputs[0], w});
  Tensor want = call1("add", {a, call1("add", {make({6.0}, {}), a})});
  EXPECT_EQ(values(vals[g.outputs[0]]), values(want));
}

TEST(Compiler, MemoryPlanKeepsPersistentTensorsApartAndReusesIntermediates) {
  // A deep chain: its intermediates die one after another and share space.
  std::vector<Tensor> ws;
  for (int i = 0; i < 8; ++i) ws.push_back(param(fmt::format("l{}.weight", i), {32, 32}, 20 + i));
  GraphSpec s;
  s.inference = true;
  s.inputs = {input("x", {16, 32})};
  s.model = [&](std::span<const Tensor> in) -> std::vector<Tensor> {
    Tensor h = in[0];
    for (const Tensor& w : ws) h = call1("relu", {call1("linear", {h, w})});
    return {h};
  };
  CompileOptions o;
  o.opt_level = 0;
  pef::ProgramDesc p = compile_program({s}, o);
  uint64_t persistent = 0, intermediate = 0;
  std::vector<const pef::TensorDesc*> owners;
  for (const auto& t : p.tensors) {
    if (t.role == pef::TensorRole::Alias) continue;
    owners.push_back(&t);
    (t.role == pef::TensorRole::Intermediate ? intermediate : persistent) += t.nbytes;
  }
  // Persistent tensors never overlap each other.
  for (const auto* a : owners)
    for (const auto* b : owners) {
      if (a >= b || a->mem != b->mem || pef::in_activation_area(a->role) != pef::in_activation_area(b->role)) continue;
      if (a->role == pef::TensorRole::Intermediate || b->role == pef::TensorRole::Intermediate) continue;
      EXPECT_TRUE(a->arena_offset + a->nbytes <= b->arena_offset || b->arena_offset + b->nbytes <= a->arena_offset)
          << a->name << " and " << b->name;
    }
  EXPECT_LE(p.memory.lower_bound_bytes, p.memory.peak_bytes);
  EXPECT_LT(p.memory.peak_bytes, persistent + intermediate);  // reuse happened
  EXPECT_LE(p.memory.peak_bytes, p.memory.lower_bound_bytes + 2 * 16 * 32 * 8);
}

TEST(Compiler, MultigraphSharesParametersByName) {
  Mlp m;
  GraphSpec a = mlp_spec(m);
  a.name = "train";
  GraphSpec b = mlp_spec(m);
  b.name = "infer";
  b.inference = true;
  pef::ProgramDesc p = compile_program({a, b}, {});
  ASSERT_EQ(p.graphs.size(), 2u);
  EXPECT_EQ(p.graphs[0].parameters, p.graphs[1].parameters);
  std::set<std::string> names;
  for (const auto& t : p.tensors) EXPECT_TRUE(names.insert(t.name).second) << "duplicate " << t.name;
  EXPECT_EQ(p.sections.back().graph, 1);
}

TEST(Compiler, MicroBatchesAreTracedAtTheMicroBatchSize) {
  Mlp m;
  GraphSpec s = mlp_spec(m, 8);
  s.batch_size = 8;
  s.micro_batch_size = 2;
  std::vector<CompiledGraph> out;
  pef::ProgramDesc p = compile_program({s}, {}, &out);
  const Graph& g = out[0].graph;
  EXPECT_EQ(g.value(g.inputs[0]).shape, (Dims{2, 5}));
  EXPECT_EQ(g.value(g.inputs[0]).batch_dim, 0);
  EXPECT_EQ(p.graphs[0].micro_batch_size, 2);
  // The scalar loss of one micro-batch is a quarter of the batch's mean.
  const Value& og = g.value(g.output_grads[0]);
  EXPECT_DOUBLE_EQ(og.host.item_double(), 0.25);
  bool zerograd = false;
  for (const auto& sec : p.sections) {
    zerograd |= sec.type == pef::SectionType::ZEROGRAD;
    if (sec.type == pef::SectionType::FWD || sec.type == pef::SectionType::BCKWD) {
      EXPECT_TRUE(sec.micro_batched);
    }
  }
  EXPECT_TRUE(zerograd);
}

TEST(Compiler, RefusesBadSpecs) {
  Mlp m;
  GraphSpec s = mlp_spec(m, 8);
  s.batch_size = 8;
  s.micro_batch_size = 3;
  EXPECT_THROW(compile_program({s}, {}), Error);
  GraphSpec t = mlp_spec(m);
  CompileOptions o;
  o.opt_level = 3;
  EXPECT_THROW(compile_program({t}, o), Error);
  GraphSpec u = mlp_spec(m);
  u.backward.loss_indices = {5};
  EXPECT_THROW(compile_program({u}, {}), Error);
  GraphSpec frozen = mlp_spec(m);
  Tensor w = rand_tensor({3, 5});
  frozen.model = [&](std::span<const Tensor> in) -> std::vector<Tensor> { return {call1("linear", {in[0], w})}; };
  try {
    compile_program({frozen}, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nothing to train"), std::string::npos) << e.what();
  }
}

TEST(Compiler, OptimizersGroupsPrefixesAndGradNorm) {
  Mlp m;
  GraphSpec s = mlp_spec(m);
  s.backward.loss_indices = {0};
  OptimizerSpec adamw;
  adamw.kind = OptimizerKind::AdamW;
  adamw.defaults = Attrs{{"lr", 0.01}, {"max_grad_norm", 1.0}};
  adamw.groups.push_back({{m.w1, m.b1}, {}});
  adamw.groups.push_back({{m.w2}, Attrs{{"lr", 0.001}, {"amsgrad", true}}});
  OptimizerSpec sgd;
  sgd.kind = OptimizerKind::SGD;
  sgd.defaults = Attrs{{"lr", 0.1}, {"momentum", 0.9}};
  sgd.groups.push_back({{m.b2}, {}});
  s.optimizers = {adamw, sgd};
  std::vector<CompiledGraph> out;
  pef::ProgramDesc p = compile_program({s}, {}, &out);
  std::vector<std::string> argins;
  for (const auto& a : p.argins) argins.push_back(a.name);
  for (const char* want : {"lr", "beta1", "beta2", "eps", "weight_decay", "max_grad_norm", "group1.lr", "opt1.lr",
                           "opt1.momentum"})
    EXPECT_NE(std::find(argins.begin(), argins.end(), want), argins.end()) << want;
  std::vector<pef::SectionType> types;
  for (const auto& c : p.schedule) types.push_back(p.sections[c.section].type);
  EXPECT_EQ(types, (std::vector<pef::SectionType>{pef::SectionType::FWD, pef::SectionType::BCKWD,
                                                  pef::SectionType::GRADNORM, pef::SectionType::OPT}));
  // Optimizer state is named after its parameter; AMSGrad adds a buffer.
  std::vector<std::string> state;
  for (const auto& t : p.tensors)
    if (t.role == pef::TensorRole::OptimizerState) state.push_back(t.name);
  for (const char* want : {"gemm1.weight.exp_avg", "gemm1.weight.exp_avg_sq", "gemm1.weight.step",
                           "gemm2.weight.max_exp_avg_sq", "gemm2.bias.momentum_buffer"})
    EXPECT_NE(std::find(state.begin(), state.end(), want), state.end()) << want;
  EXPECT_EQ(std::find(state.begin(), state.end(), "gemm1.weight.max_exp_avg_sq"), state.end());
  // An unknown hyperparameter is refused with the names that exist.
  OptimizerSpec bad = sgd;
  bad.defaults.set("betas", std::vector<double>{0.9, 0.99});
  s.optimizers = {bad};
  try {
    compile_program({s}, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sgd takes: lr, momentum"), std::string::npos) << e.what();
  }
}

TEST(Compiler, MemoryTypesRegionsAndHostIo) {
  Tensor w = param("w", {4, 4}, 1), shared_a = param("a", {4}, 2), shared_b = param("b", {4}, 3);
  w.impl()->mem_type = static_cast<int8_t>(pef::MemType::HBM);
  shared_a.impl()->region_name = "ab";
  shared_b.impl()->region_name = "ab";
  GraphSpec s;
  s.inference = true;
  s.inputs = {input("x", {2, 4})};
  s.model = [&](std::span<const Tensor> in) -> std::vector<Tensor> {
    return {call1("add", {call1("linear", {in[0], w, shared_a}), shared_b})};
  };
  CompileOptions o;
  o.io_host_memory = true;
  pef::ProgramDesc p = compile_program({s}, o);
  auto find = [&](const std::string& n) -> const pef::TensorDesc& {
    for (const auto& t : p.tensors)
      if (t.name == n) return t;
    throw std::runtime_error("no tensor " + n);
  };
  EXPECT_EQ(find("w").mem, pef::MemType::HBM);
  EXPECT_EQ(find("x").mem, pef::MemType::HOST);
  EXPECT_EQ(find("a").arena_offset, find("b").arena_offset);  // one region
  EXPECT_EQ(find("a").region, "ab");
  EXPECT_GT(p.memory.arena_bytes[static_cast<int>(pef::MemType::HBM)], 0u);
  EXPECT_GT(p.memory.activation_bytes[static_cast<int>(pef::MemType::HOST)], 0u);
}

}  // namespace
}  // namespace samba::compiler
