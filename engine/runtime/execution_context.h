// ExecutionContext: what one run works on. It owns the activation area
// (inputs, outputs, intermediates) and, built once when the context is
// created, a tensor for every program tensor (state tensors view the shared
// Device's state area), the argument spans of every op step, a copy of
// every kernel's attributes for run-time argins, and one oneTBB flow graph
// per section (a continue_node per kernel, edges from the program's
// dependencies) that is reset and re-run on every call. A run therefore
// allocates nothing of its own. A context is used by one run at a time.
#pragma once

#include <oneapi/tbb/flow_graph.h>

#include <memory>
#include <vector>

#include "engine/runtime/device.h"
#include "engine/runtime/program.h"

namespace samba {
class Profiler;
}

namespace samba::runtime {

class PrepackedWeights;

// Told before and after each kernel of a run runs, on the thread that runs
// it: how a data-parallel run starts a gradient bucket's all-reduce as soon
// as backward has written it, and holds an optimizer kernel until its
// bucket is reduced. Must be thread-safe.
class KernelObserver {
 public:
  virtual void before_kernel(int32_t kernel) = 0;
  virtual void after_kernel(int32_t kernel) = 0;

 protected:
  ~KernelObserver() = default;
};

// What one run of sections needs besides its context: argin values and the
// step counter random ops draw their streams from.
struct RunValues {
  const std::vector<AttrValue>* argins = nullptr;  // one per program argin
  int64_t rng_step = 0;
  bool train = true;  // false: evaluation mode (Training-role attributes run false)
  Profiler* profiler = nullptr;                             // may be null
  // Interned, per kernel, then per kernel again: the name of the pair it
  // leads when it runs a row-wise kernel inside its product (KernelPlan::
  // pair_name; empty for others).
  const std::vector<std::string_view>* kernel_names = nullptr;
  KernelObserver* observer = nullptr;                           // may be null
};

class ExecutionContext {
 public:
  // `state` is the shared state area; it must outlive the context. A
  // pipeline slot (see slot()) passes the context whose whole-batch input
  // and output buffers it shares (and its pre-packed weights). `prepacked`
  // (may be null; must outlive the context) gives the products the weights
  // packed at load; the runtime keeps them fresh.
  ExecutionContext(std::shared_ptr<const Program> program, const DeviceMemory& state,
                   const ExecutionContext* batch_owner = nullptr,
                   const PrepackedWeights* prepacked = nullptr);
  ~ExecutionContext();
  ExecutionContext(const ExecutionContext&) = delete;
  ExecutionContext& operator=(const ExecutionContext&) = delete;

  const Program& program() const { return *program_; }
  // This context's copy of the argin values for the run in progress
  // (refreshed from the session's before each run; no allocation).
  std::vector<AttrValue>& argin_values() { return argin_values_; }
  // The device tensor of program tensor t (a view into device memory).
  const Tensor& tensor(int32_t t) const { return tensors_.at(static_cast<size_t>(t)); }

  // Runs section `s` (an index into program().sections()) on the session's
  // arena: every kernel once, in dependency order, in parallel where the
  // graph allows. The first kernel error is rethrown after the graph drains.
  void run_section(int32_t s, const RunValues& values);
  // Runs spatial unit `u` (Program::units()) as one flow graph.
  void run_unit(int32_t u, const RunValues& values);

  // Tensors of a micro-batched graph's inputs and outputs that have a batch
  // dim live in full-batch buffers; the program's tensor (traced at the
  // micro-batch size) views micro-batch k of it. Points every such tensor
  // and its aliases at micro-batch `k` (no copy, nothing allocated).
  void select_micro_batch(int32_t k);
  // The whole-batch view of tensor t (t's own view when it is not split).
  const Tensor& full_tensor(int32_t t) const;
  bool is_batch_split(int32_t t) const;

  // Runs one kernel of the program on this context.
  void run_kernel(int32_t kernel, const RunValues& values);

  // Pipeline slot i (0 is this context): a context with its own activation
  // area sharing this one's whole-batch buffers, so micro-batches can be in
  // flight in several slots at once. Created on first use.
  ExecutionContext& slot(int i);

  // Opaque per-context cache of the micro-batch pipelines built for it.
  std::shared_ptr<void>& pipeline_cache() { return pipeline_cache_; }

 private:
  struct StepArgs {
    std::vector<Tensor> inputs;
    std::vector<Tensor> outputs;
    Attrs attrs;  // the step's attributes; bound ones are patched per run
    const ops::PackedOperand* packed_b = nullptr;
  };
  struct SectionGraph;

  void build_tensors(const DeviceMemory& state);
  // Step i of a kernel with this run's values for its bound attributes,
  // given the fused chain's tail and a row-wise kernel to run on finished
  // rows (either may be null).
  void run_step(int32_t kernel, size_t i, const RunValues& values, ops::OutputTail* tail,
                ops::RowsWork* rows = nullptr);
  // A kernel's steps: fused where planned, else one by one.
  void run_steps(int32_t kernel, const RunValues& values);
  // Kernel `kernel` with its rows consumer run on the rows its product
  // finishes. False, having run nothing, when this run's buffers would let
  // the consumer write what the product still reads.
  bool run_pair(int32_t kernel, const RunValues& values);
  // Whether this context runs the kernel's rows consumer inside it: its
  // product reads B packed at load (what lets the product finish rows).
  bool pairs(int32_t kernel) const;
  // The flow graph of `plan`, cached under `slot` (sections first, then units).
  SectionGraph& graph_of(size_t slot, const SectionPlan& plan);
  void run_plan(size_t slot, const SectionPlan& plan, const RunValues& values);

  struct BatchSplit {
    int32_t root;           // the program tensor (micro-batch shape)
    Tensor full;            // the whole-batch buffer
    int64_t micro_numel;    // elements per micro-batch
    std::vector<int32_t> aliases;
  };
  void build_batch_buffers(const ExecutionContext* owner);

  std::shared_ptr<const Program> program_;
  DeviceMemory activation_;
  DeviceArena batch_area_;
  std::vector<BatchSplit> splits_;
  std::vector<int32_t> split_of_;  // per tensor: index into splits_, or -1
  std::vector<AttrValue> argin_values_;
  const DeviceMemory* state_ = nullptr;
  const PrepackedWeights* prepacked_ = nullptr;
  std::vector<std::unique_ptr<ExecutionContext>> slots_;
  std::shared_ptr<void> pipeline_cache_;
  std::vector<Tensor> tensors_;
  std::vector<std::vector<StepArgs>> args_;  // per kernel, per step
  std::vector<std::unique_ptr<SectionGraph>> graphs_;
  const RunValues* current_ = nullptr;  // the run in progress (read by graph nodes)
};

}  // namespace samba::runtime
