#include "engine/runtime/execution_context.h"

#include <atomic>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <utility>

#include "engine/core/error.h"
#include "engine/profile/profile_events.h"
#include "engine/profile/profiler.h"
#include "engine/runtime/fused_elementwise.h"
#include "engine/runtime/prepacked_weights.h"
#include "engine/runtime/tbb_handover.h"

namespace samba::runtime {

namespace flow = tbb::flow;

struct ExecutionContext::SectionGraph {
  flow::graph graph;
  flow::broadcast_node<flow::continue_msg> start{graph};
  std::vector<std::unique_ptr<flow::continue_node<flow::continue_msg>>> nodes;
  bool sequential = false;  // a chain: run in order on the calling thread
  std::atomic<bool> failed{false};
  std::mutex error_mu;
  std::exception_ptr error;
};

ExecutionContext::ExecutionContext(std::shared_ptr<const Program> program, const DeviceMemory& state,
                                   const ExecutionContext* batch_owner, const PrepackedWeights* prepacked)
    : program_(std::move(program)),
      activation_(program_->desc().memory.activation_bytes),
      state_(&state),
      prepacked_(batch_owner ? batch_owner->prepacked_ : prepacked) {
  activation_.fence_to_plan(program_->desc(), /*activation=*/true);
  build_tensors(state);
  build_batch_buffers(batch_owner);
  graphs_.resize(program_->sections().size() + program_->units().size());
}

ExecutionContext::~ExecutionContext() = default;

void ExecutionContext::build_tensors(const DeviceMemory& state) {
  const auto& tensors = program_->desc().tensors;
  tensors_.resize(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    if (t.role == pef::TensorRole::Alias) continue;
    if (std::byte* cached = prepacked_ ? prepacked_->cast_result(static_cast<int32_t>(i)) : nullptr)
      tensors_[i] = Tensor::view_of(Storage::borrow(cached, t.nbytes), t.dtype, t.shape,
                                    contiguous_strides(t.shape), 0);
    else
      tensors_[i] = device_view(pef::in_activation_area(t.role) ? activation_ : state, t);
    tensors_[i].impl()->name = t.name;
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    if (t.role != pef::TensorRole::Alias) continue;
    const Tensor& base = tensors_[static_cast<size_t>(t.alias_of)];
    tensors_[i] = base.as_strided(t.shape, t.strides, base.offset() + t.view_offset);
    tensors_[i].impl()->name = t.name;
  }
  const auto& kernels = program_->kernels();
  args_.resize(kernels.size());
  for (size_t k = 0; k < kernels.size(); ++k) {
    for (const OpStep& s : kernels[k].steps) {
      StepArgs a;
      for (int32_t t : s.inputs) a.inputs.push_back(t < 0 ? Tensor() : tensors_[static_cast<size_t>(t)]);
      for (int32_t t : s.outputs) a.outputs.push_back(tensors_[static_cast<size_t>(t)]);
      a.attrs = s.attrs;
      if (prepacked_) a.packed_b = prepacked_->find(k, args_[k].size());
      args_[k].push_back(std::move(a));
    }
  }
}

namespace {

// A step's output slot pointed at the bytes a fused pass chose for it,
// restored on leaving (also when the step throws).
class OutputInPlaceOf {
 public:
  OutputInPlaceOf(Tensor& slot, const Tensor& out) : slot_(slot), own_(slot) { slot_ = out; }
  ~OutputInPlaceOf() { slot_ = std::move(own_); }
  OutputInPlaceOf(const OutputInPlaceOf&) = delete;
  OutputInPlaceOf& operator=(const OutputInPlaceOf&) = delete;

 private:
  Tensor& slot_;
  Tensor own_;
};

}  // namespace

void ExecutionContext::run_step(int32_t kernel, size_t i, const RunValues& values,
                                ops::OutputTail* tail, ops::RowsWork* rows) {
  const KernelPlan& plan = program_->kernels()[static_cast<size_t>(kernel)];
  const OpStep& s = plan.steps[i];
  StepArgs& a = args_[static_cast<size_t>(kernel)][i];
  // Run-time values replace the compiled ones in place; the variant keeps
  // its alternative, so nothing is allocated.
  for (const OpStep::Bound& b : s.bound) {
    const AttrValue& v = (*values.argins)[static_cast<size_t>(b.argin)];
    AttrValue& slot = a.attrs.value_at(b.attr);
    if (std::holds_alternative<double>(slot) && std::holds_alternative<int64_t>(v))
      slot = static_cast<double>(std::get<int64_t>(v));
    else if (std::holds_alternative<int64_t>(slot) && std::holds_alternative<double>(v))
      slot = static_cast<int64_t>(std::get<double>(v));
    else
      slot = v;
  }
  if (s.rng_offset_attr >= 0) a.attrs.value_at(static_cast<size_t>(s.rng_offset_attr)) = values.rng_step;
  if (s.training_attr >= 0) {
    const auto at = static_cast<size_t>(s.training_attr);
    a.attrs.value_at(at) = values.train && std::get<bool>(s.attrs.items()[at].second);
  }
  KernelContext kc{*s.op, a.inputs, a.outputs, a.attrs, a.packed_b, tail, rows};
  try {
    s.op->kernel(kc);
  } catch (const Error& e) {
    // The op's message alone does not say which of the program's kernels
    // failed; the user needs that to report or fix the PEF.
    throw Error(e.code(), fmt::format("kernel {} '{}' op {} '{}': {}", kernel,
                                      program_->desc().kernels[static_cast<size_t>(kernel)].name, i,
                                      s.op->name, e.what()));
  }
}

void ExecutionContext::run_steps(int32_t kernel, const RunValues& values) {
  const KernelPlan& plan = program_->kernels()[static_cast<size_t>(kernel)];
  std::vector<StepArgs>& steps = args_[static_cast<size_t>(kernel)];
  if (plan.fused && plan.fused->has_producer()) {
    // The producer runs the chain on its output blocks, writing where the
    // pass says; when this run's buffers allow no fused placement, every
    // step runs on its own below.
    Tensor& first_out = steps[0].outputs[0];
    auto produce = [&](const Tensor& out, ops::OutputTail* tail) {
      const OutputInPlaceOf swap(first_out, out);
      run_step(kernel, 0, values, tail);
    };
    // By reference: a std::function holding the lambda itself would allocate.
    if (plan.fused->run(tensors_, std::ref(produce))) return;
  }
  // A fused chain's own steps run as one pass, unless this run's buffers
  // overlap in a way the pass cannot take; then they run one by one too.
  const size_t fused_from =
      plan.fused && !plan.fused->has_producer() ? plan.fused->first_step() : plan.steps.size();
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    if (i == fused_from && plan.fused->run(tensors_)) break;
    run_step(kernel, i, values, nullptr);
  }
}

bool ExecutionContext::pairs(int32_t kernel) const {
  const KernelPlan& plan = program_->kernels()[static_cast<size_t>(kernel)];
  return plan.rows_consumer >= 0 && args_[static_cast<size_t>(kernel)][0].packed_b != nullptr;
}

namespace {

bool overlap(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && bytes_meet(a.raw_data(), a.nbytes(), b.raw_data(), b.nbytes());
}

}  // namespace

bool ExecutionContext::run_pair(int32_t kernel, const RunValues& values) {
  const KernelPlan& plan = program_->kernels()[static_cast<size_t>(kernel)];
  const int32_t consumer = plan.rows_consumer;
  const KernelPlan& cplan = program_->kernels()[static_cast<size_t>(consumer)];
  StepArgs& product = args_[static_cast<size_t>(kernel)][0];
  std::vector<StepArgs>& csteps = args_[static_cast<size_t>(consumer)];
  const Tensor& made = product.outputs[0];
  // The consumer writes rows while other tasks of the product still read
  // its operands and write other rows of its output: everything the
  // consumer may write must lie clear of both (or be the output itself,
  // normalized in place row by row).
  for (const StepArgs& st : csteps)
    for (const Tensor& t : st.outputs) {
      for (const Tensor& in : product.inputs)
        if (overlap(t, in)) return false;
      const bool same = t.raw_data() == made.raw_data() && t.nbytes() == made.nbytes();
      if (!same && overlap(t, made)) return false;
    }
  StepArgs& lead = csteps[0];
  const OpDef& op = *cplan.steps[0].op;
  auto produce = [&](const Tensor& out, ops::OutputTail* tail) {
    Tensor outs[1] = {out};
    KernelContext kc{op, lead.inputs, std::span<Tensor>(outs, 1), lead.attrs, nullptr, tail};
    ops::RowsWork rows;
    const bool takes =
        op.rows_work(kc, rows) && rows.x == static_cast<const float*>(made.raw_data());
    run_step(kernel, 0, values, nullptr, takes ? &rows : nullptr);
    if (rows.applied) {
      if (tail) tail->applied = true;
      return;
    }
    // The product did not take the rows: the consumer's own kernel, as
    // when run apart.
    const OutputInPlaceOf swap(lead.outputs[0], out);
    run_step(consumer, 0, values, tail);
  };
  // By reference: a std::function holding the lambda itself would allocate.
  if (cplan.fused) return cplan.fused->run(tensors_, std::ref(produce));
  produce(lead.outputs[0], nullptr);
  return true;
}

void ExecutionContext::run_kernel(int32_t kernel, const RunValues& values) {
  const KernelPlan& plan = program_->kernels()[static_cast<size_t>(kernel)];
  // A cast of the weights, computed when they were last written.
  if (prepacked_ && prepacked_->computes(static_cast<size_t>(kernel))) {
    if (values.observer) {
      values.observer->before_kernel(kernel);
      values.observer->after_kernel(kernel);
    }
    return;
  }
  // An observer is told of every kernel on its own, so with one nothing
  // runs paired.
  if (!values.observer && plan.rows_producer >= 0 && pairs(plan.rows_producer))
    return;  // run by its producer, which this kernel's node waits for
  const bool pair = !values.observer && pairs(kernel);
  const size_t nk = program_->kernels().size();
  std::optional<ProfileScope> scope;
  if (values.profiler && values.profiler->enabled(ProfileCategory::Kernel)) {
    scope.emplace(*values.profiler,
                  (*values.kernel_names)[static_cast<size_t>(kernel) + (pair ? nk : 0)],
                  ProfileCategory::Kernel);
    // What a trace viewer and the summary need to tell a bandwidth-bound
    // kernel from a compute-bound one.
    scope->arg(profile_events::kArgBytes, static_cast<int64_t>(pair ? plan.pair_bytes : plan.bytes))
        .arg(profile_events::kArgFlops, pair ? plan.pair_flops : plan.flops);
  }
  if (values.observer) values.observer->before_kernel(kernel);
  if (!pair) {
    run_steps(kernel, values);
  } else if (!run_pair(kernel, values)) {
    run_steps(kernel, values);
    run_steps(plan.rows_consumer, values);
  }
  if (values.observer) values.observer->after_kernel(kernel);
}

ExecutionContext::SectionGraph& ExecutionContext::graph_of(size_t index, const SectionPlan& sp) {
  auto& slot = graphs_[index];
  if (slot) return *slot;
  auto g = std::make_unique<SectionGraph>();
  const size_t n = sp.kernels.size();
  g->sequential = true;
  for (size_t j = 1; j < n; ++j) {
    const auto& p = sp.preds[j];
    g->sequential &= !p.empty() && p.back() == static_cast<int32_t>(j - 1);
  }
  if (!g->sequential) {
    SectionGraph* raw = g.get();
    for (size_t j = 0; j < n; ++j) {
      const int32_t kernel = sp.kernels[j];
      g->nodes.push_back(std::make_unique<flow::continue_node<flow::continue_msg>>(
          g->graph, [this, raw, kernel](const flow::continue_msg&) {
            taken_over(raw);
            if (!raw->failed.load(std::memory_order_relaxed)) {
              try {
                run_kernel(kernel, *current_);
              } catch (...) {
                std::lock_guard<std::mutex> lock(raw->error_mu);
                if (!raw->error) raw->error = std::current_exception();
                raw->failed = true;
              }
            }
            handed_over(raw);
          }));
    }
    for (size_t j = 0; j < n; ++j) {
      if (sp.preds[j].empty()) flow::make_edge(g->start, *g->nodes[j]);
      for (int32_t p : sp.preds[j]) flow::make_edge(*g->nodes[static_cast<size_t>(p)], *g->nodes[j]);
    }
  }
  slot = std::move(g);
  return *slot;
}

void ExecutionContext::run_section(int32_t section, const RunValues& values) {
  run_plan(static_cast<size_t>(section), program_->sections()[static_cast<size_t>(section)], values);
}

void ExecutionContext::run_unit(int32_t u, const RunValues& values) {
  run_plan(program_->sections().size() + static_cast<size_t>(u), program_->units()[static_cast<size_t>(u)], values);
}

void ExecutionContext::run_plan(size_t index, const SectionPlan& sp, const RunValues& values) {
  SectionGraph& g = graph_of(index, sp);
  if (g.sequential) {
    for (int32_t k : sp.kernels) run_kernel(k, values);
    return;
  }
  current_ = &values;
  g.failed = false;
  g.error = nullptr;
  handed_over(&g);
  g.start.try_put(flow::continue_msg());
  g.graph.wait_for_all();
  taken_over(&g);
  current_ = nullptr;
  // The graph lets go of the error it caught, so nothing of a failed run
  // stays held until the next one.
  if (std::exception_ptr e = std::exchange(g.error, nullptr)) std::rethrow_exception(e);
}

ExecutionContext& ExecutionContext::slot(int i) {
  if (i == 0) return *this;
  if (slots_.size() < static_cast<size_t>(i)) slots_.resize(static_cast<size_t>(i));
  auto& s = slots_[static_cast<size_t>(i - 1)];
  if (!s) s = std::make_unique<ExecutionContext>(program_, *state_, this);
  return *s;
}

void ExecutionContext::build_batch_buffers(const ExecutionContext* owner) {
  const pef::ProgramDesc& d = program_->desc();
  split_of_.assign(d.tensors.size(), -1);
  uint64_t total = 0;
  std::vector<std::pair<int32_t, int64_t>> todo;  // (tensor, micro-batches)
  for (const auto& g : d.graphs) {
    if (g.micro_batch_size <= 0 || g.micro_batch_size >= g.batch_size) continue;
    const int64_t n = g.batch_size / g.micro_batch_size;
    auto consider = [&](int32_t t) {
      const auto& td = d.tensors[static_cast<size_t>(t)];
      if (td.batch_dim != 0 || td.role == pef::TensorRole::Alias || split_of_[t] >= 0) return;
      split_of_[t] = static_cast<int32_t>(todo.size());
      todo.emplace_back(t, n);
      total += (td.nbytes * static_cast<uint64_t>(n) + 63) / 64 * 64;
    };
    for (int32_t t : g.inputs) consider(t);
    for (int32_t t : g.outputs) consider(t);
    for (int32_t t : g.output_grads)
      if (t >= 0) consider(t);
  }
  if (todo.empty()) return;
  if (owner) {
    // A pipeline slot views its owner's whole-batch buffers.
    splits_ = owner->splits_;
    for (BatchSplit& sp : splits_) sp.aliases.clear();
  } else {
    batch_area_ = DeviceArena(total);
  }
  uint64_t at = 0;
  std::vector<std::pair<uint64_t, uint64_t>> extents;  // of the buffers, for the fence
  for (auto [t, n] : todo) {
    if (owner) break;
    const auto& td = d.tensors[static_cast<size_t>(t)];
    Dims full_shape = td.shape;
    full_shape[0] *= n;
    const uint64_t bytes = td.nbytes * static_cast<uint64_t>(n);
    Ref<Storage> storage = Storage::borrow(batch_area_.data() + at, bytes);
    BatchSplit sp;
    sp.root = t;
    sp.full = Tensor::view_of(storage, td.dtype, full_shape, contiguous_strides(full_shape), 0);
    sp.micro_numel = numel_of(td.shape);
    splits_.push_back(std::move(sp));
    extents.emplace_back(at, bytes);
    at += (bytes + 63) / 64 * 64;
  }
  if (!owner) batch_area_.fence_outside(extents);
  for (size_t i = 0; i < d.tensors.size(); ++i) {
    const auto& td = d.tensors[i];
    if (td.role == pef::TensorRole::Alias && split_of_[td.alias_of] >= 0)
      splits_[static_cast<size_t>(split_of_[td.alias_of])].aliases.push_back(static_cast<int32_t>(i));
  }
  select_micro_batch(0);
}

void ExecutionContext::select_micro_batch(int32_t k) {
  const auto& tensors = program_->desc().tensors;
  for (const BatchSplit& sp : splits_) {
    const int64_t base = static_cast<int64_t>(k) * sp.micro_numel;
    TensorImpl* root = tensors_[static_cast<size_t>(sp.root)].impl();
    root->storage = sp.full.impl()->storage;
    root->offset = base;
    for (int32_t a : sp.aliases) {
      TensorImpl* alias = tensors_[static_cast<size_t>(a)].impl();
      alias->storage = sp.full.impl()->storage;
      alias->offset = base + tensors[static_cast<size_t>(a)].view_offset;
    }
  }
}

const Tensor& ExecutionContext::full_tensor(int32_t t) const {
  const int32_t s = split_of_.empty() ? -1 : split_of_[static_cast<size_t>(t)];
  return s >= 0 ? splits_[static_cast<size_t>(s)].full : tensors_.at(static_cast<size_t>(t));
}

bool ExecutionContext::is_batch_split(int32_t t) const {
  return !split_of_.empty() && split_of_[static_cast<size_t>(t)] >= 0;
}

}  // namespace samba::runtime
