// PrepackedWeights: the weights of a loaded PEF laid out once for the GEMM's
// packed kernel, instead of packed again in every tile of every call.
//
// At load, every linear or matmul step whose B operand (linear's weight,
// read transposed; matmul's 2-D second operand; either may be a view such
// as the transpose the compiler makes of x @ W) is a float32 tensor of the
// state area that no kernel of the program writes (an inference PEF's
// weights; in a training PEF the optimizer writes them, so none qualify),
// and whose product would read a packed B at the active ISA level
// (ops::gemm_packs_b), gets a packed copy of that operand. The copies are
// shared, read-only, by every execution context of the runtime (concurrent
// runs, pipeline slots). They cost about the weights' own memory again
// (each padded to the kernel's panel width); bytes() says how much.
//
// A packed copy must never be stale: every write to the state area from
// outside the kernels (sn_data, materialization, checkpoint loads,
// broadcasts, state tensors bound as run inputs) holds the state
// exclusively and calls invalidate(); the next run re-packs before its
// kernels start (refresh()).
//
// The same holds for a cast of such a state tensor (the fp32 master weight
// a bf16 mixed-precision compile casts to bf16 before each product): its
// result depends on the state alone, so refresh() runs the cast kernel
// once into a shared buffer, every execution context binds the cast's
// output tensor to that buffer (reads of it, sn_data included, see the
// cached values) and skips the cast's kernel in its runs. The values are
// the cast kernel's own, so results are bit for bit those of casting per run.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/core/parallel.h"
#include "engine/kernels/gemm.h"
#include "engine/runtime/device.h"
#include "engine/runtime/program.h"

namespace samba {
class Profiler;
}

namespace samba::runtime {

// SAMBA_PREPACK: unset, "1" or "on" packs; "0" or "off" does not (to compare
// results and memory); any other value warns and packs.
bool prepack_enabled_by_environment();

class PrepackedWeights;

// The weights of `program` to pre-pack, planned for the products' tiling on
// `pool` and logged (count, bytes); null when none qualify or SAMBA_PREPACK
// turns pre-packing off.
std::unique_ptr<PrepackedWeights> prepack_at_load(const Program& program, const DeviceMemory& state,
                                                  ThreadPool& pool);

class PrepackedWeights {
 public:
  // Finds the operands to pack and allocates their buffers; nothing is
  // packed until refresh(). `state` must outlive this.
  PrepackedWeights(const Program& program, const DeviceMemory& state);
  PrepackedWeights(const PrepackedWeights&) = delete;
  PrepackedWeights& operator=(const PrepackedWeights&) = delete;

  bool empty() const { return entries_.empty() && casts_.empty(); }
  size_t weights() const { return entries_.size(); }  // distinct packed operands
  size_t casts() const { return casts_.size(); }      // casts computed at load
  // Memory of the packed copies and the cast results.
  size_t bytes() const { return arena_.size() + cast_arena_.size(); }
  // How many times the copies were (re)packed.
  int64_t packs() const { return packs_.load(std::memory_order_relaxed); }

  // The packed B of step `step` of kernel `kernel`, or null.
  const ops::PackedOperand* find(size_t kernel, size_t step) const;
  // Where the cached result of the cast writing tensor t lives (t's own
  // bytes for every execution context), or null.
  std::byte* cast_result(int32_t t) const;
  // Whether kernel k is a cast computed here instead of in each run.
  bool computes(size_t kernel) const { return kernel < cast_kernel_.size() && cast_kernel_[kernel]; }

  // The state changed outside the kernels: every copy is stale until the
  // next refresh(). The caller holds the state exclusively.
  void invalidate() { stale_.store(true, std::memory_order_release); }
  // Re-packs stale copies. The caller holds the state (shared or
  // exclusively), so nothing writes the weights meanwhile; concurrent
  // callers wait for the one that packs, which records it in `profiler`
  // (may be null) as kPrepackWeights with the bytes packed.
  void refresh(Profiler* profiler);

 private:
  struct Entry {
    int32_t tensor = -1;
    bool trans_b = false;
    float* buffer = nullptr;  // in arena_; packed.data points here
    ops::PackedOperand packed;
  };
  struct Cast {
    const OpStep* step = nullptr;
    int32_t tensor = -1;  // the cast's output
    Tensor source;  // the state tensor cast
    std::byte* result = nullptr;  // in cast_arena_
    Tensor result_view;           // of `result`, as the output's descriptor says
  };
  void plan_casts(const Program& program, const DeviceMemory& state);

  std::vector<Entry> entries_;
  std::vector<std::vector<int32_t>> entry_of_step_;  // per kernel, per step: index into entries_, or -1
  DeviceArena arena_;
  std::vector<Cast> casts_;
  std::vector<bool> cast_kernel_;  // per kernel
  DeviceArena cast_arena_;
  std::atomic<bool> stale_{true};
  std::atomic<int64_t> packs_{0};
  std::mutex pack_mu_;
};

}  // namespace samba::runtime
