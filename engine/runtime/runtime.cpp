#include "engine/runtime/runtime.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <cctype>
#include <cstring>
#include <exception>
#include <optional>

#include "engine/core/error.h"
#include "engine/memory/staged_copy.h"
#include "engine/ops/autograd.h"
#include "engine/profile/profile_events.h"
#include "engine/profile/profiler.h"
#include "engine/runtime/data_parallel.h"
#include "engine/runtime/pipeline.h"
#include "engine/runtime/tbb_handover.h"

namespace samba::runtime {

struct Runtime::ContextLease {
  Runtime* rt = nullptr;
  ExecutionContext* ctx = nullptr;
  bool primary = false;
  std::unique_lock<std::mutex> primary_lock;
  ContextLease() = default;
  ContextLease(ContextLease&&) = default;
  ~ContextLease() {
    if (ctx && !primary) rt->release(ctx);
  }
};

Runtime::Runtime(pef::ProgramDesc program, ThreadPool& pool, Profiler* profiler)
    : program_(std::make_shared<Program>(std::move(program))),
      pool_(pool),
      profiler_(profiler),
      state_(program_->desc().memory.arena_bytes) {
  state_.fence_to_plan(program_->desc(), /*activation=*/false);
  for (const auto& a : program_->desc().argins) argins_.push_back(a.default_value);
  for (const auto& k : program_->kernels())
    kernel_names_.push_back(profiler_ ? profiler_->intern(k.name) : std::string_view());
  for (const auto& k : program_->kernels())
    kernel_names_.push_back(profiler_ && !k.pair_name.empty() ? profiler_->intern(k.pair_name)
                                                               : std::string_view());
  for (const auto& s : program_->sections())
    section_names_.push_back(profiler_ ? profiler_->intern(s.name) : std::string_view());
  for (const auto& u : program_->units())
    unit_names_.push_back(profiler_ ? profiler_->intern(u.name) : std::string_view());
  initialize_state();
  // The blobs' values now live on the device. The Program was created
  // non-const just above and is not shared yet.
  std::const_pointer_cast<Program>(program_)->release_blobs();
#ifdef __GLIBC__
  // Blobs below glibc's mmap threshold were heap memory: hand the freed
  // pages back to the system, or they stay resident beside the arenas.
  malloc_trim(0);
#endif
  build_name_lists();
  prepacked_ = prepack_at_load(*program_, state_, pool_);
  primary_ = std::make_unique<ExecutionContext>(program_, state_, nullptr, prepacked_.get());
}

std::unique_lock<std::shared_mutex> Runtime::lock_state_for_writing() {
  std::unique_lock<std::shared_mutex> unique(state_mu_);
  if (prepacked_) prepacked_->invalidate();
  return unique;
}

void Runtime::build_name_lists() {
  const auto& d = program_->desc();
  auto& types = names_[static_cast<size_t>(NameList::SectionTypes)];
  for (const auto& c : d.schedule) {
    std::string t(pef::section_type_name(d.sections[static_cast<size_t>(c.section)].type));
    if (std::find(types.begin(), types.end(), t) == types.end()) types.push_back(std::move(t));
  }
  for (const auto& t : d.tensors)
    if (t.role == pef::TensorRole::Parameter) names_[static_cast<size_t>(NameList::Weights)].push_back(t.name);
  for (const auto& a : d.argins) {
    names_[static_cast<size_t>(NameList::Argins)].push_back(a.name);
    if (a.kind == pef::ArginKind::DropoutRate) names_[static_cast<size_t>(NameList::DropoutRateArgins)].push_back(a.name);
    if (a.kind == pef::ArginKind::DropoutSeed) names_[static_cast<size_t>(NameList::DropoutSeedArgins)].push_back(a.name);
  }
  for (const auto& g : d.graphs) {
    for (int32_t o : g.outputs) names_[static_cast<size_t>(NameList::Outputs)].push_back(d.tensors[static_cast<size_t>(o)].name);
    for (int32_t i : g.inputs) names_[static_cast<size_t>(NameList::Inputs)].push_back(d.tensors[static_cast<size_t>(i)].name);
  }
}

Runtime::~Runtime() = default;

void Runtime::initialize_state() { write_initial_values(program_->desc(), state_); }

namespace {

// Host-to-device copy of `host` into `dst`: through pinned staging blocks
// when `staged` and the host memory is pageable, directly otherwise (a
// fast_access tensor lives in pinned memory already; conversions and
// strided layouts are element copies).
void copy_to_device(const Tensor& dst, const Tensor& host, bool staged) {
  const bool plain = host.dtype() == dst.dtype() && host.shape() == dst.shape() && host.is_contiguous() &&
                     dst.is_contiguous() && host.has_data() && host.impl()->storage->kind() != MemoryKind::Pinned;
  if (staged && plain && !host.impl()->fast_access && host.nbytes() > 0) {
    staged_copy(dst.raw_data(), host.raw_data(), host.nbytes());
    return;
  }
  dst.copy_from(host);
}

}  // namespace

int32_t Runtime::tensor_index(std::string_view name, const char* what) const {
  const int32_t t = program_->find_tensor(name);
  if (t >= 0) return t;
  fail(Status::NotFound, "{}: the PEF '{}' has no tensor named '{}'", what, program_->desc().name, name);
}

Runtime::ContextLease Runtime::lease(bool exclusive) {
  ContextLease l;
  l.rt = this;
  if (exclusive) {
    l.primary_lock = std::unique_lock<std::mutex>(primary_mu_);
  } else {
    l.primary_lock = std::unique_lock<std::mutex>(primary_mu_, std::try_to_lock);
  }
  if (l.primary_lock.owns_lock()) {
    l.ctx = primary_.get();
    l.primary = true;
    return l;
  }
  {
    std::lock_guard<std::mutex> lock(spare_mu_);
    if (!spares_.empty()) {
      l.ctx = spares_.back().release();
      spares_.pop_back();
      return l;
    }
  }
  l.ctx = new ExecutionContext(program_, state_, nullptr, prepacked_.get());
  return l;
}

void Runtime::release(ExecutionContext* ctx) {
  std::lock_guard<std::mutex> lock(spare_mu_);
  spares_.emplace_back(ctx);
}

// The graph a run is restricted to: the named one, -1 for none. A PEF of
// several graphs runs one graph's schedule per run; running every graph's
// sections at once would train while evaluating.
int32_t Runtime::graph_of_run(const RunRequest& r) const {
  const auto& d = program_->desc();
  std::vector<std::string> names;
  for (size_t g = 0; g < d.graphs.size(); ++g) {
    if (d.graphs[g].name == r.graph_name) return static_cast<int32_t>(g);
    names.push_back(d.graphs[g].name);
  }
  SAMBA_CHECK(r.graph_name.empty(), Status::NotFound, "run: the PEF '{}' has no graph '{}'; its graphs are: {}",
              d.name, r.graph_name, fmt::join(names, ", "));
  const bool calls_named = !r.section_ids.empty() || r.from_call >= 0 || r.until_call >= 0;
  SAMBA_CHECK(d.graphs.size() <= 1 || calls_named, Status::InvalidArgument,
              "run: the PEF '{}' holds the graphs {}; name the one to run (graph_name), or give section ids "
              "or a call range",
              d.name, fmt::join(names, ", "));
  return -1;
}

// Without gradient accumulation backward overwrites the gradients, whatever
// sections the caller names. A micro-batched graph accumulates its
// micro-batches' gradients and so has a ZEROGRAD section: a selection that
// runs BCKWD without it gets it first, before the graph's first call.
std::vector<int32_t> Runtime::with_gradients_cleared(std::vector<int32_t> calls) const {
  const auto& d = program_->desc();
  const auto type_of = [&](int32_t c) { return d.sections[static_cast<size_t>(d.schedule[c].section)].type; };
  const auto graph_of = [&](int32_t c) { return program_->sections()[static_cast<size_t>(d.schedule[c].section)].graph; };
  for (size_t g = 0; g < d.graphs.size(); ++g) {
    const auto mine = [&](int32_t c) { return graph_of(c) == static_cast<int32_t>(g); };
    const auto runs = [&](pef::SectionType t) {
      return std::any_of(calls.begin(), calls.end(), [&](int32_t c) { return mine(c) && type_of(c) == t; });
    };
    if (d.graphs[g].grad_accumulation || !runs(pef::SectionType::BCKWD) || runs(pef::SectionType::ZEROGRAD))
      continue;
    std::vector<int32_t> zero;
    for (const auto& c : d.schedule)
      if (mine(c.id) && type_of(c.id) == pef::SectionType::ZEROGRAD) zero.push_back(c.id);
    calls.insert(std::find_if(calls.begin(), calls.end(), mine), zero.begin(), zero.end());
  }
  return calls;
}

std::vector<int32_t> Runtime::select_calls(const RunRequest& r) const {
  return with_gradients_cleared(select_named_calls(r));
}

std::vector<int32_t> Runtime::select_named_calls(const RunRequest& r) const {
  const auto& d = program_->desc();
  SAMBA_CHECK(r.section_types.empty() || r.section_ids.empty(), Status::InvalidArgument,
              "run: give section_types or section_ids, not both");
  const int32_t graph = graph_of_run(r);
  const auto in_graph = [&](int32_t section) {
    return graph < 0 || program_->sections()[static_cast<size_t>(section)].graph == graph;
  };
  std::vector<int32_t> calls;
  if (!r.section_types.empty()) {
    for (const std::string& name : r.section_types) {
      const pef::SectionType type = pef::section_type_from_name(name);
      bool any = false;
      for (const auto& c : d.schedule)
        if (d.sections[static_cast<size_t>(c.section)].type == type && in_graph(c.section))
          calls.push_back(c.id), any = true;
      SAMBA_CHECK(any, Status::NotFound, "run: the PEF '{}' has no {} section{}", d.name,
                  pef::section_type_name(type), graph < 0 ? "" : fmt::format(" in graph '{}'", r.graph_name));
    }
    return calls;
  }
  if (!r.section_ids.empty()) {
    for (int32_t id : r.section_ids) {
      bool any = false;
      for (const auto& c : d.schedule)
        if (d.sections[static_cast<size_t>(c.section)].id == id && in_graph(c.section)) calls.push_back(c.id), any = true;
      if (!any) {
        std::vector<int32_t> ids;
        for (const auto& sd : d.sections) ids.push_back(sd.id);
        fail(Status::NotFound, "run: the PEF '{}' has no section with id {} (its section ids: [{}])", d.name, id,
             fmt::join(ids, ", "));
      }
    }
    return calls;
  }
  const int64_t n = static_cast<int64_t>(d.schedule.size());
  const int64_t from = r.from_call < 0 ? 0 : r.from_call;
  const int64_t until = r.until_call < 0 ? n : r.until_call;
  SAMBA_CHECK(from <= n && until <= n && from <= until, Status::OutOfRange,
              "run: call range [{}, {}) is not within the schedule's call ids 0..{}", r.from_call,
              r.until_call, n);
  for (int64_t c = from; c < until; ++c)
    if (in_graph(d.schedule[static_cast<size_t>(c)].section)) calls.push_back(static_cast<int32_t>(c));
  return calls;
}

void Runtime::check_inputs(ExecutionContext& ctx, const RunRequest& r, bool primary) const {
  for (const Tensor& host : r.inputs) {
    SAMBA_CHECK(host.defined(), Status::NullPointer, "run: an input tensor is NULL");
    const int32_t t = tensor_index(host.name(), "run: input");
    const auto& td = program_->desc().tensors[static_cast<size_t>(t)];
    const Tensor& dst = ctx.full_tensor(t);
    SAMBA_CHECK(host.has_data(), Status::InvalidState, "run: input '{}' has no data", host.name());
    SAMBA_CHECK(host.shape() == dst.shape(), Status::ShapeMismatch,
                "run: input '{}' has shape {}; the PEF expects {}", host.name(), dims_str(host.shape()),
                dims_str(dst.shape()));
    SAMBA_CHECK(host.dtype() == dst.dtype(), Status::DTypeMismatch, "run: input '{}' has dtype {}; the PEF expects {}",
                host.name(), dtype_name(host.dtype()), dtype_name(dst.dtype()));
    SAMBA_CHECK(td.role != pef::TensorRole::Alias, Status::InvalidArgument,
                "run: '{}' is a view inside the program and cannot be set", host.name());
    SAMBA_CHECK(pef::in_activation_area(td.role) || primary, Status::Internal,
                "run: state tensor '{}' set outside the primary context", host.name());
  }
}

void Runtime::bind_inputs(ExecutionContext& ctx, const RunRequest& r, bool primary,
                          const std::vector<int32_t>& graphs_run) {
  const bool staged = staged_transfers();
  // Inputs already in pinned memory (fast access) are copied under their own
  // profile event, the others (staged or not) under the plain one.
  for (const bool pinned : {true, false}) {
    std::optional<ProfileScope> scope;
    for (const Tensor& host : r.inputs) {
      const bool in_pinned = host.has_data() && host.impl()->storage->kind() == MemoryKind::Pinned;
      if (in_pinned != pinned) continue;
      if (profiler_ && !scope)
        scope.emplace(*profiler_, pinned ? profile_events::kSetPinnedInputTensors : profile_events::kSetTensors,
                      ProfileCategory::Runtime);
      copy_to_device(ctx.full_tensor(program_->find_tensor(host.name())), host, staged);
    }
  }
  if (primary) return;
  // Another context than the primary: inputs the run does not give take the
  // values they have in the primary context, as if the run had used it.
  const auto& d = program_->desc();
  for (int32_t g : graphs_run)
    for (int32_t t : d.graphs[static_cast<size_t>(g)].inputs) {
      bool given = false;
      for (const Tensor& host : r.inputs) given |= host.name() == d.tensors[static_cast<size_t>(t)].name;
      if (given) continue;
      std::lock_guard<std::mutex> lock(primary_mu_);
      ctx.full_tensor(t).copy_from(primary_->full_tensor(t));
    }
}

void Runtime::run_section_profiled(ExecutionContext& ctx, int32_t s, const RunValues& values, int64_t micro_batch) {
  const SectionPlan& sp = program_->sections()[static_cast<size_t>(s)];
  std::optional<ProfileScope> scope;
  if (profiler_ && profiler_->enabled(ProfileCategory::Section)) {
    scope.emplace(*profiler_, section_names_[static_cast<size_t>(s)], ProfileCategory::Section);
    scope->arg(profile_events::kArgSectionId, int64_t{sp.id});
    if (micro_batch >= 0) scope->arg(profile_events::kArgMicroBatch, micro_batch);
  }
  ctx.run_section(s, values);
}

void Runtime::run_micro_batches(ExecutionContext& ctx, const std::vector<int32_t>& sections, int64_t micro,
                                const RunValues& values) {
  const auto& d = program_->desc();
  const auto& g = d.graphs[static_cast<size_t>(program_->sections()[static_cast<size_t>(sections[0])].graph)];
  // Outputs reduced over a micro-batch (losses) are averaged over them.
  std::vector<int32_t> averaged;
  for (int32_t o : g.outputs)
    if (!ctx.is_batch_split(o) && pef::in_activation_area(d.tensors[static_cast<size_t>(o)].role)) averaged.push_back(o);
  std::vector<Tensor> sums;
  for (int32_t o : averaged) sums.push_back(Tensor::zeros(d.tensors[static_cast<size_t>(o)].shape, DType::Float64));
  auto collect = [&](int64_t, ExecutionContext& slot) {
    for (size_t k = 0; k < averaged.size(); ++k) {
      const Tensor v = slot.tensor(averaged[k]).to(DType::Float64);
      double* acc = sums[k].data<double>();
      const double* x = v.data<double>();
      for (int64_t e = 0; e < v.numel(); ++e) acc[e] += x[e];
    }
  };
  const int slots = static_cast<int>(std::min<int64_t>(micro, kPipelineSlots));
  if (pool_.threads() > 1 && slots > 1) {
    pipeline_for(ctx, sections, micro, slots).run(values, collect);
  } else {
    for (int64_t k = 0; k < micro; ++k) {
      ctx.select_micro_batch(static_cast<int32_t>(k));
      RunValues v = values;
      v.rng_step = values.rng_step * micro + k;
      for (int32_t s : sections) run_section_profiled(ctx, s, v, k);
      collect(k, ctx);
    }
  }
  ctx.select_micro_batch(0);
  for (size_t k = 0; k < averaged.size(); ++k) {
    const Tensor mean = call1("div", {sums[k], Tensor::scalar(static_cast<double>(micro), DType::Float64)});
    ctx.tensor(averaged[k]).copy_from(mean);
  }
}

void Runtime::run_calls(ExecutionContext& ctx, const std::vector<int32_t>& calls,
                        const RunRequest& r, DataParallelStep* dp) {
  const auto& d = program_->desc();
  const auto& sections = program_->sections();
  bool has_fwd = false;
  for (int32_t c : calls) has_fwd |= sections[static_cast<size_t>(d.schedule[c].section)].type == pef::SectionType::FWD;
  RunValues values;
  values.argins = &ctx.argin_values();
  values.profiler = profiler_;
  values.kernel_names = &kernel_names_;
  values.train = r.train;
  // A run with a forward pass is a new step (new dropout masks); a backward
  // without one reuses the masks of the last forward.
  values.rng_step = has_fwd ? step_.fetch_add(1) + 1 : step_.load();
  // A run that fails gives its step back, unless another run has taken one
  // since, so a failed call changes nothing: the next run draws the masks
  // this one would have drawn.
  struct StepClaim {
    std::atomic<int64_t>& step;
    int64_t taken;
    bool claimed;
    int uncaught = std::uncaught_exceptions();
    ~StepClaim() {
      if (claimed && std::uncaught_exceptions() > uncaught) step.compare_exchange_strong(taken, taken - 1);
    }
  } claim{step_, values.rng_step, has_fwd};

  if (dp) {
    // A micro-batched BCKWD runs its kernels once per micro-batch: a bucket
    // is final only when REDUCE comes, so nothing overlaps.
    bool overlap = true;
    for (int32_t c : calls) {
      const SectionPlan& sp = sections[static_cast<size_t>(d.schedule[c].section)];
      const auto& g = d.graphs[static_cast<size_t>(sp.graph)];
      overlap &= !(sp.type == pef::SectionType::BCKWD && sp.micro_batched &&
                   g.batch_size > g.micro_batch_size);
    }
    dp->begin(r.data_parallel_mode, r.reduce_on_rdu, overlap);
    values.observer = dp->observer();
  }

  // A spatial graph's whole schedule runs as one unit (a data-parallel run
  // goes section by section: REDUCE is the runtime's, not a kernel).
  if (!calls.empty() && !dp) {
    const int32_t g = sections[static_cast<size_t>(d.schedule[calls[0]].section)].graph;
    const int32_t u = program_->unit_of_graph(g);
    if (u >= 0) {
      std::vector<int32_t> full;
      for (const auto& c : d.schedule)
        if (sections[static_cast<size_t>(c.section)].graph == g) full.push_back(c.id);
      if (full == calls) {
        std::optional<ProfileScope> scope;
        if (profiler_ && profiler_->enabled(ProfileCategory::Section))
          scope.emplace(*profiler_, unit_names_[static_cast<size_t>(u)], ProfileCategory::Section);
        ctx.run_unit(u, values);
        return;
      }
    }
  }

  size_t i = 0;
  while (i < calls.size()) {
    const int32_t s0 = d.schedule[calls[i]].section;
    const SectionPlan& first = sections[static_cast<size_t>(s0)];
    // Consecutive micro-batched calls of one graph stream each micro-batch
    // through all of them before the next micro-batch starts.
    size_t j = i + 1;
    if (first.micro_batched)
      while (j < calls.size()) {
        const SectionPlan& sp = sections[static_cast<size_t>(d.schedule[calls[j]].section)];
        if (!sp.micro_batched || sp.graph != first.graph) break;
        ++j;
      }
    const auto& g = d.graphs[static_cast<size_t>(first.graph)];
    const int64_t micro = first.micro_batched ? g.batch_size / g.micro_batch_size : 1;
    std::vector<int32_t> group;
    for (size_t c = i; c < j; ++c) group.push_back(d.schedule[calls[c]].section);
    if (dp)
      for (int32_t s : group) dp->before_section(sections[static_cast<size_t>(s)].type);
    if (micro > 1) {
      RunValues v = values;
      v.observer = nullptr;
      run_micro_batches(ctx, group, micro, v);
    } else {
      for (int32_t s : group) run_section_profiled(ctx, s, values, -1);
    }
    i = j;
  }
  if (dp) dp->end();
}

std::vector<int32_t> Runtime::output_tensors(const RunRequest& r) const {
  const auto& d = program_->desc();
  std::vector<int32_t> out;
  if (!r.outputs.empty()) {
    for (const std::string& n : r.outputs) out.push_back(tensor_index(n, "run: output"));
    return out;
  }
  // The outputs of the graphs whose forward runs: only FWD computes them,
  // and a run of other sections (BCKWD, GRADNORM, OPT, ZEROGRAD, REDUCE)
  // returns nothing rather than stale values.
  std::vector<int32_t> graphs;
  for (int32_t c : select_calls(r)) {
    const SectionPlan& sp = program_->sections()[static_cast<size_t>(d.schedule[c].section)];
    if (sp.type != pef::SectionType::FWD) continue;
    if (std::find(graphs.begin(), graphs.end(), sp.graph) == graphs.end()) graphs.push_back(sp.graph);
  }
  for (int32_t g : graphs)
    for (int32_t o : d.graphs[static_cast<size_t>(g)].outputs) out.push_back(o);
  return out;
}

std::vector<Tensor> Runtime::run(const RunRequest& r, RunInfo* info) {
  autograd::NoGradGuard no_grad;
  const auto& d = program_->desc();
  const std::vector<int32_t> calls = select_calls(r);
  bool writes_state = !r.grad_of_outputs.empty() || r.data_parallel;
  std::vector<int32_t> graphs_run;
  for (int32_t c : calls) {
    const SectionPlan& sp = program_->sections()[static_cast<size_t>(d.schedule[c].section)];
    writes_state |= sp.writes_state;
    if (std::find(graphs_run.begin(), graphs_run.end(), sp.graph) == graphs_run.end()) graphs_run.push_back(sp.graph);
  }
  for (const Tensor& in : r.inputs)
    if (in.defined()) {
      const int32_t t = tensor_index(in.name(), "run: input");
      writes_state |= !pef::in_activation_area(d.tensors[static_cast<size_t>(program_->root(t))].role);
    }
  // Argins first: an unknown name fails the run before anything changes.
  std::vector<std::pair<int32_t, AttrValue>> updates;
  for (const auto& [name, v] : r.hyperparams) {
    const int32_t a = program_->find_argin(name);
    if (a < 0) {
      std::vector<std::string> names;
      for (const auto& x : d.argins) names.push_back(x.name);
      fail(Status::NotFound, "run: the PEF '{}' has no argin '{}'; its argins are: {}", d.name, name,
           names.empty() ? std::string("(none)") : fmt::format("{}", fmt::join(names, ", ")));
    }
    try {
      updates.emplace_back(a, program_->check_argin(a, v));
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("run: {}", e.what()));
    }
  }
  SAMBA_CHECK(r.grad_of_outputs.empty() || graphs_run.size() <= 1, Status::InvalidArgument,
              "run: grad_of_outputs needs the sections of a single graph");
  const int32_t gi = graphs_run.empty() ? 0 : graphs_run[0];
  SAMBA_CHECK(static_cast<size_t>(gi) < d.graphs.size(), Status::InvalidState,
              "run: the PEF '{}' has {} graphs, none to run", d.name, d.graphs.size());
  const auto& gd = d.graphs[static_cast<size_t>(gi)];
  SAMBA_CHECK(r.grad_of_outputs.size() <= gd.outputs.size(), Status::InvalidArgument,
              "run: {} gradients given for the {} outputs of graph '{}'", r.grad_of_outputs.size(), gd.outputs.size(),
              gd.name);
  const std::vector<int32_t> out_tensors = output_tensors(r);

  std::shared_lock<std::shared_mutex> shared(state_mu_, std::defer_lock);
  std::unique_lock<std::shared_mutex> unique;
  if (writes_state)
    unique = lock_state_for_writing();
  else
    shared.lock();
  ContextLease lease_ = lease(writes_state);
  ExecutionContext& ctx = *lease_.ctx;
  DataParallelStep* dp = data_parallel_step(r, calls);
  // Everything is checked before anything changes: a refused run leaves the
  // argins and the device as they were.
  check_inputs(ctx, r, lease_.primary);
  for (size_t i = 0; i < r.grad_of_outputs.size(); ++i) {
    const Tensor& g = r.grad_of_outputs[i];
    if (!g.defined()) continue;
    const int32_t og = gd.output_grads[i];
    SAMBA_CHECK(og >= 0, Status::InvalidArgument,
                "run: output {} ('{}') has no gradient in this PEF (it is not a loss output, or the PEF is "
                "for inference)",
                i, d.tensors[static_cast<size_t>(gd.outputs[i])].name);
    const Tensor& dst = ctx.full_tensor(og);
    SAMBA_CHECK(g.has_data() && g.shape() == dst.shape(), Status::ShapeMismatch,
                "run: the gradient of output {} has shape {}; the output has shape {}", i, dims_str(g.shape()),
                dims_str(dst.shape()));
  }
  // The host outputs (and the device views they are read from) are made
  // before the run changes anything: once a training run has stepped the
  // weights, returning them must not need memory, or a run that fails for
  // want of it would leave the weights stepped.
  std::vector<Tensor> outs;
  std::vector<Tensor> out_views;
  outs.reserve(out_tensors.size());
  out_views.reserve(out_tensors.size());
  for (int32_t t : out_tensors) {
    out_views.push_back(ctx.full_tensor(t));
    outs.push_back(Tensor::empty(out_views.back().shape(), out_views.back().dtype()));
    outs.back().impl()->name = d.tensors[static_cast<size_t>(t)].name;
  }
  if (info) info->calls.reserve(calls.size());
  // A run that fails while running gives back the argin values it set, as
  // it gives back its dropout step, unless set_argin or another run has
  // changed them since.
  struct ArginClaim {
    Runtime& rt;
    std::vector<std::pair<int32_t, AttrValue>> set, previous;
    int uncaught = std::uncaught_exceptions();
    ~ArginClaim() {
      if (std::uncaught_exceptions() <= uncaught) return;
      std::lock_guard<std::mutex> lock(rt.argin_mu_);
      for (size_t i = set.size(); i-- > 0;) {
        AttrValue& now = rt.argins_[static_cast<size_t>(set[i].first)];
        if (now == set[i].second) now = previous[i].second;
      }
    }
  } argin_claim{*this, std::move(updates), {}};
  {
    std::lock_guard<std::mutex> lock(argin_mu_);
    for (const auto& [a, v] : argin_claim.set) {
      argin_claim.previous.emplace_back(a, argins_[static_cast<size_t>(a)]);
      argins_[static_cast<size_t>(a)] = v;
    }
    ctx.argin_values() = argins_;
  }
  if (!r.train)
    for (size_t a = 0; a < d.argins.size(); ++a)
      if (d.argins[a].kind == pef::ArginKind::DropoutRate) ctx.argin_values()[a] = 0.0;
  bind_inputs(ctx, r, lease_.primary, graphs_run);
  for (size_t i = 0; i < r.grad_of_outputs.size(); ++i)
    if (r.grad_of_outputs[i].defined()) ctx.full_tensor(gd.output_grads[i]).copy_from(r.grad_of_outputs[i]);
  {
    std::optional<ProfileScope> scope;
    if (profiler_) scope.emplace(*profiler_, profile_events::kRun, ProfileCategory::Runtime);
    // A worker may run the body when this thread cannot join the arena. The
    // hand-over is on a static address: the body reads its captures only
    // after taking over.
    static const char arena_handover = 0;
    auto body = [&] {
      taken_over(&arena_handover);
      ThreadPool::Scope pool_scope(&pool_);
      // The inputs are bound: a state tensor among them is written by now.
      if (prepacked_) prepacked_->refresh(profiler_);
      run_calls(ctx, calls, r, dp);
      handed_over(&arena_handover);
    };
    handed_over(&arena_handover);
    pool_.arena().execute(body);
    taken_over(&arena_handover);
  }
  {
    std::optional<ProfileScope> scope;
    if (profiler_) scope.emplace(*profiler_, profile_events::kGetTensors, ProfileCategory::Runtime);
    for (size_t i = 0; i < outs.size(); ++i) outs[i].copy_from(out_views[i]);
  }
  if (info) info->calls = calls;
  return outs;
}

Tensor Runtime::read(std::string_view name, bool grad) {
  int32_t t = tensor_index(name, grad ? "sn_grad" : "sn_data");
  if (grad) {
    const auto& td = program_->desc().tensors[static_cast<size_t>(t)];
    SAMBA_CHECK(td.grad >= 0, Status::NotFound,
                "sn_grad: tensor '{}' has no gradient in this PEF (it is not a trainable parameter, or the "
                "PEF is for inference)",
                name);
    t = td.grad;
  }
  // Its bytes were never written: a value read from them would be silently
  // wrong (whatever the activation area held).
  if (const int32_t k = program_->fused_away_in(t); k >= 0)
    fail(Status::InvalidState,
         "sn_data: tensor '{}' is an intermediate of the fused kernel '{}' and is never written to "
         "device memory; compile at opt level 0 (o0) to read intermediates after a run",
         name, program_->kernels()[static_cast<size_t>(k)].name);
  std::shared_lock<std::shared_mutex> shared(state_mu_);
  std::unique_lock<std::mutex> lock(primary_mu_);
  Tensor host = primary_->full_tensor(t).clone();
  host.impl()->name = program_->desc().tensors[static_cast<size_t>(t)].name;
  return host;
}

void Runtime::write(std::string_view name, const Tensor& values, bool grad) {
  int32_t t = tensor_index(name, grad ? "sn_grad" : "sn_data");
  const auto& d = program_->desc();
  if (grad) {
    SAMBA_CHECK(d.tensors[static_cast<size_t>(t)].grad >= 0, Status::NotFound,
                "sn_grad: tensor '{}' has no gradient in this PEF", name);
    t = d.tensors[static_cast<size_t>(t)].grad;
  }
  SAMBA_CHECK(values.defined() && values.has_data(), Status::InvalidState, "sn_data: the values for '{}' have no data",
              name);
  SAMBA_CHECK(d.tensors[static_cast<size_t>(t)].role != pef::TensorRole::Alias, Status::InvalidArgument,
              "sn_data: '{}' is a view inside the program and cannot be set", name);
  std::unique_lock<std::shared_mutex> unique = lock_state_for_writing();
  std::unique_lock<std::mutex> lock(primary_mu_);
  const Tensor& dst = primary_->full_tensor(t);
  SAMBA_CHECK(values.shape() == dst.shape(), Status::ShapeMismatch, "sn_data: values of shape {} for '{}' of shape {}",
              dims_str(values.shape()), name, dims_str(dst.shape()));
  copy_to_device(dst, values, staged_transfers());
}

void Runtime::fill(std::string_view name, const std::function<void(const Tensor& dst)>& fill) {
  const int32_t t = tensor_index(name, "materialize");
  const auto& td = program_->desc().tensors[static_cast<size_t>(t)];
  SAMBA_CHECK(td.role != pef::TensorRole::Alias, Status::InvalidArgument,
              "materialize: '{}' is a view inside the program and cannot be set", name);
  std::unique_lock<std::shared_mutex> unique = lock_state_for_writing();
  std::unique_lock<std::mutex> lock(primary_mu_);
  fill(primary_->full_tensor(t));
}

size_t Runtime::materialize_state(const rng::MaterializeOptions& options) {
  const auto& d = program_->desc();
  size_t n = 0;
  for (const auto& td : d.tensors) {
    if (td.materializer < 0 || td.role == pef::TensorRole::Alias || pef::in_activation_area(td.role)) continue;
    const auto& m = d.materializers[static_cast<size_t>(td.materializer)];
    rng::MaterializeOptions o = options;
    o.sn_name = td.name;
    fill(td.name, [&](const Tensor& dst) { rng::materialize(m, dst, o); });
    ++n;
  }
  return n;
}

AttrValue Runtime::argin(std::string_view name) const {
  const int32_t a = program_->find_argin(name);
  SAMBA_CHECK(a >= 0, Status::NotFound, "the PEF '{}' has no argin '{}'", program_->desc().name, name);
  std::lock_guard<std::mutex> lock(argin_mu_);
  return argins_[static_cast<size_t>(a)];
}

void Runtime::set_argin(std::string_view name, const AttrValue& v) {
  const int32_t a = program_->find_argin(name);
  SAMBA_CHECK(a >= 0, Status::NotFound, "the PEF '{}' has no argin '{}'", program_->desc().name, name);
  AttrValue checked = program_->check_argin(a, v);
  std::lock_guard<std::mutex> lock(argin_mu_);
  argins_[static_cast<size_t>(a)] = std::move(checked);
}

}  // namespace samba::runtime
