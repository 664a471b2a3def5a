// run()'s arguments on training PEFs: section types and ids, call ranges,
// hyperparameters that persist, evaluation-mode dropout, and the
// grad_of_outputs pattern (the loss computed on the host).
#include <gtest/gtest.h>

#include <limits>
#include <regex>

#include "compile_test_util.h"
#include "compiler/compile.h"
#include "engine/ops/autograd.h"
#include "engine/runtime/runtime.h"
#include "op_test_util.h"

namespace samba::runtime {
namespace {

using compiler::GraphSpec;
using testing::named;
using testing::rand_tensor;
using testing::round_trip;
using testing::values;

struct Net {
  Tensor w = named(rand_tensor({3, 4}, DType::Float32, 1, -0.5, 0.5), "fc.weight", true);
  Tensor b = named(rand_tensor({3}, DType::Float32, 2, -0.5, 0.5), "fc.bias", true);
  double dropout = 0;
};

Tensor x_input() { return named(rand_tensor({5, 4}, DType::Float32, 3), "x"); }
Tensor y_input() {
  return named(testing::make({0, 2, 1, 1, 0}, {5}, DType::Int64), "y");
}

compiler::OptimizerSpec sgd(const Net& n, double lr) {
  compiler::OptimizerSpec o;
  o.kind = compiler::OptimizerKind::SGD;
  o.defaults = Attrs{{"lr", lr}};
  o.groups.push_back({{n.w, n.b}, {}});
  return o;
}

// loss = cross_entropy(dropout(x) @ wᵀ + b, y), and the logits.
GraphSpec with_loss(const Net& n, double lr) {
  GraphSpec s;
  s.name = "net";
  s.inputs = {x_input(), y_input()};
  s.model = [&n](std::span<const Tensor> in) -> std::vector<Tensor> {
    Tensor x = n.dropout > 0 ? call1("dropout", {in[0]}, {{"p", n.dropout}, {"seed", int64_t{7}}}) : in[0];
    Tensor logits = call1("linear", {x, n.w, n.b});
    return {call1("cross_entropy", {logits, in[1]}), logits};
  };
  s.backward.loss_indices = {0};
  s.optimizers.push_back(sgd(n, lr));
  return s;
}

std::unique_ptr<Runtime> load(const std::vector<GraphSpec>& specs, ThreadPool& pool) {
  return std::make_unique<Runtime>(round_trip(compiler::compile_program(specs, {})), pool, nullptr);
}

RunRequest step_request() {
  RunRequest r;
  r.inputs = {x_input(), y_input()};
  return r;
}

TEST(RuntimeRun, ForwardOnlyLeavesTheWeightsAlone) {
  Net n;
  ThreadPool pool(2);
  auto rt = load({with_loss(n, 0.1)}, pool);
  RunRequest r = step_request();
  r.section_types = {"fwd"};
  RunInfo info;
  auto outs = rt->run(r, &info);
  ASSERT_EQ(info.calls.size(), 1u);
  autograd::NoGradGuard ng;
  const double want = call1("cross_entropy", {call1("linear", {x_input(), n.w, n.b}), y_input()}).item_double();
  EXPECT_NEAR(values(outs[0])[0], want, 1e-6);
  EXPECT_EQ(values(rt->read("fc.weight")), values(n.w));
  // The full schedule trains: the weight moves by -lr * its gradient.
  rt->run(step_request());
  const auto g = values(rt->read("fc.weight", true));
  const auto w0 = values(n.w), w1 = values(rt->read("fc.weight"));
  for (size_t i = 0; i < w0.size(); ++i) EXPECT_NEAR(w1[i], w0[i] - 0.1 * g[i], 1e-6) << i;
}

TEST(RuntimeRun, HyperparametersPersistAcrossRuns) {
  Net n;
  ThreadPool pool(1);
  auto rt = load({with_loss(n, 0.1)}, pool);
  RunRequest r = step_request();
  r.hyperparams = {{"lr", 0.0}};
  rt->run(r);
  EXPECT_EQ(values(rt->read("fc.weight")), values(n.w));
  rt->run(step_request());  // lr is still 0
  EXPECT_EQ(values(rt->read("fc.weight")), values(n.w));
  EXPECT_EQ(rt->argin("lr"), AttrValue(0.0));
  r.hyperparams = {{"lr", 0.5}};
  rt->run(r);
  EXPECT_NE(values(rt->read("fc.weight")), values(n.w));
  RunRequest bad = step_request();
  bad.hyperparams = {{"no_such", 1.0}};
  try {
    rt->run(bad);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("its argins are: lr"), std::string::npos) << e.what();
  }
}

// A PEF's argin default reaches the kernels on the first run, so the load
// refuses one that set_argin would refuse.
TEST(RuntimeRun, AnArginDefaultOutsideItsRangeIsRefusedAtLoad) {
  Net n;
  n.dropout = 0.5;
  ThreadPool pool(1);
  for (const auto& [name, bad] : std::vector<std::pair<std::string, AttrValue>>{
           {"lr", std::numeric_limits<double>::quiet_NaN()}, {".p", 5.0}, {"lr", -1.0}}) {
    pef::ProgramDesc d = round_trip(compiler::compile_program({with_loss(n, 0.1)}, {}));
    for (auto& a : d.argins)
      if (a.name == name || a.name.ends_with(name)) a.default_value = bad;
    try {
      Runtime rt(std::move(d), pool, nullptr);
      ADD_FAILURE() << name << " = " << attr_value_str(bad) << " loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Status::CorruptFile) << e.what();
      EXPECT_NE(std::string(e.what()).find("PEF: the default of argin"), std::string::npos)
          << e.what();
    }
  }
}

TEST(RuntimeRun, SectionIdsCallRangesAndTheirErrors) {
  Net n;
  ThreadPool pool(1);
  auto rt = load({with_loss(n, 0.1)}, pool);
  const auto& d = rt->program().desc();
  ASSERT_EQ(d.schedule.size(), 3u);  // FWD, BCKWD, OPT
  RunRequest r = step_request();
  RunInfo info;
  r.until_call = 2;  // stops on reaching the OPT call
  rt->run(r, &info);
  EXPECT_EQ(info.calls, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(values(rt->read("fc.weight")), values(n.w));
  RunRequest opt;
  opt.from_call = 2;
  rt->run(opt, &info);
  EXPECT_EQ(info.calls, (std::vector<int32_t>{2}));
  EXPECT_NE(values(rt->read("fc.weight")), values(n.w));
  RunRequest ids;
  ids.section_ids = {d.sections[2].id, d.sections[0].id};
  rt->run(ids, &info);
  EXPECT_EQ(info.calls, (std::vector<int32_t>{2, 0}));
  RunRequest unknown;
  unknown.section_ids = {999};
  try {
    rt->run(unknown);
    ADD_FAILURE() << "an unknown section id ran";
  } catch (const Error& e) {
    const std::string ids = fmt::format("its section ids: [{}, {}, {}]", d.sections[0].id, d.sections[1].id,
                                        d.sections[2].id);
    EXPECT_NE(std::string(e.what()).find(ids), std::string::npos) << e.what();
  }
  RunRequest both;
  both.section_ids = {0};
  both.section_types = {"FWD"};
  EXPECT_THROW(rt->run(both), Error);
  RunRequest missing;
  missing.section_types = {"GRADNORM"};
  EXPECT_THROW(rt->run(missing), Error);
  RunRequest backwards;
  backwards.from_call = 2;
  backwards.until_call = 1;
  EXPECT_THROW(rt->run(backwards), Error);
}

TEST(RuntimeRun, AKernelErrorNamesTheKernelAndItsOp) {
  Net n;
  ThreadPool pool(1);
  auto rt = load({with_loss(n, 0.1)}, pool);
  RunRequest r = step_request();
  r.inputs[1] = named(testing::make({0, 2, 7, 1, 0}, {5}, DType::Int64), "y");  // 3 classes
  const int64_t step = rt->step();
  try {
    rt->run(r);
    FAIL() << "a class index of 7 for 3 classes ran";
  } catch (const Error& e) {
    const std::regex named_kernel("^kernel [0-9]+ '.+' op [0-9]+ 'cross_entropy': .+");
    EXPECT_TRUE(std::regex_search(e.what(), named_kernel))
        << e.what();
  }
  // The failed run took no step: the next run draws the masks it would have.
  EXPECT_EQ(rt->step(), step);
  rt->run(step_request());
  EXPECT_EQ(rt->step(), step + 1);
}

TEST(RuntimeRun, EvaluationModeTurnsDropoutOffForTheRunOnly) {
  Net n;
  n.dropout = 0.5;
  ThreadPool pool(1);
  auto rt = load({with_loss(n, 0.1)}, pool);
  ASSERT_EQ(rt->names(NameList::DropoutRateArgins).size(), 1u);
  const std::string rate = rt->names(NameList::DropoutRateArgins)[0];
  RunRequest eval = step_request();
  eval.section_types = {"FWD"};
  eval.train = false;
  autograd::NoGradGuard ng;
  const auto plain = values(call1("linear", {x_input(), n.w, n.b}));
  EXPECT_EQ(values(rt->run(eval)[1]), plain);
  RunRequest train = step_request();
  train.section_types = {"FWD"};
  EXPECT_NE(values(rt->run(train)[1]), plain);
  EXPECT_EQ(rt->argin(rate), AttrValue(0.5));
  // Each training step draws a new mask.
  EXPECT_NE(values(rt->run(train)[1]), values(rt->run(train)[1]));
}

TEST(RuntimeRun, GradOfOutputsTrainsFromALossComputedOnTheHost) {
  Net n;
  GraphSpec s;
  s.name = "partial";
  s.inputs = {x_input()};
  s.model = [&n](std::span<const Tensor> in) -> std::vector<Tensor> { return {call1("linear", {in[0], n.w, n.b})}; };
  s.optimizers.push_back(sgd(n, 0.1));
  ThreadPool pool(1);
  auto rt = load({s}, pool);
  RunRequest fwd;
  fwd.inputs = {x_input()};
  fwd.section_types = {"FWD"};
  Tensor logits = rt->run(fwd)[0];
  // The loss and its gradient on the host.
  Tensor host = logits.detach();
  host.impl()->requires_grad = true;
  Tensor loss = call1("cross_entropy", {host, y_input()});
  autograd::backward({loss}, {Tensor()}, false);
  const Tensor dlogits = Tensor(host.impl()->grad);
  RunRequest rest;
  rest.section_types = {"BCKWD", "OPT"};
  rest.grad_of_outputs = {dlogits};
  rt->run(rest);
  // The reference: the same step with eager autograd.
  Tensor w = n.w.clone(), b = n.b.clone();
  w.impl()->requires_grad = b.impl()->requires_grad = true;
  Tensor ref = call1("cross_entropy", {call1("linear", {x_input(), w, b}), y_input()});
  autograd::backward({ref}, {Tensor()}, false);
  const auto gw = values(Tensor(w.impl()->grad)), w0 = values(n.w), w1 = values(rt->read("fc.weight"));
  for (size_t i = 0; i < w0.size(); ++i) EXPECT_NEAR(w1[i], w0[i] - 0.1 * gw[i], 1e-6) << i;
  // A gradient of the wrong shape is refused before anything runs.
  RunRequest bad = rest;
  bad.grad_of_outputs = {rand_tensor({2, 3}, DType::Float32)};
  EXPECT_THROW(rt->run(bad), Error);
}

TEST(RuntimeRun, MicroBatchedTrainingMatchesTheWholeBatch) {
  Net n;
  auto spec = [&](int64_t micro) {
    GraphSpec s = with_loss(n, 0.1);
    s.inputs = {named(rand_tensor({8, 4}, DType::Float32, 9), "x"),
                named(testing::make({0, 2, 1, 1, 0, 2, 2, 1}, {8}, DType::Int64), "y")};
    s.batch_size = 8;
    s.micro_batch_size = micro;
    return s;
  };
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    ThreadPool pool(threads);
    auto whole = load({spec(0)}, pool);
    auto micro = load({spec(2)}, pool);
    ASSERT_TRUE(micro->program().sections()[1].micro_batched);
    RunRequest r;
    r.inputs = spec(0).inputs;
    std::vector<double> loss_whole, loss_micro;
    for (int step = 0; step < 3; ++step) {
      loss_whole.push_back(values(whole->run(r)[0])[0]);
      loss_micro.push_back(values(micro->run(r)[0])[0]);
    }
    for (int step = 0; step < 3; ++step) EXPECT_NEAR(loss_micro[step], loss_whole[step], 1e-6) << step;
    const auto a = values(whole->read("fc.weight")), b = values(micro->read("fc.weight"));
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6) << i;
  }
}

TEST(RuntimeRun, SpatialMappingRunsTheWholeStepAsOneUnitWithTheSameResults) {
  Net n;
  GraphSpec section = with_loss(n, 0.1), spatial = with_loss(n, 0.1);
  spatial.mapping = pef::Mapping::Spatial;
  ThreadPool pool(2);
  auto a = load({section}, pool);
  auto b = load({spatial}, pool);
  EXPECT_TRUE(a->program().units().empty());
  ASSERT_EQ(b->program().units().size(), 1u);
  EXPECT_EQ(b->program().units()[0].kernels.size(), b->program().kernels().size());
  for (int step = 0; step < 3; ++step)
    EXPECT_EQ(values(a->run(step_request())[0]), values(b->run(step_request())[0])) << step;
  EXPECT_EQ(values(a->read("fc.weight")), values(b->read("fc.weight")));
  // Single sections still run on their own.
  RunRequest fwd = step_request();
  fwd.section_types = {"FWD"};
  EXPECT_EQ(values(a->run(fwd)[0]), values(b->run(fwd)[0]));
}

}  // namespace
}  // namespace samba::runtime
