#include "engine/runtime/program.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "engine/core/error.h"
#include "engine/runtime/fused_elementwise.h"

namespace samba::runtime {
namespace {

// A byte range of device memory: which area and memory type, and where.
struct ByteRange {
  int32_t space;  // mem type * 2 + (activation ? 1 : 0)
  uint64_t lo, hi;
};

struct Access {
  ByteRange range;
  int32_t kernel;  // local index
  bool write;
};

}  // namespace

void Program::release_blobs() {
  for (auto& b : desc_.blobs) std::vector<uint8_t>().swap(b.data);
}

Program::Program(pef::ProgramDesc desc) : desc_(std::move(desc)) {
  for (size_t i = 0; i < desc_.tensors.size(); ++i) tensor_by_name_[desc_.tensors[i].name] = static_cast<int32_t>(i);
  for (size_t i = 0; i < desc_.argins.size(); ++i) argin_by_name_[desc_.argins[i].name] = static_cast<int32_t>(i);
  argin_specs_.resize(desc_.argins.size());
  kernels_.reserve(desc_.kernels.size());
  for (const auto& kd : desc_.kernels) build_kernel(kd);
  plan_fusion();
  // A default the schema refuses would reach the kernels on the first run,
  // as set_argin would never let a user value do.
  for (size_t a = 0; a < desc_.argins.size(); ++a) {
    try {
      check_argin(static_cast<int32_t>(a), desc_.argins[a].default_value);
    } catch (const Error& e) {
      fail(Status::CorruptFile, "PEF: the default of {}", e.what());
    }
  }
  for (const auto& sd : desc_.sections) build_section(sd);
  build_units();
  pair_row_consumers();
}

int32_t Program::find_tensor(std::string_view name) const {
  auto it = tensor_by_name_.find(std::string(name));
  return it == tensor_by_name_.end() ? -1 : it->second;
}

int32_t Program::find_argin(std::string_view name) const {
  auto it = argin_by_name_.find(std::string(name));
  return it == argin_by_name_.end() ? -1 : it->second;
}

AttrValue Program::check_argin(int32_t a, const AttrValue& v) const {
  const std::string& name = desc_.argins.at(static_cast<size_t>(a)).name;
  const auto& specs = argin_specs_[static_cast<size_t>(a)];
  // Unbound argins feed no kernel; a finite number keeps them readable.
  const double* x = std::get_if<double>(&v);
  SAMBA_CHECK(!specs.empty() || std::holds_alternative<int64_t>(v) || (x && std::isfinite(*x)),
              Status::InvalidArgument, "argin '{}' takes a finite number, got {}", name,
              attr_value_str(v));
  AttrValue checked = v;
  for (const AttrSpec* spec : specs) checked = check_attr_value(*spec, v, "argin", name);
  return checked;
}

int32_t Program::root(int32_t t) const {
  const auto& td = desc_.tensors.at(static_cast<size_t>(t));
  return td.role == pef::TensorRole::Alias ? td.alias_of : t;
}

bool Program::in_activation(int32_t t) const {
  return pef::in_activation_area(desc_.tensors.at(static_cast<size_t>(root(t))).role);
}

void Program::build_kernel(const pef::KernelDesc& kd) {
  KernelPlan k;
  k.name = kd.name;
  k.fusion = kd.fusion;
  k.flops = kd.flops;
  k.bytes = kd.bytes;
  for (const auto& call : kd.ops) {
    OpStep s;
    s.op = &OpRegistry::global().get(call.op);
    s.attrs = s.op->resolve(call.attrs);
    s.inputs = call.inputs;
    s.outputs = call.outputs;
    const auto& items = s.attrs.items();
    for (const auto& b : call.bindings)
      for (size_t i = 0; i < items.size(); ++i)
        if (items[i].first == b.attr) {
          s.bound.push_back({i, b.argin});
          argin_specs_.at(static_cast<size_t>(b.argin)).push_back(s.op->find_attr(b.attr));
        }
    for (size_t i = 0; i < items.size(); ++i) {
      const AttrSpec* spec = s.op->find_attr(items[i].first);
      if (spec && spec->role == AttrRole::RngOffset) s.rng_offset_attr = static_cast<int32_t>(i);
      if (spec && spec->role == AttrRole::Training) s.training_attr = static_cast<int32_t>(i);
    }
    k.steps.push_back(std::move(s));
  }
  for (int32_t t : kd.writes) k.writes_state |= !in_activation(t);
  kernels_.push_back(std::move(k));
}

void Program::plan_fusion() {
  const size_t n = desc_.tensors.size();
  std::vector<bool> kept(n, false);
  auto keep = [&](int32_t t) {
    if (t >= 0) kept[static_cast<size_t>(root(t))] = true;
  };
  for (size_t t = 0; t < n; ++t)
    if (desc_.tensors[t].role != pef::TensorRole::Intermediate && desc_.tensors[t].role != pef::TensorRole::Alias)
      kept[t] = true;
  for (const auto& kd : desc_.kernels)
    for (int32_t t : kd.reads) keep(t);
  for (const auto& g : desc_.graphs) {
    for (int32_t t : g.inputs) keep(t);
    for (int32_t t : g.outputs) keep(t);
    for (int32_t t : g.output_grads) keep(t);
  }
  fused_away_in_.assign(n, -1);
  for (size_t i = 0; i < kernels_.size(); ++i) {
    KernelPlan& k = kernels_[i];
    // An elementwise chain, or a producer (a contraction) and the chain
    // over its output (fused_elementwise.h).
    if (k.steps.size() < 2) continue;
    k.fused = FusedElementwise::plan(*this, k.steps, kept);
    if (k.fused)
      for (int32_t t : k.fused->unstored()) fused_away_in_[static_cast<size_t>(t)] = static_cast<int32_t>(i);
  }
  // The compiler writes this same figure into the PEF, but a PEF from an
  // earlier compiler carries an estimate that counts every intermediate;
  // what a profile reports must be what these kernels, as planned, move.
  for (KernelPlan& k : kernels_) k.bytes = kernel_bytes_moved(*this, k);
}

double kernel_bytes_moved(const Program& program, const KernelPlan& k) {
  const auto& tensors = program.desc().tensors;
  auto view_bytes = [&](int32_t t) {
    const pef::TensorDesc& td = tensors[static_cast<size_t>(t)];
    uint64_t n = element_size(td.dtype);
    for (size_t d = 0; d < td.shape.size(); ++d)
      if (td.role != pef::TensorRole::Alias || d >= td.strides.size() || td.strides[d] != 0)
        n *= static_cast<uint64_t>(td.shape[d]);
    return n;
  };
  double bytes = 0;
  std::vector<int32_t> loaded, stored;  // of the current pass
  auto touch = [&](std::vector<int32_t>& seen, int32_t t, uint64_t n) {
    if (t < 0 || std::find(seen.begin(), seen.end(), t) != seen.end()) return;
    seen.push_back(t);
    bytes += static_cast<double>(n);
  };
  auto load_inputs = [&](const OpStep& s) {
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      const int32_t t = s.inputs[i];
      if (t < 0) continue;
      touch(loaded, t, view_bytes(t));
      const auto& specs = s.op->inputs;
      if (!specs.empty() && specs[std::min(i, specs.size() - 1)].mutated)
        touch(stored, t, view_bytes(t));
    }
  };
  const bool fused_producer = k.fused && k.fused->has_producer();
  const size_t on_their_own = !k.fused        ? k.steps.size()
                              : fused_producer ? 0
                                               : k.fused->first_step();
  for (size_t i = 0; i < on_their_own; ++i) {
    loaded.clear();
    stored.clear();
    load_inputs(k.steps[i]);
    for (int32_t t : k.steps[i].outputs) touch(stored, t, view_bytes(t));
  }
  if (!k.fused) return bytes;
  loaded.clear();
  stored.clear();
  for (const auto& m : k.fused->memory_touched()) touch(loaded, m.tensor, m.nbytes);
  if (fused_producer) load_inputs(k.steps[0]);
  return bytes;
}

int32_t Program::fused_away_in(int32_t t) const {
  return t >= 0 && static_cast<size_t>(t) < fused_away_in_.size() ? fused_away_in_[static_cast<size_t>(t)] : -1;
}

std::vector<std::vector<int32_t>> Program::dependencies(const std::vector<int32_t>& kernels) const {
  auto range_of = [&](int32_t t) {
    const auto& base = desc_.tensors[static_cast<size_t>(root(t))];
    const int32_t space = static_cast<int32_t>(base.mem) * 2 + (pef::in_activation_area(base.role) ? 1 : 0);
    return ByteRange{space, base.arena_offset, base.arena_offset + std::max<uint64_t>(base.nbytes, 1)};
  };
  // Earlier accesses still relevant to later kernels, one entry per byte
  // range (many kernels reading one weight share it), ordered by where the
  // range starts. A write that covers an earlier range makes its entry
  // redundant: whoever comes later and conflicts with it also conflicts
  // with the covering write, which depends on it. Each access looks only at
  // the ranges starting less than the longest range's length before it, not
  // at every earlier access: kernels reading one weight cost one entry.
  struct Kernels {
    std::vector<int32_t> readers, writers;  // local indices
  };
  using Key = std::tuple<int32_t, uint64_t, uint64_t>;  // space, lo, hi
  std::map<Key, Kernels> live;
  uint64_t longest[2 * pef::kNumMemTypes] = {};
  std::vector<std::vector<int32_t>> preds(kernels.size());
  // Byte ranges that overlap in part without covering each other (reused
  // intermediates) can still make every kernel meet every earlier one. The
  // list's order is valid to run sequentially, so past a budget linear in
  // the accesses the kernels simply run in order, one after the other.
  uint64_t budget = 4096;
  for (int32_t k : kernels) {
    const auto& kd = desc_.kernels[static_cast<size_t>(k)];
    budget += 64 * (1 + kd.reads.size() + kd.writes.size());
  }
  uint64_t work = 0;
  auto in_order = [&] {
    for (size_t j = 0; j < preds.size(); ++j)
      preds[j] = j == 0 ? std::vector<int32_t>{} : std::vector<int32_t>{static_cast<int32_t>(j - 1)};
    return std::move(preds);
  };
  std::vector<Access> mine;
  for (size_t j = 0; j < kernels.size(); ++j) {
    const auto& kd = desc_.kernels[static_cast<size_t>(kernels[j])];
    mine.clear();
    for (int32_t t : kd.reads) mine.push_back({range_of(t), static_cast<int32_t>(j), false});
    for (int32_t t : kd.writes) mine.push_back({range_of(t), static_cast<int32_t>(j), true});
    std::vector<int32_t>& p = preds[j];
    for (const Access& a : mine) {
      const ByteRange& r = a.range;
      const uint64_t reach = longest[r.space];
      for (auto it = live.lower_bound({r.space, r.lo > reach ? r.lo - reach : 0, 0});
           it != live.end() && std::get<0>(it->first) == r.space && std::get<1>(it->first) < r.hi; ++it) {
        ++work;
        if (std::get<2>(it->first) <= r.lo) continue;
        p.insert(p.end(), it->second.writers.begin(), it->second.writers.end());
        if (a.write) p.insert(p.end(), it->second.readers.begin(), it->second.readers.end());
        work += it->second.writers.size() + (a.write ? it->second.readers.size() : 0);
      }
      if (work > budget) return in_order();
    }
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
    for (const Access& a : mine) {
      if (!a.write) continue;
      const ByteRange& r = a.range;
      for (auto it = live.lower_bound({r.space, r.lo, 0});
           it != live.end() && std::get<0>(it->first) == r.space && std::get<1>(it->first) < r.hi; ++work)
        it = std::get<2>(it->first) <= r.hi ? live.erase(it) : std::next(it);
      if (work > budget) return in_order();
    }
    for (const Access& a : mine) {
      const ByteRange& r = a.range;
      Kernels& k = live[{r.space, r.lo, r.hi}];
      std::vector<int32_t>& list = a.write ? k.writers : k.readers;
      if (list.empty() || list.back() != a.kernel) list.push_back(a.kernel);
      longest[r.space] = std::max(longest[r.space], r.hi - r.lo);
    }
  }
  return preds;
}

void Program::build_section(const pef::SectionDesc& sd) {
  SectionPlan s;
  s.id = sd.id;
  s.name = sd.name;
  s.type = sd.type;
  s.graph = sd.graph;
  s.kernels = sd.kernels;
  s.micro_batched = sd.micro_batched;
  s.preds = dependencies(s.kernels);
  for (int32_t k : s.kernels) s.writes_state |= kernels_[static_cast<size_t>(k)].writes_state;
  sections_.push_back(std::move(s));
}

void Program::build_units() {
  // One pass over the schedule gathers every spatial graph's kernels in
  // call order (a pass per graph would cost graphs times calls).
  const size_t n = desc_.graphs.size();
  unit_of_graph_.assign(n, -1);
  std::vector<SectionPlan> drafts(n);
  std::vector<bool> micro(n, false);
  for (const auto& c : desc_.schedule) {
    const SectionPlan& sp = sections_[static_cast<size_t>(c.section)];
    const size_t g = static_cast<size_t>(sp.graph);
    if (desc_.graphs[g].mapping != pef::Mapping::Spatial) continue;
    micro[g] = micro[g] || sp.micro_batched;
    drafts[g].kernels.insert(drafts[g].kernels.end(), sp.kernels.begin(), sp.kernels.end());
    drafts[g].writes_state |= sp.writes_state;
  }
  for (size_t g = 0; g < n; ++g) {
    SectionPlan& u = drafts[g];
    if (desc_.graphs[g].mapping != pef::Mapping::Spatial) continue;
    if (micro[g] || u.kernels.empty()) continue;  // micro-batches stream section by section
    u.id = -1;
    u.name = desc_.graphs[g].name + "_spatial";
    u.graph = static_cast<int32_t>(g);
    u.preds = dependencies(u.kernels);
    unit_of_graph_[g] = static_cast<int32_t>(units_.size());
    units_.push_back(std::move(u));
  }
}

void Program::pair_row_consumers() {
  const auto n = static_cast<int32_t>(kernels_.size());
  auto plain_step = [](const OpStep& st) {
    return st.bound.empty() && st.rng_offset_attr < 0 && st.training_attr < 0 && st.outputs.size() == 1;
  };
  std::vector<int32_t> candidate(kernels_.size(), -1);
  for (int32_t k = 0; k + 1 < n; ++k) {
    const KernelPlan& p = kernels_[static_cast<size_t>(k)];
    const KernelPlan& c = kernels_[static_cast<size_t>(k + 1)];
    if (p.steps.size() != 1 || p.fused || p.steps[0].op->name != "linear" || !plain_step(p.steps[0]))
      continue;
    if (c.steps.empty()) continue;
    const OpStep& first = c.steps[0];
    if (!first.op->rows_work || !plain_step(first) || first.inputs.empty() ||
        first.inputs[0] != p.steps[0].outputs[0])
      continue;
    // The consumer's steps run as its rows are finished only when they are
    // the row-wise op alone or the op leading its fused chain.
    if (c.steps.size() != 1 && !(c.fused && c.fused->has_producer())) continue;
    // Micro-batches order the kernels that write state by their own nodes.
    if (c.writes_state) continue;
    candidate[static_cast<size_t>(k)] = k + 1;
  }
  // Run inside the linear's flow-graph node, the consumer must be able to
  // start when the linear does: in every plan, right after it, waiting for
  // nothing the linear does not wait for. (Each plan is looked at once, in
  // its own length: a file of many plans loads in linear time.)
  std::vector<int32_t> producer_of(kernels_.size(), -1);
  for (int32_t k = 0; k < n; ++k)
    if (candidate[static_cast<size_t>(k)] >= 0) producer_of[static_cast<size_t>(k + 1)] = k;
  auto check = [&](const SectionPlan& sp) {
    const auto& ks = sp.kernels;
    for (size_t j = 0; j < ks.size(); ++j) {
      const auto k = static_cast<size_t>(ks[j]);
      if (const int32_t q = producer_of[k]; q >= 0 && (j == 0 || ks[j - 1] != q))
        candidate[static_cast<size_t>(q)] = -1;
      const int32_t c = candidate[k];
      if (c < 0) continue;
      bool ok = j + 1 < ks.size() && ks[j + 1] == c;
      if (ok) {
        const auto& mine = sp.preds[j];
        for (int32_t q : sp.preds[j + 1])
          ok &= q == static_cast<int32_t>(j) || std::binary_search(mine.begin(), mine.end(), q);
      }
      if (!ok) candidate[k] = -1;
    }
  };
  for (const SectionPlan& sp : sections_) check(sp);
  for (const SectionPlan& sp : units_) check(sp);
  for (int32_t k = 0; k < n; ++k) {
    const int32_t c = candidate[static_cast<size_t>(k)];
    if (c < 0) continue;
    KernelPlan& p = kernels_[static_cast<size_t>(k)];
    KernelPlan& q = kernels_[static_cast<size_t>(c)];
    p.rows_consumer = c;
    q.rows_producer = k;
    p.pair_name = p.name + "+" + q.name;
    p.pair_flops = p.flops + q.flops;
    const auto& t = desc_.tensors[static_cast<size_t>(p.steps[0].outputs[0])];
    p.pair_bytes = std::max(0.0, p.bytes + q.bytes - static_cast<double>(t.nbytes));
  }
}

int32_t Program::unit_of_graph(int32_t g) const {
  return g >= 0 && static_cast<size_t>(g) < unit_of_graph_.size() ? unit_of_graph_[static_cast<size_t>(g)] : -1;
}

}  // namespace samba::runtime
