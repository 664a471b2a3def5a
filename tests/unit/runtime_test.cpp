// The runtime: PEFs compiled from small models, written, read back and run
// on the emulated device; results compared with eager computation.
#include "engine/runtime/runtime.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "compile_test_util.h"
#include "compiler/compile.h"
#include "engine/ops/autograd.h"
#include "engine/runtime/device.h"
#include "op_test_util.h"

namespace samba::runtime {
namespace {

using compiler::GraphSpec;
using testing::named;
using testing::rand_tensor;
using testing::round_trip;
using testing::values;

// Two branches that meet: out = relu(x W1ᵀ) + sigmoid(x W2ᵀ), so the
// section's flow graph has parallel work.
struct Branches {
  Tensor w1 = named(rand_tensor({16, 8}, DType::Float32, 1), "w1", true);
  Tensor w2 = named(rand_tensor({16, 8}, DType::Float32, 2), "w2", true);
  std::vector<Tensor> forward(const Tensor& x) const {
    Tensor a = call1("relu", {call1("linear", {x, w1})});
    Tensor b = call1("sigmoid", {call1("linear", {x, w2})});
    Tensor out = call1("add", {a, b});
    return {call1("mean", {out}), out};
  }
};

GraphSpec spec_of(const Branches& m, int64_t batch, int64_t micro = 0) {
  GraphSpec s;
  s.name = "branches";
  s.inference = true;
  s.inputs = {named(rand_tensor({batch, 8}, DType::Float32, 3), "x")};
  s.batch_size = micro ? batch : 0;
  s.micro_batch_size = micro;
  s.model = [&m](std::span<const Tensor> in) { return m.forward(in[0]); };
  return s;
}

std::vector<double> eager(const Branches& m, const Tensor& x, int which) {
  autograd::NoGradGuard ng;
  return values(m.forward(x)[which]);
}

TEST(Runtime, InferenceMatchesEagerAndUsesTheFlowGraph) {
  Branches m;
  GraphSpec s = spec_of(m, 4);
  ThreadPool pool(2);
  Runtime rt(round_trip(compiler::compile_program({s}, {})), pool, nullptr);
  ASSERT_EQ(rt.program().sections().size(), 1u);
  // The two branches do not depend on each other.
  const auto& preds = rt.program().sections()[0].preds;
  bool parallel = false;
  for (size_t j = 1; j < preds.size(); ++j) parallel |= preds[j].empty() || preds[j].back() != static_cast<int32_t>(j - 1);
  EXPECT_TRUE(parallel);
  RunRequest r;
  r.inputs = {s.inputs[0]};
  auto outs = rt.run(r);
  ASSERT_EQ(outs.size(), 2u);
  const auto want = eager(m, s.inputs[0], 1);
  const auto got = values(outs[1]);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  EXPECT_NEAR(values(outs[0])[0], eager(m, s.inputs[0], 0)[0], 1e-6);
}

TEST(Runtime, ConcurrentInferenceGivesTheSingleThreadResults) {
  Branches m;
  GraphSpec s = spec_of(m, 4);
  ThreadPool pool(2);
  Runtime rt(round_trip(compiler::compile_program({s}, {})), pool, nullptr);
  constexpr int kThreads = 8, kRuns = 1000;
  // Each thread has its own input; the single-threaded answers first.
  std::vector<Tensor> inputs;
  std::vector<std::vector<double>> want;
  for (int t = 0; t < kThreads; ++t) {
    inputs.push_back(named(rand_tensor({4, 8}, DType::Float32, 100 + t), "x"));
    RunRequest r;
    r.inputs = {inputs.back()};
    want.push_back(values(rt.run(r)[1]));
  }
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      RunRequest r;
      r.inputs = {inputs[t]};
      r.outputs = {rt.program().desc().tensors[rt.program().desc().graphs[0].outputs[1]].name};
      for (int i = 0; i < kRuns; ++i)
        if (values(rt.run(r)[0]) != want[t]) ++mismatches[t];
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

TEST(Runtime, MicroBatchesStreamThroughAndOutputsAreWholeBatches) {
  Branches m;
  GraphSpec s = spec_of(m, 8, 2);
  ThreadPool pool(2);
  Runtime rt(round_trip(compiler::compile_program({s}, {})), pool, nullptr);
  EXPECT_TRUE(rt.program().sections()[0].micro_batched);
  RunRequest r;
  r.inputs = {s.inputs[0]};
  auto outs = rt.run(r);
  const auto want = eager(m, s.inputs[0], 1);
  const auto got = values(outs[1]);
  ASSERT_EQ(outs[1].shape(), (Dims{8, 16}));
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  // The scalar (a mean over each micro-batch) is averaged over them.
  EXPECT_NEAR(values(outs[0])[0], eager(m, s.inputs[0], 0)[0], 1e-6);
}

TEST(Runtime, RefusedRunsChangeNothing) {
  Branches m;
  GraphSpec s = spec_of(m, 4);
  ThreadPool pool(1);
  Runtime rt(round_trip(compiler::compile_program({s}, {})), pool, nullptr);
  RunRequest good;
  good.inputs = {s.inputs[0]};
  const auto before = values(rt.run(good)[1]);
  RunRequest bad;
  bad.inputs = {named(rand_tensor({4, 8}, DType::Float32, 50), "x"), named(rand_tensor({3}, DType::Float32), "nope")};
  EXPECT_THROW(rt.run(bad), Error);
  // The input of the refused run did not reach the device.
  RunRequest again;
  EXPECT_EQ(values(rt.run(again)[1]), before);
  RunRequest range;
  range.from_call = 2;
  EXPECT_THROW(rt.run(range), Error);
}

// A kernel that writes past the end (or before the start) of the device
// memory it was given faults at once: the arena's end lies against a guard
// page (within its 64-byte alignment), so the overrun never lands in other
// memory. A run that stays inside works as before.
TEST(DeviceArena, AccessPastEitherEndFaults) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  DeviceArena arena(100);
  ASSERT_EQ(arena.size(), 100u);
  ASSERT_EQ(reinterpret_cast<uintptr_t>(arena.data()) % 64, 0u);
  std::memset(arena.data(), 0x5a, arena.size());
  EXPECT_EQ(arena.data()[99], std::byte{0x5a});
  std::byte* volatile past_end = arena.data() + 128;
  EXPECT_DEATH(*past_end = std::byte{1}, "");
  const long page = sysconf(_SC_PAGESIZE);
  std::byte* volatile before_start = arena.data() - (page - 128) - 1;
  EXPECT_DEATH(*before_start = std::byte{1}, "");
}

}  // namespace
}  // namespace samba::runtime
