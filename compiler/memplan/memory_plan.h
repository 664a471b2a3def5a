// The memory plan: every value that owns bytes gets a memory type (DDR by
// default; HBM or HOST when its tensor asks; HOST for inputs and outputs with
// io_host_memory), an offset and a size in that type's arena. Persistent
// values (inputs, outputs, weights, gradients, optimizer state, buffers,
// constants) and intermediates that live across sections never overlap;
// the other intermediates share space when their lifetimes (in kernel steps
// of the schedule) do not intersect. Values of one region share one block.
// Offsets are within the value's area (pef::in_activation_area): inputs,
// outputs and intermediates in the activation area, the rest in the state
// area.
#pragma once

#include <vector>

#include "compiler/schedule/schedule.h"

namespace samba::compiler {

inline constexpr uint64_t kPlanAlignment = 64;

// Where each value of one graph lives.
struct Placement {
  std::vector<pef::MemType> mem;
  std::vector<uint64_t> offset;
  std::vector<uint64_t> nbytes;
  std::vector<bool> pinned;  // an intermediate kept alive across sections
};

struct MemoryPlan {
  std::vector<Placement> graphs;  // one per PlanInput, in order
  uint64_t arena_bytes[pef::kNumMemTypes] = {0, 0, 0};       // state area
  uint64_t activation_bytes[pef::kNumMemTypes] = {0, 0, 0};  // activation area
  uint64_t peak_bytes = 0;
  uint64_t lower_bound_bytes = 0;
  // With gradients_first: every graph's gradients (graph, value), in the
  // order backward finishes writing them, laid out in that order at the
  // start of their memory type's state area, so any run of them is one
  // contiguous range (a data-parallel REDUCE bucket).
  std::vector<std::pair<size_t, ValueId>> gradient_order;
};

struct PlanInput {
  const Graph* graph = nullptr;
  const std::vector<Kernel>* kernels = nullptr;
  const std::vector<SectionPlan>* sections = nullptr;
};

// Plans the graphs of one program together: their sections run one after the
// other in the given order, and persistent values with the same name (or
// region) in several graphs are one block.
MemoryPlan plan_memory(const std::vector<PlanInput>& graphs, bool io_host_memory,
                       bool gradients_first = false);

}  // namespace samba::compiler
