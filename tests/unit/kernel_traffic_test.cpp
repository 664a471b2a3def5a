// The bytes a kernel moves (runtime::kernel_bytes_moved) and where a user
// sees them: a fused kernel counts its external inputs and the results it
// stores, never the values that stay in its tiles; the Chrome trace's kernel
// events carry the bytes and flops, and the runtime summary turns them into
// GB/s beside the machine's memcpy bandwidth.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>

#include "compile_test_util.h"
#include "compiler/compile.h"
#include "engine/ops/operands.h"
#include "engine/profile/memcpy_bandwidth.h"
#include "engine/profile/profile_report.h"
#include "engine/profile/profiler.h"
#include "engine/runtime/fused_elementwise.h"
#include "engine/runtime/runtime.h"
#include "op_test_util.h"

namespace samba::runtime {
namespace {

using compiler::GraphSpec;
using testing::named;
using testing::rand_tensor;
using testing::round_trip;

constexpr int64_t kRows = 64, kCols = 129;

GraphSpec inference(std::function<std::vector<Tensor>(std::span<const Tensor>)> model,
                    std::vector<Tensor> inputs) {
  return testing::inference_graph("traffic", std::move(model), std::move(inputs));
}

std::shared_ptr<const Program> build(const GraphSpec& s, int opt_level) {
  compiler::CompileOptions o;
  o.opt_level = opt_level;
  return std::make_shared<const Program>(round_trip(compiler::compile_program({s}, o)));
}

double nbytes(const Program& p, int32_t t) {
  return static_cast<double>(p.desc().tensors[static_cast<size_t>(t)].nbytes);
}

// What a kernel reads from outside itself, as the PEF lists it, plus `stored`.
double reads_plus(const Program& p, size_t k, std::initializer_list<int32_t> stored) {
  double b = 0;
  for (int32_t t : p.desc().kernels[k].reads) b += nbytes(p, t);
  for (int32_t t : stored) b += nbytes(p, t);
  return b;
}

size_t only_fused_kernel(const Program& p) {
  size_t found = p.kernels().size(), n = 0;
  for (size_t k = 0; k < p.kernels().size(); ++k)
    if (p.kernels()[k].fused) found = k, ++n;
  EXPECT_EQ(n, 1u);
  return found;
}

double total_bytes(const Program& p) {
  double b = 0;
  for (const KernelPlan& k : p.kernels()) b += k.bytes;
  return b;
}

Tensor x_input() { return named(rand_tensor({kRows, kCols}, DType::Float32, 3), "x"); }

// mul -> tanh -> exp -> silu -> div in one pass; tanh's result is also read
// by a sum, so it is stored; the others live only in tiles.
GraphSpec chain_with_a_stored_intermediate() {
  return inference(
      [](auto in) -> std::vector<Tensor> {
        Tensor t = call1("tanh", {call1("mul", {in[0], ops::wrap_scalar(0.5)})});
        Tensor u = call1("exp", {t});
        return {call1("div", {call1("silu", {u}), in[0]}), call1("sum", {t})};
      },
      {x_input()});
}

TEST(KernelBytes, FusedChainMovesItsInputsAndStoredResultsOnly) {
  auto p = build(chain_with_a_stored_intermediate(), 1);
  const size_t k = only_fused_kernel(*p);
  const KernelPlan& plan = p->kernels()[k];
  ASSERT_EQ(plan.steps.size(), 5u);
  ASSERT_EQ(plan.fused->unstored().size(), 3u);
  const int32_t tanh_out = plan.steps[1].outputs[0];
  const int32_t result = plan.steps.back().outputs[0];
  // x and the scalar, then tanh's result and the chain's.
  EXPECT_EQ(plan.bytes, reads_plus(*p, k, {tanh_out, result}));
  const double full = 4.0 * kRows * kCols;
  EXPECT_GE(plan.bytes, 3 * full);
  EXPECT_LE(plan.bytes, 3 * full + 8);  // the scalar's one element
  // Run op by op, the same ops write and read back every intermediate.
  EXPECT_GE(total_bytes(*build(chain_with_a_stored_intermediate(), 0)), total_bytes(*p) + 6 * full);
}

// linear -> tanh -> add(residual) -> sigmoid -> mul(row vector): the chain
// runs on each GEMM block; the linear's output is never stored.
GraphSpec linear_with_epilogue() {
  Tensor w = named(rand_tensor({96, kCols}, DType::Float32, 14), "w");
  Tensor b = named(rand_tensor({96}, DType::Float32, 15), "b");
  Tensor scale = named(rand_tensor({96}, DType::Float32, 16), "scale");
  Tensor res = named(rand_tensor({kRows, 96}, DType::Float32, 17), "res");
  return inference(
      [=](auto in) -> std::vector<Tensor> {
        Tensor h = call1("tanh", {call1("linear", {in[0], w, b})});
        return {call1("mul", {call1("sigmoid", {call1("add", {h, in[1]})}), scale})};
      },
      {x_input(), res});
}

TEST(KernelBytes, ProducerWithEpilogueMovesLessThanItsKernelsApart) {
  auto fused = build(linear_with_epilogue(), 1);
  const size_t k = only_fused_kernel(*fused);
  const KernelPlan& plan = fused->kernels()[k];
  ASSERT_TRUE(plan.fused->has_producer());
  const int32_t product = plan.steps[0].outputs[0];
  // x, w, b, the residual and the scale in; the result out.
  EXPECT_EQ(plan.bytes, reads_plus(*fused, k, {plan.steps.back().outputs[0]}));

  // Apart: the linear stores its product and the next kernel reads it back.
  auto apart = build(linear_with_epilogue(), 0);
  double linear_alone = 0;
  for (const KernelPlan& kp : apart->kernels())
    if (kp.steps.size() == 1 && kp.steps[0].op->name == "linear") linear_alone = kp.bytes;
  ASSERT_GT(linear_alone, 0);
  EXPECT_LT(plan.bytes, total_bytes(*apart));
  EXPECT_LT(plan.bytes, linear_alone + nbytes(*fused, product) +
                            nbytes(*fused, plan.steps.back().outputs[0]));
}

// One profiled run of the fused linear program.
struct ProfiledRun {
  ProfileTrace trace;
  std::map<std::string, const KernelPlan*> plan_of;
  std::unique_ptr<Runtime> rt;
};

ProfiledRun profiled_run(Profiler& profiler, ThreadPool& pool, ProfileCategoryMask categories) {
  ProfiledRun r;
  const GraphSpec s = linear_with_epilogue();
  compiler::CompileOptions o;
  r.rt = std::make_unique<Runtime>(round_trip(compiler::compile_program({s}, o)), pool, &profiler);
  for (const KernelPlan& k : r.rt->program().kernels()) r.plan_of[k.name] = &k;
  RunRequest req;
  req.inputs = s.inputs;
  const auto id = profiler.start(categories);
  r.rt->run(req);
  r.rt->run(req);
  r.trace = profiler.stop(id);
  return r;
}

TEST(KernelBytes, ChromeTraceKernelEventsCarryBytesAndFlops) {
  Profiler profiler;
  ThreadPool pool(2);
  const ProfiledRun r = profiled_run(profiler, pool, kAllProfileCategories);
  const auto json = nlohmann::json::parse(chrome_trace_json(r.trace));
  int kernels = 0;
  for (const auto& e : json["traceEvents"]) {
    if (e.value("cat", "") != "kernel") continue;
    ++kernels;
    const KernelPlan* plan = r.plan_of.at(e["name"].get<std::string>());
    ASSERT_TRUE(e.contains("args")) << e.dump();
    EXPECT_EQ(e["args"]["bytes"].get<int64_t>(), static_cast<int64_t>(plan->bytes)) << e.dump();
    EXPECT_GT(plan->bytes, 0);
    EXPECT_DOUBLE_EQ(e["args"]["flops"].get<double>(), plan->flops) << e.dump();
  }
  EXPECT_EQ(kernels, 2 * static_cast<int>(r.plan_of.size()));
}

TEST(KernelBytes, RuntimeSummaryGivesGbPerSecondAgainstMemcpy) {
  Profiler profiler;
  ThreadPool pool(2);
  const ProfiledRun r = profiled_run(profiler, pool, kRuntimeProfileCategories);
  bool found = false;
  for (const ProfileStats& s : summarize(r.trace)) {
    if (s.category != ProfileCategory::Kernel) continue;
    found = true;
    const auto per_run = static_cast<int64_t>(r.plan_of.at(std::string(s.name))->bytes);
    EXPECT_EQ(s.bytes, static_cast<double>(s.count * per_run));
    EXPECT_GT(s.gb_per_s(), 0);
  }
  EXPECT_TRUE(found);

  const MemcpyBandwidth& m = memcpy_bandwidth();
  EXPECT_GT(m.bytes_per_s, 1e8);  // any machine copies more than 100 MB/s
  EXPECT_GE(m.threads, 1);
  EXPECT_GE(m.buffer_bytes, uint64_t{64} << 20);
  const std::string summary = format_profile_summary(r.trace);
  EXPECT_NE(summary.find(fmt::format("memcpy bandwidth {:.2f} GB/s", m.bytes_per_s * 1e-9)),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("GB/s memcpy %"), std::string::npos) << summary;
  // A kernel's row ends with its GB/s and share of memcpy's, numbers; an
  // event without bytes (the run) with dashes.
  for (const auto& [name, plan] : r.plan_of) {
    const size_t row = summary.find("\n" + name + " ");
    ASSERT_NE(row, std::string::npos) << name << "\n" << summary;
    const std::string line = summary.substr(row + 1, summary.find('\n', row + 1) - row - 1);
    EXPECT_EQ(line.find(" - "), std::string::npos) << line;
    EXPECT_NE(line.back(), '-') << line;
  }
  const size_t run = summary.find("\nPyRT_RUN ");
  ASSERT_NE(run, std::string::npos) << summary;
  EXPECT_EQ(summary[summary.find('\n', run + 1) - 1], '-') << summary;
}

}  // namespace
}  // namespace samba::runtime
