// The registry sweep: every registered op is either covered or excluded with
// a reason (registry_sweep_recipes.cpp). Covered ops have their gradients
// checked against float64 central finite differences, and their results,
// computed eagerly, compared with the same op traced into a one-op model,
// compiled to a PEF, loaded and run on the emulated device.
#include <gtest/gtest.h>

#include <algorithm>
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

// The op's recipe; null (with a failure, or a skip for an excluded op) when
// the sweep has none.
const Recipe* recipe_of(const std::string& op) {
  if (auto it = sweep_recipes().find(op); it != sweep_recipes().end()) return &it->second;
  if (sweep_exclusions().count(op) == 0)
    ADD_FAILURE()
        << "op '" << op << "' is registered but the sweep neither covers nor excludes it: add a "
        << "recipe (or an exclusion with its reason) in tests/unit/registry_sweep_recipes.cpp";
  return nullptr;
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

TEST_P(SweepGradient, MatchesFiniteDifferences) {
  const OpDef& op = OpRegistry::global().get(GetParam());
  const Recipe* r = recipe_of(op.name);
  if (!r) GTEST_SKIP() << sweep_exclusions().at(op.name);
  check_gradients(op.name, recipe_inputs(op, *r), r->attrs, r->grad_eps, r->grad_tol, r->no_grad);
}

// The op alone as a model: its defined inputs become the graph's inputs.
compiler::GraphSpec one_op_model(const OpDef& op, const std::vector<Tensor>& inputs,
                                 const Attrs& attrs) {
  compiler::GraphSpec s;
  s.name = "sweep_" + op.name;
  s.inference = true;
  std::vector<size_t> positions;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    s.inputs.push_back(named(inputs[i].clone(), "in" + std::to_string(i)));
    positions.push_back(i);
  }
  s.model = [&op, attrs, positions, n = inputs.size()](std::span<const Tensor> in) {
    std::vector<Tensor> all(n);
    for (size_t k = 0; k < positions.size(); ++k) all[positions[k]] = in[k];
    return call(op, all, attrs);
  };
  return s;
}

TEST_P(SweepCompiled, MatchesEager) {
  const OpDef& op = OpRegistry::global().get(GetParam());
  const Recipe* r = recipe_of(op.name);
  if (!r) GTEST_SKIP() << sweep_exclusions().at(op.name);
  if (!r->not_compiled.empty()) GTEST_SKIP() << r->not_compiled;
  const std::vector<Tensor> inputs = recipe_inputs(op, *r);
  std::vector<Tensor> eager;
  {
    autograd::NoGradGuard ng;
    eager = call(op, inputs, r->attrs);
  }
  static ThreadPool pool(1);
  for (int opt_level : {0, 1}) {
    SCOPED_TRACE("opt_level " + std::to_string(opt_level));
    const compiler::GraphSpec spec = one_op_model(op, inputs, r->attrs);
    compiler::CompileOptions options;
    options.opt_level = opt_level;
    runtime::Runtime rt(round_trip(compiler::compile_program({spec}, options)), pool, nullptr);
    runtime::RunRequest request;
    request.inputs = spec.inputs;
    const std::vector<Tensor> compiled = rt.run(request);
    ASSERT_EQ(compiled.size(), eager.size());
    for (size_t k = 0; k < eager.size(); ++k) {
      SCOPED_TRACE("output " + std::to_string(k));
      EXPECT_EQ(compiled[k].dtype(), eager[k].dtype());
      ASSERT_EQ(compiled[k].shape(), eager[k].shape());
      expect_values(compiled[k], values(eager[k]), 1e-9);
    }
  }
}

std::string op_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

INSTANTIATE_TEST_SUITE_P(Registry, SweepGradient, ::testing::ValuesIn(op_names(true)), op_name);
INSTANTIATE_TEST_SUITE_P(Registry, SweepCompiled, ::testing::ValuesIn(op_names(false)), op_name);

}  // namespace
}  // namespace samba::testing
