#include "engine/runtime/prepacked_weights.h"

#include <oneapi/tbb/task_arena.h>

#include <cstdlib>
#include <string_view>

#include "engine/core/isa.h"
#include "engine/core/log.h"
#include "engine/core/parallel.h"
#include "engine/ops/registry.h"
#include "engine/profile/profile_events.h"
#include "engine/profile/profiler.h"
#include "engine/runtime/tbb_handover.h"

namespace samba::runtime {

bool prepack_enabled_by_environment() {
  const char* env = std::getenv("SAMBA_PREPACK");
  if (!env) return true;
  const std::string_view v(env);
  if (v == "1" || v == "on") return true;
  if (v == "0" || v == "off") return false;
  log::warn("SAMBA_PREPACK='{}' is not one of 1, on, 0, off; weights are pre-packed", v);
  return true;
}

namespace {

// The operand a step multiplies by, as the product reads it: linear's
// weight (input 1, transposed) or matmul's second operand.
struct ProductB {
  int32_t tensor = -1;
  bool trans = false;
};

ProductB product_b(const OpStep& s) {
  if (s.inputs.size() < 2 || s.outputs.empty()) return {};
  if (s.op->name == "linear") return {s.inputs[1], true};
  if (s.op->name == "matmul") return {s.inputs[1], false};
  return {};
}

// Whether any kernel writes a byte of state tensor t (so a packed copy
// could go stale during a run).
bool written_by_kernels(const Program& program, int32_t t) {
  const pef::ProgramDesc& d = program.desc();
  const pef::TensorDesc& w = d.tensors[static_cast<size_t>(t)];
  for (const pef::KernelDesc& k : d.kernels)
    for (int32_t o : k.writes) {
      const pef::TensorDesc& r = d.tensors[static_cast<size_t>(program.root(o))];
      if (r.mem == w.mem && !pef::in_activation_area(r.role) &&
          r.arena_offset < w.arena_offset + w.nbytes && w.arena_offset < r.arena_offset + r.nbytes)
        return true;
    }
  return false;
}

// Tensor t of the state area as the execution contexts view it (an alias
// as its view of its base's bytes), so the packed copy's source is the
// address the product is given.
Tensor state_view(const pef::ProgramDesc& d, const DeviceMemory& state, int32_t t) {
  const pef::TensorDesc& td = d.tensors[static_cast<size_t>(t)];
  if (td.role != pef::TensorRole::Alias) return device_view(state, td);
  const Tensor base = device_view(state, d.tensors[static_cast<size_t>(td.alias_of)]);
  return base.as_strided(td.shape, td.strides, base.offset() + td.view_offset);
}

constexpr size_t kAlign = 64;  // the packed kernel's aligned loads

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Whether a kernel other than `except` writes tensor t or a view of it.
bool written_by_other_kernels(const Program& program, int32_t t, size_t except) {
  const auto& kernels = program.desc().kernels;
  for (size_t k = 0; k < kernels.size(); ++k)
    if (k != except)
      for (int32_t o : kernels[k].writes)
        if (program.root(o) == t) return true;
  return false;
}

}  // namespace

void PrepackedWeights::plan_casts(const Program& program, const DeviceMemory& state) {
  const pef::ProgramDesc& d = program.desc();
  const auto& kernels = program.kernels();
  cast_kernel_.assign(kernels.size(), false);
  std::vector<size_t> offsets;
  size_t total = 0;
  for (size_t k = 0; k < kernels.size(); ++k) {
    const KernelPlan& plan = kernels[k];
    // A kernel of the cast alone: skipping it skips nothing else.
    if (plan.steps.size() != 1 || plan.fused || plan.writes_state) continue;
    const OpStep& s = plan.steps[0];
    if (s.op->name != "cast" || s.inputs.size() != 1 || s.inputs[0] < 0 || s.outputs.size() != 1 ||
        !s.bound.empty())
      continue;
    const int32_t in = s.inputs[0], out = s.outputs[0];
    const int32_t in_root = program.root(in);
    const pef::TensorDesc& od = d.tensors[static_cast<size_t>(out)];
    if (pef::in_activation_area(d.tensors[static_cast<size_t>(in_root)].role) ||
        written_by_kernels(program, in_root) || od.role != pef::TensorRole::Intermediate ||
        written_by_other_kernels(program, out, k))
      continue;
    Cast c;
    c.step = &s;
    c.tensor = out;
    c.source = state_view(d, state, in);
    offsets.push_back(total);
    total += aligned(od.nbytes);
    cast_kernel_[k] = true;
    casts_.push_back(std::move(c));
  }
  if (casts_.empty()) return;
  cast_arena_ = DeviceArena(total);
  for (size_t c = 0; c < casts_.size(); ++c) {
    const pef::TensorDesc& od = d.tensors[static_cast<size_t>(casts_[c].tensor)];
    casts_[c].result = cast_arena_.data() + offsets[c];
    casts_[c].result_view = Tensor::view_of(Storage::borrow(casts_[c].result, od.nbytes), od.dtype,
                                            od.shape, contiguous_strides(od.shape), 0);
  }
}

PrepackedWeights::PrepackedWeights(const Program& program, const DeviceMemory& state) {
  plan_casts(program, state);
  const pef::ProgramDesc& d = program.desc();
  const auto& kernels = program.kernels();
  entry_of_step_.resize(kernels.size());
  std::vector<size_t> offsets;
  size_t total = 0;
  for (size_t k = 0; k < kernels.size(); ++k) {
    entry_of_step_[k].assign(kernels[k].steps.size(), -1);
    for (size_t i = 0; i < kernels[k].steps.size(); ++i) {
      const OpStep& s = kernels[k].steps[i];
      const ProductB b = product_b(s);
      if (b.tensor < 0) continue;
      int32_t& entry = entry_of_step_[k][i];
      for (size_t e = 0; e < entries_.size(); ++e)
        if (entries_[e].tensor == b.tensor && entries_[e].trans_b == b.trans) entry = static_cast<int32_t>(e);
      // Packed for another step: a tile of this one that takes the packed
      // kernel reads it, the others read the weight in place.
      if (entry >= 0) continue;
      const pef::TensorDesc& td = d.tensors[static_cast<size_t>(b.tensor)];
      const int32_t root = program.root(b.tensor);
      if (pef::in_activation_area(d.tensors[static_cast<size_t>(root)].role) ||
          td.dtype != DType::Float32 || td.shape.size() != 2 || written_by_kernels(program, root))
        continue;
      const std::optional<ops::GemmOperand<float>> op =
          ops::product_operand_b(state_view(d, state, b.tensor), b.trans);
      if (!op) continue;
      const int64_t n = b.trans ? td.shape[0] : td.shape[1], depth = b.trans ? td.shape[1] : td.shape[0];
      const pef::TensorDesc& out = d.tensors[static_cast<size_t>(s.outputs[0])];
      const int64_t m = n > 0 ? numel_of(out.shape) / n : 0;
      if (!ops::gemm_packs_b(m, n, depth, false, op->trans)) continue;
      Entry e;
      e.tensor = b.tensor;
      e.trans_b = b.trans;
      e.packed.source = op->data;
      e.packed.k = depth;
      e.packed.n = n;
      e.packed.layout = *op;
      offsets.push_back(total);
      total += aligned(ops::prepacked_b_floats(depth, n) * sizeof(float));
      entry = static_cast<int32_t>(entries_.size());
      entries_.push_back(e);
    }
  }
  if (entries_.empty()) return;
  arena_ = DeviceArena(total);
  for (size_t e = 0; e < entries_.size(); ++e) {
    entries_[e].buffer = reinterpret_cast<float*>(arena_.data() + offsets[e]);
    entries_[e].packed.data = entries_[e].buffer;
  }
}

const ops::PackedOperand* PrepackedWeights::find(size_t kernel, size_t step) const {
  if (kernel >= entry_of_step_.size() || step >= entry_of_step_[kernel].size()) return nullptr;
  const int32_t e = entry_of_step_[kernel][step];
  return e < 0 ? nullptr : &entries_[static_cast<size_t>(e)].packed;
}

std::byte* PrepackedWeights::cast_result(int32_t t) const {
  for (const Cast& c : casts_)
    if (c.tensor == t) return c.result;
  return nullptr;
}

void PrepackedWeights::refresh(Profiler* profiler) {
  if (!stale_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(pack_mu_);
  if (!stale_.load(std::memory_order_acquire)) return;
  const int64_t start = Profiler::now_ns();
  // Isolated: while it waits for the packing tasks, this thread (which
  // holds pack_mu_) must not pick up another run's body from the arena,
  // which would wait for pack_mu_ on the same thread.
  tbb::this_task_arena::isolate([&] {
    parallel_for(static_cast<int64_t>(entries_.size()), 1, [&](int64_t e0, int64_t e1) {
      for (int64_t e = e0; e < e1; ++e) {
        const Entry& en = entries_[static_cast<size_t>(e)];
        ops::prepack_b(en.packed.layout, en.packed.k, en.packed.n, en.buffer);
      }
      handed_over(this);
    });
    // The cast kernel itself (each parallel inside), so the cached values
    // are the ones a run would compute.
    for (const Cast& c : casts_) {
      Tensor result[] = {c.result_view};
      const Tensor source[] = {c.source};
      KernelContext kc{*c.step->op, source, result, c.step->attrs};
      c.step->op->kernel(kc);
    }
  });
  taken_over(this);
  packs_.fetch_add(1, std::memory_order_relaxed);
  stale_.store(false, std::memory_order_release);
  if (profiler) {
    const ProfileArg packed[] = {
        ProfileArg::integer(profile_events::kArgBytes, static_cast<int64_t>(bytes()))};
    profiler->record_complete(ProfileCategory::Runtime, profile_events::kPrepackWeights, start,
                              Profiler::now_ns(), packed);
  }
}

std::unique_ptr<PrepackedWeights> prepack_at_load(const Program& program, const DeviceMemory& state,
                                                  ThreadPool& pool) {
  if (!prepack_enabled_by_environment()) return nullptr;
  // Which products pack depends on how the session's pool tiles them.
  ThreadPool::Scope pool_scope(&pool);
  auto p = std::make_unique<PrepackedWeights>(program, state);
  if (p->empty()) return nullptr;
  log::info("PEF '{}': {} weights pre-packed for the {} GEMM kernels and {} casts of weights computed "
            "at load, {} bytes",
            program.desc().name, p->weights(), isa_name(active_isa()), p->casts(), p->bytes());
  return p;
}

}  // namespace samba::runtime
