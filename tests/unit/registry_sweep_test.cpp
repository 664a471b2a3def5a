// The registry sweep: every registered op is either covered or excluded with
// a reason (registry_sweep_recipes.cpp), so no op lands untested. For each
// recipe of a covered op:
// - its gradients against float64 central finite differences;
// - its eager results against the op traced into a one-op model, compiled to
//   a PEF, loaded and run on the emulated device (each floating dtype, o0/o1);
// - the gradients of the compiled training graph against eager autograd's;
// - its results on strided inputs against those on contiguous ones.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>

#include "compile_test_util.h"
#include "compiler/compile.h"
#include "engine/ops/autograd.h"
#include "engine/ops/registry.h"
#include "engine/runtime/runtime.h"
#include "op_test_util.h"
#include "registry_sweep_recipes.h"

namespace samba::testing {
namespace {

std::vector<std::string> op_names(bool with_gradient_only) {
  std::vector<std::string> names;
  for (const OpDef* op : OpRegistry::global().all())
    if (!with_gradient_only || op->grad) names.push_back(op->name);
  return names;
}

// The op's recipes; null, with a failure unless the op is excluded, when
// the sweep has none.
const Recipes* recipes_of(const std::string& op) {
  if (auto it = sweep_recipes().find(op); it != sweep_recipes().end()) return &it->second;
  if (sweep_exclusions().count(op) == 0)
    ADD_FAILURE()
        << "op '" << op << "' is registered but the sweep neither covers nor excludes it: add a "
        << "recipe (or an exclusion with its reason) in tests/unit/registry_sweep_recipes.cpp";
  return nullptr;
}

std::string exclusion_of(const std::string& op) {
  auto it = sweep_exclusions().find(op);
  return it == sweep_exclusions().end() ? "no recipe" : it->second;
}

// Runs `check` on each recipe of the op, naming the recipe in failures;
// false when the op has none (it is excluded, or the test has failed).
template <typename Check>
bool for_each_recipe(const OpDef& op, Check check) {
  const Recipes* recipes = recipes_of(op.name);
  if (!recipes) return false;
  for (size_t v = 0; v < recipes->size(); ++v) {
    SCOPED_TRACE("recipe " + std::to_string(v));
    check((*recipes)[v]);
  }
  return true;
}

// `inputs` with every floating-point one converted to `dtype`.
std::vector<Tensor> floats_as(const std::vector<Tensor>& inputs, DType dtype) {
  autograd::NoGradGuard ng;
  std::vector<Tensor> out;
  for (const Tensor& t : inputs)
    out.push_back(t.defined() && is_floating(t.dtype()) ? call1("cast", {t}, {{"dtype", dtype}})
                                                        : t);
  return out;
}

std::vector<Tensor> eager_outputs(const OpDef& op, const std::vector<Tensor>& inputs,
                                  const Attrs& attrs) {
  autograd::NoGradGuard ng;
  return call(op, inputs, attrs);
}

void expect_same_outputs(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                         double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    SCOPED_TRACE("output " + std::to_string(k));
    EXPECT_EQ(got[k].dtype(), want[k].dtype());
    ASSERT_EQ(got[k].shape(), want[k].shape());
    expect_values(got[k], values(want[k]), tol);
  }
}

TEST(RegistrySweep, EveryOpIsCoveredOrExcludedOnce) {
  std::set<std::string> registered;
  for (const OpDef* op : OpRegistry::global().all()) {
    registered.insert(op->name);
    const bool covered = sweep_recipes().count(op->name) > 0;
    const bool excluded = sweep_exclusions().count(op->name) > 0;
    EXPECT_TRUE(covered || excluded)
        << "op '" << op->name << "' is neither covered nor excluded by the sweep: "
        << "add it to tests/unit/registry_sweep_recipes.cpp";
    EXPECT_FALSE(covered && excluded) << "op '" << op->name << "' is both covered and excluded";
  }
  for (const auto& [name, recipe] : sweep_recipes())
    EXPECT_TRUE(registered.count(name))
        << "the sweep has a recipe for '" << name << "', which is not registered";
  for (const auto& [name, reason] : sweep_exclusions()) {
    EXPECT_TRUE(registered.count(name))
        << "the sweep excludes '" << name << "', which is not registered";
    EXPECT_FALSE(reason.empty()) << "the exclusion of '" << name << "' gives no reason";
  }
}

class SweepGradient : public ::testing::TestWithParam<std::string> {};
class SweepCompiled : public ::testing::TestWithParam<std::string> {};
class SweepStrided : public ::testing::TestWithParam<std::string> {};

TEST_P(SweepGradient, MatchesFiniteDifferences) {
  const OpDef& op = OpRegistry::global().get(GetParam());
  const bool covered = for_each_recipe(op, [&](const Recipe& r) {
    if (r.gradient)
      check_gradients(op.name, recipe_inputs(op, r), r.attrs, r.grad_eps, r.grad_tol, r.no_grad);
  });
  if (!covered) GTEST_SKIP() << exclusion_of(op.name);
}

// sum_k sum(outputs[k] * weights[k]) over the outputs that have weights.
Tensor weighted_sum(const std::vector<Tensor>& outputs, const std::vector<Tensor>& weights) {
  Tensor loss;
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (!weights[k].defined()) continue;
    Tensor term = call1("sum", {call1("mul", {outputs[k], weights[k]})});
    loss = loss.defined() ? call1("add", {loss, term}) : term;
  }
  return loss;
}

// The op alone as a model. Its defined inputs become the graph's inputs,
// or its parameters "p<i>" where `trainable` says so. With loss weights the
// model returns their weighted sum of the op's outputs (a training graph);
// without, the op's outputs (an inference graph).
compiler::GraphSpec one_op_model(const OpDef& op, const std::vector<Tensor>& inputs,
                                 const Attrs& attrs, const std::vector<bool>& trainable = {},
                                 const std::vector<Tensor>& loss_weights = {}) {
  compiler::GraphSpec s;
  s.name = "sweep_" + op.name;
  s.inference = loss_weights.empty();
  std::vector<Tensor> fixed(inputs.size());  // undefined, or a parameter
  std::vector<size_t> positions;             // of the graph's inputs
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    if (i < trainable.size() && trainable[i]) {
      fixed[i] = named(inputs[i].clone(), "p" + std::to_string(i), true);
    } else {
      s.inputs.push_back(named(inputs[i].clone(), "in" + std::to_string(i)));
      positions.push_back(i);
    }
  }
  s.model = [&op, attrs, fixed, positions, loss_weights](std::span<const Tensor> in) {
    std::vector<Tensor> all = fixed;
    for (size_t k = 0; k < positions.size(); ++k) all[positions[k]] = in[k];
    std::vector<Tensor> outs = call(op, all, attrs);
    if (loss_weights.empty()) return outs;
    return std::vector<Tensor>{weighted_sum(outs, loss_weights)};
  };
  return s;
}

std::unique_ptr<runtime::Runtime> load(
    const compiler::GraphSpec& spec, int opt_level,
    compiler::MixedPrecision precision = compiler::MixedPrecision::None) {
  static ThreadPool pool(1);
  compiler::CompileOptions options;
  options.opt_level = opt_level;
  options.mixed_precision = precision;
  return std::make_unique<runtime::Runtime>(round_trip(compiler::compile_program({spec}, options)),
                                            pool, nullptr);
}

bool is_mutated(const OpDef& op, const std::vector<Tensor>& inputs, size_t i) {
  return inputs[i].defined() && op.inputs[std::min(i, op.inputs.size() - 1)].mutated;
}

// The op's outputs, then the inputs it updates in place (running
// statistics) as they are afterwards, computed eagerly.
std::vector<Tensor> eager_results(const OpDef& op, const std::vector<Tensor>& inputs,
                                  const Attrs& attrs) {
  std::vector<Tensor> own;
  for (const Tensor& t : inputs) own.push_back(t.defined() ? t.clone() : t);
  std::vector<Tensor> results = eager_outputs(op, own, attrs);
  for (size_t i = 0; i < own.size(); ++i)
    if (is_mutated(op, own, i)) results.push_back(own[i]);
  return results;
}

// The same, from the compiled one-op model (updated inputs read back from
// the device).
std::vector<Tensor> compiled_results(
    const OpDef& op, const std::vector<Tensor>& inputs, const Attrs& attrs, int opt_level,
    compiler::MixedPrecision precision = compiler::MixedPrecision::None) {
  const compiler::GraphSpec spec = one_op_model(op, inputs, attrs);
  const std::unique_ptr<runtime::Runtime> rt = load(spec, opt_level, precision);
  runtime::RunRequest request;
  request.inputs = spec.inputs;
  std::vector<Tensor> results = rt->run(request);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (is_mutated(op, inputs, i)) results.push_back(rt->read("in" + std::to_string(i)));
  return results;
}

// In each floating-point dtype, without (o0) and with (o1) the compiler's
// passes.
TEST_P(SweepCompiled, MatchesEager) {
  const OpDef& op = OpRegistry::global().get(GetParam());
  const bool covered = for_each_recipe(op, [&](const Recipe& r) {
    if (!r.not_compiled.empty()) return;
    for (DType dtype : {DType::Float64, DType::Float32, DType::BFloat16, DType::Float16}) {
      const std::vector<Tensor> inputs = floats_as(recipe_inputs(op, r), dtype);
      const std::vector<Tensor> eager = eager_results(op, inputs, r.attrs);
      for (int opt_level : {0, 1}) {
        SCOPED_TRACE(fmt::format("{}, o{}", dtype_name(dtype), opt_level));
        expect_same_outputs(compiled_results(op, inputs, r.attrs, opt_level), eager,
                            dtype == DType::Float64   ? 1e-9
                            : dtype == DType::Float32 ? 1e-5
                                                      : 1e-2);
      }
    }
  });
  if (!covered) GTEST_SKIP() << exclusion_of(op.name);
}

// A bf16 mixed-precision compile of each op on fp32 inputs runs, returns
// its outputs in the traced dtypes, and computes fp32's results to bf16
// precision: the rewrite never leaves an op with inputs it refuses.
TEST_P(SweepCompiled, Bf16MixedPrecisionMatchesFloat32) {
  const OpDef& op = OpRegistry::global().get(GetParam());
  const bool covered = for_each_recipe(op, [&](const Recipe& r) {
    if (!r.not_compiled.empty()) return;
    const std::vector<Tensor> inputs = floats_as(recipe_inputs(op, r), DType::Float32);
    expect_same_outputs(
        compiled_results(op, inputs, r.attrs, 1, compiler::MixedPrecision::Bf16),
        eager_results(op, inputs, r.attrs), 3e-2);
  });
  if (!covered) GTEST_SKIP() << exclusion_of(op.name);
}

// The op's differentiable inputs (floating point, not in the recipe's
// no_grad list).
std::vector<bool> differentiable(const std::vector<Tensor>& inputs, const Recipe& r) {
  std::vector<bool> d(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    d[i] = inputs[i].defined() && is_floating(inputs[i].dtype()) &&
           std::find(r.no_grad.begin(), r.no_grad.end(), i) == r.no_grad.end();
  return d;
}

// The gradients the compiled program's BCKWD section computes, for a loss
// that weighs the op's outputs, equal eager autograd's: the compiler's own
// differentiation of the op (its gradient rule traced into the graph).
TEST_P(SweepGradient, CompiledMatchesEager) {
  const OpDef& op = OpRegistry::global().get(GetParam());
  const bool covered = for_each_recipe(op, [&](const Recipe& r) {
    if (!r.gradient || !r.not_compiled.empty()) return;
    const std::vector<Tensor> inputs = recipe_inputs(op, r);
    const std::vector<bool> wrt = differentiable(inputs, r);
    std::vector<Tensor> weights;
    for (const Tensor& out : eager_outputs(op, inputs, r.attrs))
      weights.push_back(is_floating(out.dtype())
                            ? rand_tensor(out.shape(), out.dtype(), 100 + weights.size())
                            : Tensor());
    std::vector<Tensor> leaves;
    for (size_t i = 0; i < inputs.size(); ++i)
      leaves.push_back(inputs[i].defined() ? named(inputs[i].clone(), "", wrt[i]) : Tensor());
    autograd::backward({weighted_sum(call(op, leaves, r.attrs), weights)},
                       {Tensor::scalar(1, DType::Float64)}, false);
    const compiler::GraphSpec spec = one_op_model(op, inputs, r.attrs, wrt, weights);
    const std::unique_ptr<runtime::Runtime> rt = load(spec, 1);
    runtime::RunRequest request;
    request.inputs = spec.inputs;
    rt->run(request);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!wrt[i]) continue;
      SCOPED_TRACE("d/d input " + std::to_string(i));
      ASSERT_TRUE(leaves[i].grad().defined());
      expect_values(rt->read("p" + std::to_string(i), true), values(leaves[i].grad()), 1e-9);
    }
  });
  if (!covered) GTEST_SKIP() << exclusion_of(op.name);
}

// Inputs laid out with gaps give the results of contiguous ones, whether the
// kernel reads the strides itself or the call makes the inputs contiguous.
TEST_P(SweepStrided, MatchesContiguous) {
  const OpDef& op = OpRegistry::global().get(GetParam());
  const bool covered = for_each_recipe(op, [&](const Recipe& r) {
    const std::vector<Tensor> inputs = recipe_inputs(op, r);
    std::vector<Tensor> strided;
    for (const Tensor& t : inputs) strided.push_back(t.defined() ? noncontiguous(t) : t);
    expect_same_outputs(eager_outputs(op, strided, r.attrs), eager_outputs(op, inputs, r.attrs),
                        1e-12);
  });
  if (!covered) GTEST_SKIP() << exclusion_of(op.name);
}

std::string op_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

INSTANTIATE_TEST_SUITE_P(Registry, SweepGradient, ::testing::ValuesIn(op_names(true)), op_name);
INSTANTIATE_TEST_SUITE_P(Registry, SweepCompiled, ::testing::ValuesIn(op_names(false)), op_name);
INSTANTIATE_TEST_SUITE_P(Registry, SweepStrided, ::testing::ValuesIn(op_names(false)), op_name);

}  // namespace
}  // namespace samba::testing
