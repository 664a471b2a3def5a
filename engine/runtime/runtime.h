// Runtime: a loaded PEF on the emulated RDU. It owns the Program (shared,
// immutable), the device's state area (weights, gradients, optimizer state:
// what the model keeps between runs), and execution contexts with their own
// activation areas. run() executes sections by the schedule's rules:
//
//  - runs that write model state (BCKWD, OPT, GRADNORM, ZEROGRAD, or FWD of
//    a model with buffers it updates) hold the state exclusively and use the
//    primary context: training steps on one session are serialized;
//  - read-only runs (inference) share the state and use the primary context
//    when it is free, another context otherwise, so many threads can run
//    inference on one session at once with identical results.
//
// Thread safety: every member may be called from any thread at once.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/core/parallel.h"
#include "engine/dist/communicator.h"
#include "engine/rng/materializer.h"
#include "engine/runtime/execution_context.h"
#include "engine/runtime/prepacked_weights.h"

namespace samba::runtime {

class DataParallelStep;

// Name lists of a loaded program (values match SAMBA_NAMES_* in samba.h).
enum class NameList : int32_t {
  SectionTypes = 0,  // distinct, in schedule order
  Weights = 1,
  Argins = 2,
  DropoutRateArgins = 3,
  DropoutSeedArgins = 4,
  Outputs = 5,
  Inputs = 6,
};
inline constexpr int kNumNameLists = 7;

// When a data-parallel run all-reduces its gradient buckets
// (docs/distributed-runtime.md): after BCKWD; as soon as backward has
// written each bucket; or that, with OPT updating each bucket once reduced.
enum class DataParallelMode : uint8_t { Normal = 0, InOrder = 1, Optimal = 2 };
// "normal", "inorder", "optimal"; InvalidArgument otherwise.
DataParallelMode data_parallel_mode_from_name(std::string_view name);

struct RunRequest {
  // Host tensors to transfer before running, bound to device tensors by
  // sn_name; inputs not given keep their device values.
  std::vector<Tensor> inputs;
  // Device tensors to read back after running, by sn_name; empty means the
  // outputs of the graphs whose sections ran.
  std::vector<std::string> outputs;
  // Argin values; they persist for later runs.
  std::vector<std::pair<std::string, AttrValue>> hyperparams;
  std::vector<std::string> section_types;  // case-insensitive
  std::vector<int32_t> section_ids;
  // The graph whose schedule runs (the seed's graph_name); a PEF of several
  // graphs needs it unless section ids or a call range name the calls.
  std::string graph_name;
  int64_t from_call = -1;   // first call id run (-1: the schedule's first)
  int64_t until_call = -1;  // the call id the run stops before (-1: run to the end)
  bool train = true;        // false: dropout rates are 0 for this run
  // Per output of the graph that runs (in order; undefined entries are
  // skipped): the gradient BCKWD starts from (the grad_of_outputs pattern).
  std::vector<Tensor> grad_of_outputs;
  // Data parallel: REDUCE all-reduces the gradients over the job's ranks.
  // Off, a data-parallel PEF's REDUCE sections do nothing (one replica).
  bool data_parallel = false;
  bool reduce_on_rdu = true;  // false: staged through pinned host buffers
  DataParallelMode data_parallel_mode = DataParallelMode::Normal;
};

// How a run's sections were chosen and what happened, for the profile.
struct RunInfo {
  std::vector<int32_t> calls;  // schedule call ids run, in order
};

class Runtime {
 public:
  // Micro-batches in flight at once when a batch streams through sections.
  static constexpr int kPipelineSlots = 3;

  // Loads a verified program. `pool` (the session's thread pool) and
  // `profiler` (may be null) must outlive the runtime.
  Runtime(pef::ProgramDesc program, ThreadPool& pool, Profiler* profiler);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const Program& program() const { return *program_; }
  const std::vector<std::string>& names(NameList kind) const { return names_[static_cast<size_t>(kind)]; }

  // Runs the request; returns the requested outputs as new host tensors.
  std::vector<Tensor> run(const RunRequest& request, RunInfo* info = nullptr);
  // The tensors run(request) returns, without running.
  std::vector<int32_t> output_tensors(const RunRequest& request) const;

  // The device value of tensor `name` (or, with grad, of its gradient), as
  // a new host tensor: sn_data / sn_grad / get_tensors_by_name.
  Tensor read(std::string_view name, bool grad = false);
  // Copies `values` (converted to the tensor's dtype, same shape) into the
  // device tensor `name` or its gradient: sn_data / sn_grad setters.
  void write(std::string_view name, const Tensor& values, bool grad = false);
  // Fills the device tensor `name` in place with fill(dst): a lazy
  // parameter materialized straight into device memory, with no host copy.
  void fill(std::string_view name, const std::function<void(const Tensor& dst)>& fill);
  // Gives every state tensor whose PEF entry names a built-in materializer
  // its initial values under `options` (the stream is each tensor's name).
  // Returns how many were filled.
  size_t materialize_state(const rng::MaterializeOptions& options);

  // Pinned memory (enable_pinned_memory): host-to-device copies of host
  // tensors not marked fast_access go through page-locked staging blocks.
  void set_staged_transfers(bool on) { staged_transfers_.store(on); }
  bool staged_transfers() const { return staged_transfers_.load(); }

  // Argins: current values (defaults until run() or set_argin change them).
  AttrValue argin(std::string_view name) const;
  void set_argin(std::string_view name, const AttrValue& v);

  // Checkpoints of the device's state tensors whose roles are in `roles`
  // (a mask of 1 << pef::TensorRole): save writes them atomically; load
  // verifies the whole file and every tensor before changing any.
  void save_checkpoint(const std::string& path, uint32_t roles);
  void load_checkpoint(const std::string& path, uint32_t roles, bool strict);
  // The same tensors in the Hugging Face safetensors format
  // (engine/checkpoint/safetensors.h), "format": "pt" in the metadata so
  // transformers accepts the file.
  void save_safetensors(const std::string& path, uint32_t roles);
  LoadReport load_safetensors(const std::string& path, uint32_t roles,
                              const SafetensorsLoadOptions& options);

  // Data parallel (engine/runtime/runtime_dist.cpp). Each is a collective:
  // every rank calls it in the same order.
  // Fails naming the ranks whose program (a fingerprint of the PEF without
  // its weights) or world size differs from rank 0's.
  void check_same_program(dist::Communicator& comm);
  // Copies root's device values of the state tensors whose roles are in
  // `roles` to every rank.
  void broadcast_state(dist::Communicator& comm, uint32_t roles, int root);
  // Rank 0: per name, every rank's device value concatenated along dim 0 in
  // rank order; other ranks: undefined tensors. comm null: plain reads.
  std::vector<Tensor> gather(dist::Communicator* comm, const std::vector<std::string>& names);

  // Number of steps (FWD runs) so far; random ops draw their stream from it.
  int64_t step() const { return step_.load(); }

  // The weights packed at load for the GEMM (prepacked_weights.h); null
  // when none qualify or SAMBA_PREPACK=0.
  const PrepackedWeights* prepacked() const { return prepacked_.get(); }

 private:
  struct ContextLease;
  // Host copies of the state tensors whose roles are in `roles`.
  std::vector<CheckpointEntry> state_snapshot(uint32_t roles);
  // Runs `load` on those state tensors themselves with runs excluded, and
  // the checkpoint kinds they cover.
  void load_state(
      uint32_t roles,
      const std::function<void(std::span<const CheckpointTarget>, CheckpointKindMask)>& load);
  std::vector<int32_t> select_calls(const RunRequest& r) const;
  std::vector<int32_t> select_named_calls(const RunRequest& r) const;
  std::vector<int32_t> with_gradients_cleared(std::vector<int32_t> calls) const;
  int32_t graph_of_run(const RunRequest& r) const;
  ContextLease lease(bool exclusive);
  // The state held exclusively to change it from outside the kernels: every
  // such write takes it here, which marks the pre-packed weights stale.
  std::unique_lock<std::shared_mutex> lock_state_for_writing();
  void release(ExecutionContext* ctx);
  void initialize_state();
  void build_name_lists();
  int32_t tensor_index(std::string_view name, const char* what) const;
  void check_inputs(ExecutionContext& ctx, const RunRequest& r, bool primary) const;
  void bind_inputs(ExecutionContext& ctx, const RunRequest& r, bool primary, const std::vector<int32_t>& graphs_run);
  void run_calls(ExecutionContext& ctx, const std::vector<int32_t>& calls, const RunRequest& r,
                 DataParallelStep* dp);
  DataParallelStep* data_parallel_step(const RunRequest& r, const std::vector<int32_t>& calls);
  void run_section_profiled(ExecutionContext& ctx, int32_t s, const RunValues& values, int64_t micro_batch);
  void run_micro_batches(ExecutionContext& ctx, const std::vector<int32_t>& sections, int64_t micro,
                         const RunValues& values);

  std::shared_ptr<const Program> program_;
  ThreadPool& pool_;
  Profiler* profiler_;
  DeviceMemory state_;
  // Before the contexts, which point into it. Read-only during runs; stale
  // after any lock_state_for_writing(), re-packed by the next run.
  std::unique_ptr<PrepackedWeights> prepacked_;
  std::vector<std::string_view> kernel_names_;   // interned for the profiler
  std::vector<std::string_view> section_names_;  // interned for the profiler
  std::vector<std::string_view> unit_names_;     // interned for the profiler
  std::vector<std::string> names_[kNumNameLists];

  std::atomic<bool> staged_transfers_{false};
  // unique: a run writing state, or a write from outside the kernels
  // (through lock_state_for_writing); shared: read-only runs.
  mutable std::shared_mutex state_mu_;
  std::mutex primary_mu_;
  std::unique_ptr<ExecutionContext> primary_;
  std::mutex spare_mu_;
  std::vector<std::unique_ptr<ExecutionContext>> spares_;

  mutable std::mutex argin_mu_;
  std::vector<AttrValue> argins_;
  std::atomic<int64_t> step_{0};
  std::unique_ptr<DataParallelStep> data_parallel_;  // made by the first data-parallel run
};

}  // namespace samba::runtime
