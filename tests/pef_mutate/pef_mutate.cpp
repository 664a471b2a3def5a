#include "tests/pef_mutate/pef_mutate.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "tests/pef_mutate/pef_layout.h"

namespace samba::testing {
namespace {

using namespace pef_edit;

constexpr std::string_view kNames[] = {
    "micro_batched_flag", "micro_batch_size", "batch_wrap",     "resize_consistent", "resize_inputs",
    "resize_one",         "dtype_one",        "dtype_consistent", "output_rank_lower", "rank_change",
    "swap_operands",      "replace_operand",  "schedule_ids",   "schedule_sections", "section_kernels",
    "region_offset",      "arena_bytes",      "blob_sizes",     "alias_view",        "attributes",
    "op_name",            "kernel_access",    "graph_lists",    "argins",            "tensor_roles",
    "enum_codes",         "format_version",   "byte_flips",     "truncate"};
static_assert(std::size(kNames) == kNumPefMutations);

using Program = fb::ProgramT;

// v * times + plus, wrapping: the input being mutated is often an earlier
// mutation's output, whose sizes may already be extreme values.
int64_t wrapping(int64_t v, int64_t times, int64_t plus) {
  return static_cast<int64_t>(static_cast<uint64_t>(v) * static_cast<uint64_t>(times) + static_cast<uint64_t>(plus));
}

// Every op call of the program, with the kernel it belongs to.
std::vector<fb::OpCallT*> op_calls(Program& p) {
  std::vector<fb::OpCallT*> calls;
  for (auto& k : p.kernels)
    for (auto& c : k->ops) calls.push_back(c.get());
  return calls;
}

std::vector<int32_t> tensors_where(const Program& p, bool (*keep)(const fb::TensorT&)) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < p.tensors.size(); ++i)
    if (keep(*p.tensors[i])) out.push_back(static_cast<int32_t>(i));
  return out;
}

bool owning(const fb::TensorT& t) { return t.role != fb::TensorRole::Alias; }
bool shaped(const fb::TensorT& t) { return t.role != fb::TensorRole::Alias && !t.shape.empty(); }

// An index that is wrong in an interesting way: near the end, far beyond
// it, negative.
int32_t bad_index(Rng& r, size_t count) {
  const int32_t n = static_cast<int32_t>(count);
  const int32_t choices[] = {n, n + 1, -2, INT32_MIN, INT32_MAX, 1 << 30, -1, n - 1, 0};
  return choices[r.below(std::size(choices))];
}

int64_t new_dim(Rng& r, int64_t old) {
  const int64_t choices[] = {0, 1, 2, 3, wrapping(old, 1, 1), wrapping(old, 2, 0), std::max<int64_t>(old - 1, 0), 5};
  int64_t d = choices[r.below(std::size(choices))];
  return d == old ? wrapping(old, 1, 1) : d;
}

// Alias views of a tensor follow it: same dim change, contiguous strides.
void resize_tensor(Program& p, fb::TensorT& t, size_t axis, int64_t value) {
  if (axis >= t.shape.size()) return;
  t.shape[axis] = value;
  for (auto& a : p.tensors)
    if (a->role == fb::TensorRole::Alias && a->alias_of >= 0 && static_cast<size_t>(a->alias_of) < p.tensors.size() &&
        p.tensors[static_cast<size_t>(a->alias_of)].get() == &t && axis < a->shape.size()) {
      a->shape[axis] = value;
      a->strides = contiguous_strides(a->shape);
    }
}

bool micro_batched_flag(Program& p, Rng& r) {
  if (p.sections.empty() || p.graphs.empty()) return false;
  auto& s = p.sections[r.below(p.sections.size())];
  s->micro_batched = true;
  if (r.chance(50))
    for (auto& g : p.graphs) g->micro_batch_size = 0;
  return true;
}

bool micro_batch_size(Program& p, Rng& r) {
  if (p.graphs.empty()) return false;
  auto& g = p.graphs[r.below(p.graphs.size())];
  const int64_t b = g->batch_size;
  const int64_t choices[] = {0, -1, wrapping(b, 1, 1), wrapping(b, 1, -1), 3, INT64_MAX, INT64_MIN, wrapping(b, 2, 0), 1};
  g->micro_batch_size = choices[r.below(std::size(choices))];
  if (r.chance(30)) g->batch_size = choices[r.below(std::size(choices))];
  for (auto& s : p.sections)
    if (r.chance(50)) s->micro_batched = true;
  return true;
}

bool batch_wrap(Program& p, Rng& r) {
  if (p.graphs.empty()) return false;
  const int64_t batches[] = {int64_t{1} << 61, int64_t{1} << 62, INT64_MAX, int64_t{1} << 40, (int64_t{1} << 62) + 2};
  const int64_t micros[] = {2, 1, 4, int64_t{1} << 20};
  auto& g = p.graphs[r.below(p.graphs.size())];
  g->batch_size = batches[r.below(std::size(batches))];
  g->micro_batch_size = micros[r.below(std::size(micros))];
  for (auto& s : p.sections)
    if (s->type == fb::SectionType::FWD || r.chance(50)) s->micro_batched = true;
  return true;
}

// A dim value that tensors share (the batch, a feature count) changed
// everywhere it appears at that axis: a consistently resized model.
bool resize_consistent(Program& p, Rng& r) {
  auto candidates = tensors_where(p, shaped);
  if (candidates.empty()) return false;
  const auto& t = *p.tensors[static_cast<size_t>(r.pick(candidates))];
  const size_t axis = r.below(t.shape.size());
  const int64_t old = t.shape[axis], value = new_dim(r, old);
  const bool any_axis = r.chance(30);
  for (auto& u : p.tensors) {
    if (u->role == fb::TensorRole::Alias) continue;
    for (size_t a = 0; a < u->shape.size(); ++a)
      if (u->shape[a] == old && (any_axis || a == axis)) resize_tensor(p, *u, a, value);
  }
  replan(p);
  return true;
}

// The graph's inputs and parameters resized; what they feed keeps its shape,
// so an op's output slot no longer fits what the op infers.
bool resize_inputs(Program& p, Rng& r) {
  std::vector<int32_t> roots;
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    auto role = p.tensors[i]->role;
    if ((role == fb::TensorRole::Input || role == fb::TensorRole::Parameter) && !p.tensors[i]->shape.empty())
      roots.push_back(static_cast<int32_t>(i));
  }
  if (roots.empty()) return false;
  auto& first = *p.tensors[static_cast<size_t>(r.pick(roots))];
  const size_t axis = r.below(first.shape.size());
  const int64_t old = first.shape[axis], value = wrapping(old, 2, static_cast<int64_t>(r.below(3)));
  for (int32_t i : roots) {
    auto& t = *p.tensors[static_cast<size_t>(i)];
    for (size_t a = 0; a < t.shape.size(); ++a)
      if (t.shape[a] == old) resize_tensor(p, t, a, value);
  }
  replan(p);
  return true;
}

bool resize_one(Program& p, Rng& r) {
  auto candidates = tensors_where(p, shaped);
  if (candidates.empty()) return false;
  auto& t = *p.tensors[static_cast<size_t>(r.pick(candidates))];
  const size_t axis = r.below(t.shape.size());
  resize_tensor(p, t, axis, new_dim(r, t.shape[axis]));
  if (r.chance(80)) replan(p);
  return true;
}

fb::DType random_dtype(Rng& r) { return static_cast<fb::DType>(r.below(10)); }

bool dtype_one(Program& p, Rng& r) {
  auto candidates = tensors_where(p, owning);
  if (candidates.empty()) return false;
  auto& t = *p.tensors[static_cast<size_t>(r.pick(candidates))];
  fb::DType d = random_dtype(r);
  t.dtype = d == t.dtype ? fb::DType::Float64 : d;
  if (r.chance(80)) replan(p);
  return true;
}

bool dtype_consistent(Program& p, Rng& r) {
  const fb::DType from = r.chance(70) ? fb::DType::Float32 : fb::DType::Int64;
  const fb::DType choices[] = {fb::DType::Float64, fb::DType::BFloat16, fb::DType::Float16, fb::DType::Int32,
                               fb::DType::Float32, fb::DType::Int8};
  fb::DType to = choices[r.below(std::size(choices))];
  if (to == from) to = fb::DType::Float64;
  for (auto& t : p.tensors)
    if (t->dtype == from) t->dtype = to;
  replan(p);
  return true;
}

// An op output of lower rank than what the op infers: dims merged (same
// bytes) or one dropped (fewer).
bool output_rank_lower(Program& p, Rng& r) {
  std::vector<int32_t> outputs;
  for (auto* c : op_calls(p))
    for (int32_t o : c->outputs)
      if (o >= 0 && static_cast<size_t>(o) < p.tensors.size() && !p.tensors[static_cast<size_t>(o)]->shape.empty())
        outputs.push_back(o);
  if (outputs.empty()) return false;
  auto& t = *p.tensors[static_cast<size_t>(r.pick(outputs))];
  if (t.shape.size() >= 2 && r.chance(60)) {
    t.shape[0] = wrapping(t.shape[0], t.shape[1], 0);
    t.shape.erase(t.shape.begin() + 1);
  } else {
    t.shape.erase(t.shape.begin() + static_cast<long>(r.below(t.shape.size())));
  }
  if (t.role == fb::TensorRole::Alias) t.strides = contiguous_strides(t.shape);
  if (r.chance(70)) replan(p);
  return true;
}

bool rank_change(Program& p, Rng& r) {
  auto candidates = tensors_where(p, owning);
  if (candidates.empty()) return false;
  auto& t = *p.tensors[static_cast<size_t>(r.pick(candidates))];
  if (!t.shape.empty() && r.chance(50))
    t.shape.erase(t.shape.begin() + static_cast<long>(r.below(t.shape.size())));
  else
    t.shape.insert(t.shape.begin() + static_cast<long>(r.below(t.shape.size() + 1)), 1);
  if (r.chance(60)) replan(p);
  return true;
}

bool swap_operands(Program& p, Rng& r) {
  auto calls = op_calls(p);
  if (calls.empty()) return false;
  for (int attempt = 0; attempt < 8; ++attempt) {
    auto* c = r.pick(calls);
    if (c->inputs.size() >= 2 && r.chance(60)) {
      size_t a = r.below(c->inputs.size()), b = r.below(c->inputs.size());
      if (a == b) b = (a + 1) % c->inputs.size();
      std::swap(c->inputs[a], c->inputs[b]);
      return true;
    }
    if (!c->inputs.empty() && !c->outputs.empty()) {
      std::swap(c->inputs[r.below(c->inputs.size())], c->outputs[r.below(c->outputs.size())]);
      return true;
    }
  }
  return false;
}

bool replace_operand(Program& p, Rng& r) {
  auto calls = op_calls(p);
  if (calls.empty()) return false;
  auto* c = r.pick(calls);
  std::vector<int32_t>& list = c->outputs.empty() || (!c->inputs.empty() && r.chance(60)) ? c->inputs : c->outputs;
  if (list.empty()) return false;
  int32_t& slot = list[r.below(list.size())];
  slot = r.chance(60) ? static_cast<int32_t>(r.below(p.tensors.size())) : bad_index(r, p.tensors.size());
  return true;
}

bool schedule_ids(Program& p, Rng& r) {
  if (p.schedule.empty()) return false;
  const int32_t ids[] = {1 << 30, INT32_MIN, 1000, -1, INT32_MAX, static_cast<int32_t>(p.schedule.size())};
  size_t c = r.below(p.schedule.size());
  int32_t id = r.chance(20) && p.schedule.size() > 1 ? p.schedule[(c + 1) % p.schedule.size()].id()
                                                       : ids[r.below(std::size(ids))];
  p.schedule[c] = fb::Call(id, p.schedule[c].section());
  return true;
}

bool schedule_sections(Program& p, Rng& r) {
  if (p.schedule.empty()) return false;
  const size_t c = r.below(p.schedule.size());
  switch (r.below(4)) {
    case 0:
      p.schedule[c] = fb::Call(p.schedule[c].id(), bad_index(r, p.sections.size()));
      break;
    case 1:  // the same section called again, ids kept in order
      p.schedule.push_back(fb::Call(static_cast<int32_t>(p.schedule.size()), p.schedule[c].section()));
      break;
    case 2:
      p.schedule.erase(p.schedule.begin() + static_cast<long>(c));
      break;
    default:
      p.schedule[c] = fb::Call(p.schedule[c].id(), static_cast<int32_t>(r.below(p.sections.size())));
  }
  return true;
}

bool section_kernels(Program& p, Rng& r) {
  if (p.sections.empty()) return false;
  auto& s = p.sections[r.below(p.sections.size())];
  switch (r.below(4)) {
    case 0: {  // the kernel list repeated: load time must stay linear
      auto once = s->kernels;
      for (int i = 0; i < 2000 && !once.empty(); ++i) s->kernels.insert(s->kernels.end(), once.begin(), once.end());
      break;
    }
    case 1:
      s->kernels.push_back(bad_index(r, p.kernels.size()));
      break;
    case 2:
      std::reverse(s->kernels.begin(), s->kernels.end());
      break;
    default:
      if (!p.kernels.empty()) s->kernels.push_back(static_cast<int32_t>(r.below(p.kernels.size())));
  }
  if (r.chance(30)) s->graph = bad_index(r, p.graphs.size());
  return true;
}

bool region_offset(Program& p, Rng& r) {
  auto candidates = tensors_where(p, owning);
  if (candidates.empty()) return false;
  auto& t = *p.tensors[static_cast<size_t>(r.pick(candidates))];
  const uint64_t offsets[] = {t.arena_offset + 1, t.arena_offset + 4, t.arena_offset + 64, t.arena_offset - 64,
                              UINT64_MAX - 3, uint64_t{1} << 63, 0};
  const uint64_t sizes[] = {t.nbytes + 4, t.nbytes - 4, t.nbytes * 2, t.nbytes / 2, UINT64_MAX, 0};
  if (r.chance(60)) t.arena_offset = offsets[r.below(std::size(offsets))];
  else t.nbytes = sizes[r.below(std::size(sizes))];
  if (r.chance(20)) t.region = p.tensors[r.below(p.tensors.size())]->region;
  return true;
}

bool arena_bytes(Program& p, Rng& r) {
  if (!p.memory) return false;
  auto& v = r.chance(50) ? p.memory->arena_bytes : p.memory->activation_bytes;
  if (v.empty() || r.chance(15)) {
    v.resize(r.below(6));
    return true;
  }
  uint64_t& b = v[r.below(v.size())];
  const uint64_t choices[] = {b / 2, b - 1, b + 4096, UINT64_MAX, uint64_t{1} << 62, 0};
  b = choices[r.below(std::size(choices))];
  return true;
}

bool blob_sizes(Program& p, Rng& r) {
  if (p.blobs.empty()) return false;
  auto& b = *p.blobs[r.below(p.blobs.size())];
  switch (r.below(6)) {
    case 0: {
      const uint64_t sizes[] = {b.uncompressed_size + 1, b.uncompressed_size / 2, uint64_t{1} << 40, UINT64_MAX, 0};
      b.uncompressed_size = sizes[r.below(std::size(sizes))];
      break;
    }
    case 1:
      b.data.resize(b.data.size() / 2);
      break;
    case 2:
      b.compression = b.compression == fb::Compression::None ? fb::Compression::Zstd : fb::Compression::None;
      break;
    case 3:
      b.checksum ^= 1ull << r.below(64);
      break;
    case 4:
      if (!b.data.empty()) b.data[r.below(b.data.size())] ^= static_cast<uint8_t>(1 + r.below(255));
      break;
    default: {
      auto owners = tensors_where(p, [](const fb::TensorT& t) { return t.blob >= 0; });
      if (owners.empty()) return false;
      p.tensors[static_cast<size_t>(r.pick(owners))]->blob =
          r.chance(50) ? static_cast<int32_t>(r.below(p.blobs.size())) : bad_index(r, p.blobs.size());
    }
  }
  return true;
}

bool alias_view(Program& p, Rng& r) {
  auto aliases = tensors_where(p, [](const fb::TensorT& t) { return t.role == fb::TensorRole::Alias; });
  if (aliases.empty()) return false;
  auto& a = *p.tensors[static_cast<size_t>(r.pick(aliases))];
  switch (r.below(5)) {
    case 0:
      if (!a.strides.empty()) a.strides[r.below(a.strides.size())] = r.chance(50) ? -1 : 1 << 20;
      break;
    case 1:
      a.view_offset = r.chance(50) ? -8 : static_cast<int64_t>(1 + r.below(64));
      break;
    case 2:
      if (!a.shape.empty()) {
        int64_t& d = a.shape[r.below(a.shape.size())];
        d = wrapping(d, 1, 1 + static_cast<int64_t>(r.below(4)));
      }
      break;
    case 3:
      a.alias_of = r.chance(50) ? static_cast<int32_t>(r.below(p.tensors.size())) : bad_index(r, p.tensors.size());
      break;
    default:
      a.strides.push_back(1);
  }
  return true;
}

bool attributes(Program& p, Rng& r) {
  std::vector<fb::AttrT*> attrs;
  for (auto* c : op_calls(p))
    for (auto& a : c->attrs) attrs.push_back(a.get());
  if (attrs.empty()) return false;
  fb::AttrT& a = *r.pick(attrs);
  switch (r.below(5)) {
    case 0: {
      fb::IntValueT v;
      const int64_t ints[] = {-1, 0, 1 << 30, INT64_MAX, INT64_MIN, 7};
      v.value = ints[r.below(std::size(ints))];
      a.value.Set(std::move(v));
      break;
    }
    case 1: {
      fb::FloatValueT v;
      const double floats[] = {std::nan(""), -1.0, 1e300, 5.0, -0.0};
      v.value = floats[r.below(std::size(floats))];
      a.value.Set(std::move(v));
      break;
    }
    case 2: {
      fb::IntsValueT v;
      const size_t n = r.below(5);
      for (size_t i = 0; i < n; ++i) v.values.push_back(static_cast<int64_t>(r.below(6)) - 2);
      a.value.Set(std::move(v));
      break;
    }
    case 3:
      a.value.Reset();
      break;
    default:
      a.name = r.chance(50) ? std::string() : a.name + "_";
  }
  return true;
}

bool op_name(Program& p, Rng& r) {
  auto calls = op_calls(p);
  if (calls.empty()) return false;
  std::vector<std::string> names;
  for (auto* c : calls) names.push_back(c->op);
  names.push_back("no_such_op");
  r.pick(calls)->op = r.pick(names);
  return true;
}

bool kernel_access(Program& p, Rng& r) {
  if (p.kernels.empty()) return false;
  auto& k = *p.kernels[r.below(p.kernels.size())];
  auto& list = r.chance(50) ? k.reads : k.writes;
  if (!list.empty() && r.chance(50))
    list.erase(list.begin() + static_cast<long>(r.below(list.size())));
  else
    list.push_back(r.chance(50) ? static_cast<int32_t>(r.below(p.tensors.size())) : bad_index(r, p.tensors.size()));
  if (r.chance(20)) k.ops.clear();
  return true;
}

bool graph_lists(Program& p, Rng& r) {
  if (p.graphs.empty()) return false;
  if (r.chance(15)) {
    p.graphs.clear();
    return true;
  }
  auto& g = *p.graphs[r.below(p.graphs.size())];
  std::vector<int32_t>* lists[] = {&g.inputs, &g.outputs, &g.output_grads, &g.parameters, &g.sections};
  auto& list = *lists[r.below(std::size(lists))];
  const size_t count = &list == &g.sections ? p.sections.size() : p.tensors.size();
  if (!list.empty() && r.chance(40))
    list.erase(list.begin() + static_cast<long>(r.below(list.size())));
  else if (!list.empty() && r.chance(50))
    list[r.below(list.size())] = static_cast<int32_t>(r.below(count));
  else
    list.push_back(bad_index(r, count));
  return true;
}

bool argins(Program& p, Rng& r) {
  if (p.argins.empty()) return false;
  auto& a = *p.argins[r.below(p.argins.size())];
  switch (r.below(4)) {
    case 0: {
      fb::FloatValueT v;
      const double floats[] = {std::nan(""), -1.0, 1e300, 5.0, -std::numeric_limits<double>::infinity()};
      v.value = floats[r.below(std::size(floats))];
      a.default_value.Set(std::move(v));
      break;
    }
    case 1: {
      fb::IntValueT v;
      v.value = r.chance(50) ? INT64_MIN : -1;
      a.default_value.Set(std::move(v));
      break;
    }
    case 2:
      a.kind = static_cast<fb::ArginKind>(r.below(3));
      break;
    default: {
      std::vector<fb::ArginBindingT*> bindings;
      for (auto* c : op_calls(p))
        for (auto& b : c->bindings) bindings.push_back(b.get());
      if (bindings.empty()) return false;
      r.pick(bindings)->argin = bad_index(r, p.argins.size());
    }
  }
  return true;
}

bool tensor_roles(Program& p, Rng& r) {
  if (p.tensors.empty()) return false;
  auto& t = *p.tensors[r.below(p.tensors.size())];
  t.role = static_cast<fb::TensorRole>(r.below(10));
  if (r.chance(30)) t.batch_dim = r.chance(50) ? 0 : 5;
  if (r.chance(20)) t.grad = bad_index(r, p.tensors.size());
  return true;
}

bool enum_codes(Program& p, Rng& r) {
  switch (r.below(5)) {
    case 0:
      if (p.tensors.empty()) return false;
      p.tensors[r.below(p.tensors.size())]->dtype = static_cast<fb::DType>(10 + r.below(100));
      break;
    case 1:
      if (p.tensors.empty()) return false;
      p.tensors[r.below(p.tensors.size())]->mem = static_cast<fb::MemType>(3 + r.below(200));
      break;
    case 2:
      if (p.tensors.empty()) return false;
      p.tensors[r.below(p.tensors.size())]->role = static_cast<fb::TensorRole>(10 + r.below(200));
      break;
    case 3:
      if (p.sections.empty()) return false;
      p.sections[r.below(p.sections.size())]->type = static_cast<fb::SectionType>(6 + r.below(200));
      break;
    default:
      if (p.kernels.empty()) return false;
      p.kernels[r.below(p.kernels.size())]->fusion = static_cast<fb::Fusion>(6 + r.below(200));
  }
  return true;
}

bool format_version(Program& p, Rng& r) {
  const uint32_t majors[] = {0, p.format_major + 1, UINT32_MAX};
  if (r.chance(70)) p.format_major = majors[r.below(std::size(majors))];
  else p.format_minor = UINT32_MAX;
  return true;
}

using Edit = bool (*)(Program&, Rng&);
constexpr Edit kEdits[] = {micro_batched_flag, micro_batch_size, batch_wrap,      resize_consistent, resize_inputs,
                           resize_one,         dtype_one,        dtype_consistent, output_rank_lower, rank_change,
                           swap_operands,      replace_operand,  schedule_ids,    schedule_sections, section_kernels,
                           region_offset,      arena_bytes,      blob_sizes,      alias_view,        attributes,
                           op_name,            kernel_access,    graph_lists,     argins,            tensor_roles,
                           enum_codes,         format_version};
static_assert(std::size(kEdits) == static_cast<size_t>(PefMutation::ByteFlips));

std::vector<uint8_t> flip_bytes(std::span<const uint8_t> in, Rng& r) {
  std::vector<uint8_t> out(in.begin(), in.end());
  if (out.empty()) return out;
  const size_t n = 1 + r.below(8);
  for (size_t i = 0; i < n; ++i) out[r.below(out.size())] ^= static_cast<uint8_t>(1 + r.below(255));
  return out;
}

bool readable(std::span<const uint8_t> pef) {
  flatbuffers::Verifier v(pef.data(), pef.size());
  return fb::VerifyProgramBuffer(v);
}

}  // namespace

std::string_view mutation_name(PefMutation m) { return kNames[static_cast<int>(m)]; }

std::vector<uint8_t> mutate_pef_as(std::span<const uint8_t> pef, PefMutation m, uint64_t seed) {
  Rng r(seed);
  if (m == PefMutation::ByteFlips) return flip_bytes(pef, r);
  if (m == PefMutation::Truncate)
    return pef.empty() ? std::vector<uint8_t>{} : std::vector<uint8_t>(pef.begin(), pef.begin() + static_cast<long>(r.below(pef.size())));
  // FlatBuffers reads scalars in place: unpack from an 8-byte-aligned copy
  // (libFuzzer's buffers are not aligned).
  std::vector<uint64_t> aligned((pef.size() + 7) / 8);
  if (!pef.empty()) std::memcpy(aligned.data(), pef.data(), pef.size());
  pef = {reinterpret_cast<const uint8_t*>(aligned.data()), pef.size()};
  if (!readable(pef)) return {};
  auto program = fb::UnPackProgram(pef.data());
  if (!kEdits[static_cast<int>(m)](*program, r)) return {};
  // A union whose type is set but whose value table is absent unpacks to a
  // null value that Pack would dereference: keep it absent. Both of the
  // schema's Value fields (an op's attribute, an argin's default).
  const auto keep_absent = [](fb::ValueUnion& u) {
    if (u.value == nullptr) u.type = fb::Value::NONE;
  };
  for (auto& k : program->kernels)
    for (auto& op : k->ops)
      for (auto& a : op->attrs) keep_absent(a->value);
  for (auto& a : program->argins) keep_absent(a->default_value);
  flatbuffers::FlatBufferBuilder fbb;
  fb::FinishProgramBuffer(fbb, fb::Program::Pack(fbb, program.get()));
  return {fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize()};
}

}  // namespace samba::testing

size_t mutate_pef(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  using namespace samba::testing;
  pef_edit::Rng r(seed);
  const auto m = static_cast<PefMutation>(r.below(kNumPefMutations));
  std::vector<uint8_t> out = mutate_pef_as({data, size}, m, r.next());
  // A class with nothing to edit, an unreadable input or a result too big
  // for the fuzzer's buffer: flip bytes of what there is instead.
  if (out.empty() || out.size() > max_size) out = mutate_pef_as({data, size}, PefMutation::ByteFlips, r.next());
  if (out.size() > max_size) out.resize(max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
