// Kernels take their temporaries (weights packed for a register block,
// partial sums of a parallel loop, a layer norm's row statistics) from
// per-thread scratch memory that only grows (engine/core/scratch.h), so a
// program that has run once runs again without allocating buffers. This
// executable replaces operator new (alloc_failure_injection.h) to count.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "alloc_failure_injection.h"
#include "bench/e2e_models.h"
#include "engine/core/parallel.h"
#include "engine/core/error.h"
#include "engine/core/scratch.h"
#include "engine/runtime/device.h"
#include "engine/runtime/execution_context.h"
#include "engine/runtime/program.h"

namespace samba {
namespace {

using testing::arm_allocation_failure;
using testing::disarm_allocation_failure;
using testing::set_counted_allocation_size;

// Counts the allocations of at least `bytes` made by `fn` (on any thread).
template <typename F>
int64_t allocations_of(size_t bytes, F&& fn) {
  set_counted_allocation_size(bytes);
  arm_allocation_failure(0);
  fn();
  const int64_t n = disarm_allocation_failure().allocations;
  set_counted_allocation_size(0);
  return n;
}

TEST(ScratchFrame, AFrameAtTheSameDepthReusesItsBuffersWithoutAllocating) {
  float* first = nullptr;
  {
    ScratchFrame f;
    first = f.get<float>(0, 1000);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  }
  const int64_t n = allocations_of(0, [&] {
    ScratchFrame f;
    EXPECT_EQ(f.get<float>(0, 1000), first);
    EXPECT_EQ(f.get<float>(0, 10), first);
  });
  EXPECT_EQ(n, 0);
  // A larger request grows the buffer.
  ScratchFrame f;
  float* grown = f.get<float>(0, 1 << 20);
  grown[(1 << 20) - 1] = 1.0f;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(grown) % 64, 0u);
}

TEST(ScratchFrame, NestedFramesAndSlotsHaveBuffersOfTheirOwn) {
  ScratchFrame outer;
  int32_t* a = outer.get<int32_t>(0, 256);
  int32_t* b = outer.get<int32_t>(1, 256);
  EXPECT_NE(a, b);
  {
    ScratchFrame inner;
    int32_t* c = inner.get<int32_t>(0, 256);
    EXPECT_NE(c, a);
    EXPECT_NE(c, b);
  }
  EXPECT_THROW(outer.get<float>(ScratchFrame::kSlots, 1), Error);
  EXPECT_THROW(outer.get<float>(-1, 1), Error);
}

// While the thread that opened a frame waits in parallel_for, oneTBB has it
// run tasks; frames those tasks open must not take the waiting frame's
// buffers. Every task here scribbles over its own frame's buffer.
TEST(ScratchFrame, TasksRunWhileAFrameWaitsDoNotTouchItsBuffers) {
  ThreadPool pool(2);
  pool.arena().execute([&] {
    ThreadPool::Scope scope(&pool);
    ScratchFrame frame;
    constexpr size_t kFloats = 4096;
    float* mine = frame.get<float>(0, kFloats);
    for (size_t i = 0; i < kFloats; ++i) mine[i] = static_cast<float>(i);
    parallel_for(64, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        ScratchFrame task;
        float* theirs = task.get<float>(0, kFloats);
        std::fill_n(theirs, kFloats, -1.0f);
      }
    });
    size_t intact = 0;
    for (size_t i = 0; i < kFloats; ++i) intact += mine[i] == static_cast<float>(i);
    EXPECT_EQ(intact, kFloats);
  });
}

TEST(ScratchFrame, AFailedGrowthThrowsOutOfMemoryAndKeepsTheBuffer) {
  ScratchFrame f;
  double* before = f.get<double>(0, 100);
  before[99] = 42.0;
  arm_allocation_failure(1);
  try {
    f.get<double>(0, 1 << 22);
    ADD_FAILURE() << "the growth did not fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::OutOfMemory);
    EXPECT_NE(std::string(e.what()).find("scratch"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(disarm_allocation_failure().failed);
  EXPECT_EQ(f.get<double>(0, 100), before);
  EXPECT_EQ(before[99], 42.0);
}

// What a thread keeps between calls is counted as cache (cached_blocks_held),
// which the allocation-failure tests subtract from the live blocks: a thread
// that first runs a kernel during a call grows its cache without leaking.
// Deeper than kKeptDepth, a frame keeps nothing.
TEST(ScratchFrame, WhatAThreadKeepsIsCountedAsCacheAndFreedWithIt) {
  const int64_t live0 = testing::live_allocations(), cached0 = cached_blocks_held();
  std::thread([&] {
    // (The thread's own state is one block, alive while it runs.)
    const int64_t live1 = testing::live_allocations();
    {
      ScratchFrame f;
      f.get<float>(0, 100);
      f.get<float>(1, 100);
    }
    EXPECT_EQ(cached_blocks_held() - cached0, 3);  // the level and two buffers
    EXPECT_EQ(testing::live_allocations() - live1, cached_blocks_held() - cached0);
    std::vector<std::unique_ptr<ScratchFrame>> nested;
    for (int d = 0; d < ScratchFrame::kKeptDepth + 3; ++d) {
      nested.push_back(std::make_unique<ScratchFrame>());
      nested.back()->get<float>(0, 10);
    }
    nested.clear();
    // Levels 1 to kKeptDepth - 1 are kept with their buffers; deeper ones are gone.
    EXPECT_EQ(cached_blocks_held() - cached0, 3 + 2 * (ScratchFrame::kKeptDepth - 1));
  }).join();
  EXPECT_EQ(cached_blocks_held(), cached0);
  EXPECT_EQ(testing::live_allocations(), live0);
}

// Every kernel of a compiled model, run once in order (a training step or
// an inference) on a context of its own, the way a section runs them.
struct Loaded {
  std::shared_ptr<const runtime::Program> program;
  std::unique_ptr<runtime::DeviceMemory> state;
  std::unique_ptr<runtime::ExecutionContext> ctx;
};

Loaded load(const pef::ProgramDesc& desc, const std::vector<Tensor>& inputs) {
  Loaded l;
  l.program = std::make_shared<const runtime::Program>(desc);
  l.state = std::make_unique<runtime::DeviceMemory>(desc.memory.arena_bytes);
  l.ctx = std::make_unique<runtime::ExecutionContext>(l.program, *l.state);
  runtime::write_initial_values(desc, *l.state);
  for (const pef::ArginDesc& a : desc.argins) l.ctx->argin_values().push_back(a.default_value);
  const auto& graph_inputs = desc.graphs[0].inputs;
  for (size_t i = 0; i < inputs.size(); ++i) l.ctx->tensor(graph_inputs[i]).copy_from(inputs[i]);
  return l;
}

// Per kernel of one pass over every section: the kernels that made any
// allocation of at least `bytes`, with how many when `counts`.
std::vector<std::string> allocating_kernels(Loaded& l, ThreadPool& pool, size_t bytes,
                                            bool counts = true) {
  std::vector<std::string> found;
  runtime::RunValues values;
  values.argins = &l.ctx->argin_values();
  pool.arena().execute([&] {
    ThreadPool::Scope scope(&pool);
    for (const runtime::SectionPlan& s : l.program->sections())
      for (int32_t k : s.kernels) {
        const int64_t n = allocations_of(bytes, [&] { l.ctx->run_kernel(k, values); });
        const std::string& name = l.program->kernels()[static_cast<size_t>(k)].name;
        if (n > 0) found.push_back(counts ? fmt::format("{} ({} allocations)", name, n) : name);
      }
  });
  return found;
}

// Small bookkeeping (vectors of a few dims while checking shapes) is not
// counted: buffers are what grow with the data.
constexpr size_t kBufferBytes = 256;

// On one thread the first run grows every buffer: every later run must
// allocate nothing. On two, which thread takes which task varies from run
// to run, and a thread grows its own buffers the first time it takes a task
// of a kind (which, on a busy machine, may be late): after several runs, a
// kernel fails when it allocated in each of three more, as a kernel that
// allocates on every call does, while a thread's one-time growth cannot.
void expect_no_buffers_after_the_first_run(const pef::ProgramDesc& desc,
                                           const std::vector<Tensor>& inputs) {
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    Loaded l = load(desc, inputs);
    for (int run = 0; run < (threads == 1 ? 1 : 10); ++run)
      allocating_kernels(l, pool, kBufferBytes);
    if (threads == 1) {
      for (int run = 0; run < 3; ++run)
        EXPECT_EQ(allocating_kernels(l, pool, kBufferBytes), std::vector<std::string>{})
            << "one thread";
      continue;
    }
    std::map<std::string, int> runs_allocating;
    constexpr int kRuns = 3;
    for (int run = 0; run < kRuns; ++run)
      for (const std::string& k : allocating_kernels(l, pool, kBufferBytes, false))
        ++runs_allocating[k];
    std::vector<std::string> every_run;
    for (const auto& [k, n] : runs_allocating)
      if (n == kRuns) every_run.push_back(k);
    EXPECT_EQ(every_run, std::vector<std::string>{}) << "two threads, in each of " << kRuns
                                                     << " runs";
  }
}

TEST(RunAllocations, ResFFNKernelsAllocateNoBuffersOnceRun) {
  const bench::ResFFNLogReg m(1024, 64);
  expect_no_buffers_after_the_first_run(bench::compile_to_pef(m.spec(true)), {m.image()});
  expect_no_buffers_after_the_first_run(bench::compile_to_pef(m.spec(false)),
                                        {m.image(), m.label()});
}

TEST(RunAllocations, ConvNetKernelsAllocateNoBuffersOnceRun) {
  const bench::DigitsConvNet m(256);
  expect_no_buffers_after_the_first_run(bench::compile_to_pef(m.spec(true)), {m.image()});
  expect_no_buffers_after_the_first_run(bench::compile_to_pef(m.spec(false)),
                                        {m.image(), m.label()});
}

}  // namespace
}  // namespace samba
