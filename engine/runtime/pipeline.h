// MicroBatchPipeline: streams the micro-batches of a batch through a run of
// consecutive micro-batched sections (typically FWD then BCKWD) as one
// oneTBB flow graph, with at most `slots` micro-batches in flight, each in
// its own pipeline slot (activation area). Built once per context and shape
// of run, re-run on every call. Its order guarantees:
//   - within a micro-batch, kernels follow the sections' dependencies, and a
//     section starts after the previous one ends;
//   - a kernel that writes model state (gradient accumulation, running
//     statistics) runs for micro-batch m only after it ran for m - 1, so
//     results do not depend on timing;
//   - micro-batch m + slots starts only after micro-batch m is done (they
//     share a slot); micro-batches finish in order.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "engine/runtime/execution_context.h"

namespace samba::runtime {

class MicroBatchPipeline {
 public:
  MicroBatchPipeline(ExecutionContext& ctx, std::vector<int32_t> sections, int64_t micro_batches, int slots);
  ~MicroBatchPipeline();
  MicroBatchPipeline(const MicroBatchPipeline&) = delete;
  MicroBatchPipeline& operator=(const MicroBatchPipeline&) = delete;

  // Runs every micro-batch; `finished(m, slot)` is called once per
  // micro-batch, in order, after its last kernel (to collect its outputs).
  // Micro-batch m draws random numbers from step values.rng_step * n + m.
  // The first kernel error is rethrown after the graph drains.
  void run(const RunValues& values, const std::function<void(int64_t, ExecutionContext&)>& finished);

  bool matches(const std::vector<int32_t>& sections, int64_t micro_batches, int slots) const;

 private:
  struct Graph;
  std::unique_ptr<Graph> g_;
};

// The pipeline of `ctx` for this run shape, built on first use and cached in
// the context.
MicroBatchPipeline& pipeline_for(ExecutionContext& ctx, const std::vector<int32_t>& sections,
                                 int64_t micro_batches, int slots);

}  // namespace samba::runtime
