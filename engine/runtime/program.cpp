#include "engine/runtime/program.h"

#include <algorithm>

#include "engine/core/error.h"

namespace samba::runtime {
namespace {

// A byte range of device memory: which area and memory type, and where.
struct ByteRange {
  int32_t space;  // mem type * 2 + (activation ? 1 : 0)
  uint64_t lo, hi;
  bool overlaps(const ByteRange& o) const { return space == o.space && lo < o.hi && o.lo < hi; }
  bool covers(const ByteRange& o) const { return space == o.space && lo <= o.lo && o.hi <= hi; }
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
  kernels_.reserve(desc_.kernels.size());
  for (const auto& kd : desc_.kernels) build_kernel(kd);
  for (const auto& sd : desc_.sections) build_section(sd);
  build_units();
}

int32_t Program::find_tensor(std::string_view name) const {
  auto it = tensor_by_name_.find(std::string(name));
  return it == tensor_by_name_.end() ? -1 : it->second;
}

int32_t Program::find_argin(std::string_view name) const {
  auto it = argin_by_name_.find(std::string(name));
  return it == argin_by_name_.end() ? -1 : it->second;
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
        if (items[i].first == b.attr) s.bound.push_back({i, b.argin});
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

std::vector<std::vector<int32_t>> Program::dependencies(const std::vector<int32_t>& kernels) const {
  auto range_of = [&](int32_t t) {
    const auto& base = desc_.tensors[static_cast<size_t>(root(t))];
    const int32_t space = static_cast<int32_t>(base.mem) * 2 + (pef::in_activation_area(base.role) ? 1 : 0);
    return ByteRange{space, base.arena_offset, base.arena_offset + std::max<uint64_t>(base.nbytes, 1)};
  };
  std::vector<std::vector<int32_t>> preds(kernels.size());
  // Earlier accesses still relevant to later kernels. A write that covers
  // an earlier access makes it redundant: whoever comes later and conflicts
  // with it also conflicts with the covering write, which depends on it.
  std::vector<Access> live;
  for (size_t j = 0; j < kernels.size(); ++j) {
    const auto& kd = desc_.kernels[static_cast<size_t>(kernels[j])];
    std::vector<Access> mine;
    for (int32_t t : kd.reads) mine.push_back({range_of(t), static_cast<int32_t>(j), false});
    for (int32_t t : kd.writes) mine.push_back({range_of(t), static_cast<int32_t>(j), true});
    std::vector<int32_t>& p = preds[j];
    for (const Access& a : mine)
      for (const Access& r : live)
        if ((a.write || r.write) && r.kernel != a.kernel && a.range.overlaps(r.range)) p.push_back(r.kernel);
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
    for (const Access& a : mine)
      if (a.write)
        live.erase(std::remove_if(live.begin(), live.end(), [&](const Access& r) { return a.range.covers(r.range); }),
                   live.end());
    live.insert(live.end(), mine.begin(), mine.end());
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
  unit_of_graph_.assign(desc_.graphs.size(), -1);
  for (size_t g = 0; g < desc_.graphs.size(); ++g) {
    const auto& gd = desc_.graphs[g];
    if (gd.mapping != pef::Mapping::Spatial) continue;
    SectionPlan u;
    u.id = -1;
    u.name = gd.name + "_spatial";
    u.graph = static_cast<int32_t>(g);
    bool micro = false;
    for (const auto& c : desc_.schedule) {
      const SectionPlan& sp = sections_[static_cast<size_t>(c.section)];
      if (sp.graph != static_cast<int32_t>(g)) continue;
      micro |= sp.micro_batched;
      u.kernels.insert(u.kernels.end(), sp.kernels.begin(), sp.kernels.end());
      u.writes_state |= sp.writes_state;
    }
    if (micro || u.kernels.empty()) continue;  // micro-batches stream section by section
    u.preds = dependencies(u.kernels);
    unit_of_graph_[g] = static_cast<int32_t>(units_.size());
    units_.push_back(std::move(u));
  }
}

int32_t Program::unit_of_graph(int32_t g) const {
  return g >= 0 && static_cast<size_t>(g) < unit_of_graph_.size() ? unit_of_graph_[static_cast<size_t>(g)] : -1;
}

}  // namespace samba::runtime
