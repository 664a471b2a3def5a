// verify_program, computation half: kernels and their op calls against the
// registry, argins and bindings, sections, the schedule and graphs.
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "engine/core/tensor.h"
#include "engine/pef/verify_internal.h"

namespace samba::pef::verify_detail {
namespace {

// Marks which tensors the kernel being checked reads and writes; stamps
// (kernel index + 1) avoid clearing between kernels.
struct AccessMarks {
  std::vector<int64_t> read, write;
  explicit AccessMarks(size_t tensors) : read(tensors, 0), write(tensors, 0) {}
};

std::optional<ArginKind> argin_kind_of(AttrRole role) {
  switch (role) {
    case AttrRole::DropoutRate: return ArginKind::DropoutRate;
    case AttrRole::DropoutSeed: return ArginKind::DropoutSeed;
    case AttrRole::Hyperparam: return ArginKind::Hyperparam;
    case AttrRole::Plain:
    case AttrRole::RngOffset:
    case AttrRole::Training: break;
  }
  return std::nullopt;
}

void check_binding(const ProgramDesc& p, const OpDef& def, const ArginBinding& b,
                   const std::string& where) {
  const AttrSpec* spec = def.find_attr(b.attr);
  if (!spec)
    corrupt("{}: binding names attribute '{}', which op '{}' does not have", where, b.attr,
            def.name);
  check_index(b.argin, p.argins.size(), false, where,
              fmt::format("binding of '{}' to argin", b.attr), "argins");
  const ArginDesc& a = p.argins[static_cast<size_t>(b.argin)];
  bool int_default = std::holds_alternative<int64_t>(a.default_value);
  bool fits = spec->type == AttrType::Float ||
              ((spec->type == AttrType::Int || spec->type == AttrType::Bool) && int_default);
  if (!fits)
    corrupt("{}: attribute '{}' ({}) cannot take argin {} '{}' (default {})", where, b.attr,
            attr_type_name(spec->type), b.argin, a.name, attr_value_str(a.default_value));
  // The op's inference ran on the compiled value; only attributes that
  // cannot change shapes (rates, seeds, hyperparameters) may change at run
  // time, and each from an argin of its own kind (so that its range is
  // checked when it is set).
  const std::optional<ArginKind> kind = argin_kind_of(spec->role);
  if (!kind)
    corrupt("{}: binds attribute '{}' to argin {} '{}', but op '{}' fixes '{}' at compile time "
            "(only dropout rates and seeds and hyperparameters take argins)",
            where, b.attr, b.argin, a.name, def.name, b.attr);
  if (a.kind != *kind)
    corrupt("{}: attribute '{}' takes a {} argin, but argin {} '{}' is a {}", where, b.attr,
            argin_kind_name(*kind), b.argin, a.name, argin_kind_name(a.kind));
  // The default reaches the kernel on the first run: it must be a value the
  // attribute's range admits, as set_argin would require of a user's value.
  try {
    check_attr_value(*spec, a.default_value, "argin", a.name);
  } catch (const Error& e) {
    corrupt("{}: the default of attribute '{}': {}", where, b.attr, e.what());
  }
}

// Input and output counts against the schema, and each tensor against the
// kernel's declared reads and writes.
void check_op_tensors(const ProgramDesc& p, const OpDef& def, const OpCall& c,
                      const AccessMarks& marks, int64_t stamp, const std::string& where) {
  size_t fixed = def.inputs.size();
  bool variadic = !def.inputs.empty() && def.inputs.back().variadic;
  if (variadic) --fixed;
  size_t required = 0;
  for (size_t i = 0; i < fixed; ++i)
    if (!def.inputs[i].optional) required = i + 1;
  if (c.inputs.size() < required || (!variadic && c.inputs.size() > fixed))
    corrupt("{}: {} inputs, but the op takes {}{}: {}", where, c.inputs.size(),
            variadic ? "at least " : "",
            variadic || required == fixed ? fmt::format("{}", variadic ? required : fixed)
                                          : fmt::format("{} to {}", required, fixed),
            def.signature());
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const InputSpec& spec = i < fixed ? def.inputs[i] : def.inputs.back();
    std::string field = fmt::format("input {} ('{}')", i, spec.name);
    check_index(c.inputs[i], p.tensors.size(), spec.optional, where, field, "tensors");
    if (c.inputs[i] < 0) continue;
    size_t t = static_cast<size_t>(c.inputs[i]);
    if (marks.read[t] != stamp && marks.write[t] != stamp)
      corrupt("{}: {} {} is missing from the kernel's reads and writes", where, field,
              tensor_label(p, c.inputs[i]));
    if (spec.mutated && marks.write[t] != stamp)
      corrupt("{}: {} {} is updated in place but missing from the kernel's writes", where, field,
              tensor_label(p, c.inputs[i]));
    // Views are the only tensors with strides of their own; a kernel that
    // does not read strides walks numel elements from the view's offset.
    const TensorDesc& td = p.tensors[t];
    if (!def.strided_inputs && td.role == TensorRole::Alias &&
        !is_contiguous_run(td.shape, td.strides))
      corrupt("{}: {} {} is a view with strides {}, but op '{}' reads its inputs contiguous ({})",
              where, field, tensor_label(p, c.inputs[i]), dims_str(td.strides), def.name,
              dims_str(contiguous_strides(td.shape)));
  }
  bool variadic_out = !def.outputs.empty() && def.outputs.back().variadic;
  size_t fixed_out = def.outputs.size() - (variadic_out ? 1 : 0);
  if (variadic_out ? c.outputs.size() < fixed_out : c.outputs.size() != fixed_out)
    corrupt("{}: {} outputs, but the op gives {}{}", where, c.outputs.size(),
            variadic_out ? "at least " : "", fixed_out);
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    std::string field = fmt::format("output {}", i);
    check_index(c.outputs[i], p.tensors.size(), false, where, field, "tensors");
    if (marks.write[static_cast<size_t>(c.outputs[i])] != stamp)
      corrupt("{}: {} {} is missing from the kernel's writes", where, field,
              tensor_label(p, c.outputs[i]));
  }
}

// The op's own inference on the PEF's input tensors must give exactly the
// output tensors the PEF allocated: kernels write what inference says, so a
// smaller or differently shaped output slot would be written past its end.
void check_op_types(const ProgramDesc& p, const OpDef& def, const OpCall& c, const Attrs& attrs,
                    const std::string& where) {
  if (!def.infer) return;
  std::vector<Tensor> inputs;
  inputs.reserve(c.inputs.size());
  for (int32_t t : c.inputs) {
    if (t < 0) {
      inputs.emplace_back();
      continue;
    }
    const TensorDesc& td = p.tensors[static_cast<size_t>(t)];
    inputs.push_back(Tensor::symbolic(td.shape, td.dtype));
  }
  std::vector<TensorMeta> metas;
  try {
    metas = def.infer(InferContext{def, inputs, attrs});
  } catch (const Error& e) {
    corrupt("{}: the inputs do not fit the op: {}", where, e.what());
  }
  if (metas.size() != c.outputs.size())
    corrupt("{}: {} outputs, but the op infers {} from its inputs", where, c.outputs.size(),
            metas.size());
  for (size_t i = 0; i < metas.size(); ++i) {
    const TensorDesc& td = p.tensors[static_cast<size_t>(c.outputs[i])];
    if (td.dtype != metas[i].dtype || td.shape != metas[i].shape)
      corrupt("{}: output {} {} is {} {}, but the op infers {} {} from its inputs", where, i,
              tensor_label(p, c.outputs[i]), dtype_name(td.dtype), dims_str(td.shape),
              dtype_name(metas[i].dtype), dims_str(metas[i].shape));
    // Kernels write their outputs as contiguous buffers.
    if (td.role == TensorRole::Alias && !is_contiguous_run(td.shape, td.strides))
      corrupt("{}: output {} {} is a view with strides {}; the op writes contiguous {}", where, i,
              tensor_label(p, c.outputs[i]), dims_str(td.strides),
              dims_str(contiguous_strides(td.shape)));
  }
}

void check_op_call(const ProgramDesc& p, const OpCall& c, const AccessMarks& marks, int64_t stamp,
                   const std::string& where) {
  const OpDef* def = OpRegistry::global().find(c.op);
  if (!def) {
    try {
      OpRegistry::global().get(c.op);  // its message suggests near names
    } catch (const Error& e) {
      corrupt("{}: {}", where, e.what());
    }
    corrupt("{}: unknown op '{}'", where, c.op);
  }
  if (!def->kernel)
    corrupt("{}: op '{}' is a view and has no kernel; a view is an alias tensor, not a kernel's op",
            where, c.op);
  check_op_tensors(p, *def, c, marks, stamp, where);
  for (const auto& [name, v] : c.attrs.items())
    check_attr_value(v, fmt::format("{} attribute '{}'", where, name));
  Attrs resolved;
  try {
    resolved = def->resolve(c.attrs);
  } catch (const Error& e) {
    corrupt("{}: {}", where, e.what());
  }
  check_op_types(p, *def, c, resolved, where);
  std::unordered_set<std::string_view> bound;
  for (const ArginBinding& b : c.bindings) {
    check_binding(p, *def, b, where);
    if (!bound.insert(b.attr).second)
      corrupt("{}: attribute '{}' is bound to an argin twice", where, b.attr);
  }
}

}  // namespace

void verify_kernels(const ProgramDesc& p) {
  AccessMarks marks(p.tensors.size());
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const KernelDesc& kd = p.kernels[k];
    if (kd.name.empty()) corrupt("kernel {}: name is empty", k);
    std::string label = fmt::format("kernel {} '{}'", k, kd.name);
    if (static_cast<int>(kd.fusion) < 0 ||
        static_cast<int>(kd.fusion) > static_cast<int>(Fusion::Opaque))
      corrupt("{}: fusion code {} is not a fusion class", label, static_cast<int>(kd.fusion));
    if (kd.ops.empty()) corrupt("{}: has no ops", label);
    int64_t stamp = static_cast<int64_t>(k) + 1;
    // Each tensor once per list: the runtime orders kernels by their
    // accesses, and repeats would only multiply that work.
    auto mark = [&](const std::vector<int32_t>& list, std::vector<int64_t>& marked,
                    std::string_view field) {
      for (size_t i = 0; i < list.size(); ++i) {
        check_index(list[i], p.tensors.size(), false, label, fmt::format("{}[{}]", field, i),
                    "tensors");
        int64_t& m = marked[static_cast<size_t>(list[i])];
        if (m == stamp)
          corrupt("{}: {}[{}] lists {} again; a kernel lists each tensor it {} once", label, field,
                  i, tensor_label(p, list[i]), field == "reads" ? "reads" : "writes");
        m = stamp;
      }
    };
    mark(kd.reads, marks.read, "reads");
    mark(kd.writes, marks.write, "writes");
    for (size_t o = 0; o < kd.ops.size(); ++o)
      check_op_call(p, kd.ops[o], marks, stamp,
                    fmt::format("{} op {} '{}'", label, o, kd.ops[o].op));
  }
}

void verify_argins(const ProgramDesc& p) {
  std::unordered_map<std::string_view, size_t> names;
  for (size_t i = 0; i < p.argins.size(); ++i) {
    const ArginDesc& a = p.argins[i];
    if (a.name.empty()) corrupt("argin {}: name is empty", i);
    std::string label = fmt::format("argin {} '{}'", i, a.name);
    auto [it, fresh] = names.emplace(a.name, i);
    if (!fresh) corrupt("{}: name already used by argin {}", label, it->second);
    if (static_cast<int>(a.kind) >= kNumArginKinds)
      corrupt("{}: kind code {} is not an argin kind (0..{})", label, static_cast<int>(a.kind),
              kNumArginKinds - 1);
    bool is_int = std::holds_alternative<int64_t>(a.default_value);
    bool is_float = std::holds_alternative<double>(a.default_value);
    if (!is_int && !is_float)
      corrupt("{}: default {} is not an int or a float", label, attr_value_str(a.default_value));
    if (a.kind == ArginKind::DropoutSeed && !is_int)
      corrupt("{}: a dropout seed needs an int default, got {}", label,
              attr_value_str(a.default_value));
    if (a.kind == ArginKind::DropoutRate && !is_float)
      corrupt("{}: a dropout rate needs a float default, got {}", label,
              attr_value_str(a.default_value));
  }
}

void verify_sections_and_schedule(const ProgramDesc& p) {
  std::unordered_map<int32_t, size_t> ids;
  std::vector<size_t> listed_in(p.kernels.size(), SIZE_MAX), listed_at(p.kernels.size(), 0);
  for (size_t s = 0; s < p.sections.size(); ++s) {
    const SectionDesc& sd = p.sections[s];
    std::string label = fmt::format("section {} '{}'", s, sd.name);
    auto [it, fresh] = ids.emplace(sd.id, s);
    if (!fresh) corrupt("{}: id {} already used by section {}", label, sd.id, it->second);
    if (static_cast<int>(sd.type) >= kNumSectionTypes)
      corrupt("{}: type code {} is not a section type (0..{})", label, static_cast<int>(sd.type),
              kNumSectionTypes - 1);
    check_index(sd.graph, p.graphs.size(), false, label, "graph", "graphs");
    for (size_t i = 0; i < sd.kernels.size(); ++i) {
      check_index(sd.kernels[i], p.kernels.size(), false, label, fmt::format("kernels[{}]", i),
                  "kernels");
      // A kernel's arguments are one set per run: two places of one
      // section, or of two sections a spatial graph runs as one unit,
      // could run it concurrently on them.
      const size_t k = static_cast<size_t>(sd.kernels[i]);
      if (listed_in[k] == s)
        corrupt("{}: kernels[{}] is kernel {} again (kernels[{}]); a section runs a kernel once",
                label, i, k, listed_at[k]);
      if (listed_in[k] != SIZE_MAX)
        corrupt("{}: kernels[{}] is kernel {} '{}', already in section {} '{}'; a kernel belongs "
                "to one section", label, i, k, p.kernels[k].name, listed_in[k],
                p.sections[listed_in[k]].name);
      listed_in[k] = s;
      listed_at[k] = i;
    }
    for (size_t i = 0; i < sd.reads.size(); ++i)
      check_index(sd.reads[i], p.tensors.size(), false, label, fmt::format("reads[{}]", i),
                  "tensors");
    for (size_t i = 0; i < sd.writes.size(); ++i)
      check_index(sd.writes[i], p.tensors.size(), false, label, fmt::format("writes[{}]", i),
                  "tensors");
  }
  std::vector<size_t> called_by(p.sections.size(), SIZE_MAX);
  for (size_t c = 0; c < p.schedule.size(); ++c) {
    const CallDesc& cd = p.schedule[c];
    std::string label = fmt::format("schedule call {} (id {})", c, cd.id);
    // The runtime selects calls by id ranges and indexes the schedule with
    // them, so an id is the call's position, not just a unique name.
    if (cd.id < 0 || static_cast<size_t>(cd.id) != c)
      corrupt("{}: call id {} is not its position {} (call ids are 0..{} in order)", label, cd.id,
              c, p.schedule.size() - 1);
    check_index(cd.section, p.sections.size(), false, label, "section", "sections");
    // A graph mapped spatially runs its scheduled sections as one unit:
    // calling a section twice would repeat its kernels in it.
    const size_t s = static_cast<size_t>(cd.section);
    if (called_by[s] != SIZE_MAX)
      corrupt("{}: calls section {} '{}' again (call {}); the schedule calls each section once",
              label, s, p.sections[s].name, called_by[s]);
    called_by[s] = c;
  }
}

namespace {

// A graph split into micro-batches: the runtime divides batch_size by
// micro_batch_size and allocates each batch-major tensor once per
// micro-batch, so the split must be exact and every buffer size must fit.
// All batch buffers together stay below 2^62 bytes, far beyond any device.
constexpr uint64_t kMaxBatchBuffers = uint64_t{1} << 62;

bool splits_batch(const GraphDesc& gd) {
  return gd.micro_batch_size > 0 && gd.micro_batch_size < gd.batch_size;
}

void check_micro_batches(const ProgramDesc& p, const GraphDesc& gd, const std::string& label,
                         uint64_t& total) {
  if (!splits_batch(gd)) return;
  if (gd.batch_size % gd.micro_batch_size != 0)
    corrupt("{}: micro_batch_size {} does not divide batch_size {}", label, gd.micro_batch_size,
            gd.batch_size);
  const uint64_t n = static_cast<uint64_t>(gd.batch_size / gd.micro_batch_size);
  auto check_buffer = [&](int32_t t) {
    if (t < 0) return;
    const TensorDesc& td = p.tensors[static_cast<size_t>(t)];
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(td.nbytes, n, &bytes) || bytes > kMaxBatchBuffers ||
        total + bytes + 64 > kMaxBatchBuffers)
      corrupt("{}: {} of {} bytes held for {} micro-batches overflows a buffer size", label,
              tensor_label(p, t), td.nbytes, n);
    total += bytes + 64;  // the runtime rounds each buffer up to 64 bytes
  };
  for (int32_t t : gd.inputs) check_buffer(t);
  for (int32_t t : gd.outputs) check_buffer(t);
  for (int32_t t : gd.output_grads) check_buffer(t);
}

// The runtime gives each batch-major input and output of a graph that
// splits its batch one buffer of all its micro-batches (the first such
// graph's count when several list it), and while a micro-batched section
// runs micro-batch k, every such tensor views its k-th slice. A section may
// therefore only touch tensors held for at least as many micro-batches as
// its graph runs.
void check_micro_batch_slices(const ProgramDesc& p) {
  std::vector<int64_t> held(p.tensors.size(), 0);  // micro-batches; 0: not split
  std::vector<size_t> held_by(p.tensors.size(), 0);
  for (size_t g = 0; g < p.graphs.size(); ++g) {
    const GraphDesc& gd = p.graphs[g];
    if (!splits_batch(gd)) continue;
    const int64_t n = gd.batch_size / gd.micro_batch_size;
    auto hold = [&](int32_t t) {
      if (t < 0) return;
      const TensorDesc& td = p.tensors[static_cast<size_t>(t)];
      if (td.batch_dim != 0 || td.role == TensorRole::Alias || held[static_cast<size_t>(t)] > 0)
        return;
      int64_t rows = 0;
      if (__builtin_mul_overflow(td.shape[0], n, &rows))
        corrupt("graph {} '{}': {} has {} rows per micro-batch; {} micro-batches of them overflow "
                "a dim", g, gd.name, tensor_label(p, t), td.shape[0], n);
      held[static_cast<size_t>(t)] = n;
      held_by[static_cast<size_t>(t)] = g;
    };
    for (int32_t t : gd.inputs) hold(t);
    for (int32_t t : gd.outputs) hold(t);
    for (int32_t t : gd.output_grads) hold(t);
  }
  // Per kernel, the fewest micro-batches of any split tensor it touches
  // (through a view, its base's): each kernel is looked at once, however
  // many sections list it.
  std::vector<int64_t> fewest(p.kernels.size(), INT64_MAX);
  std::vector<int32_t> fewest_tensor(p.kernels.size(), -1);
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    for (const auto* list : {&p.kernels[k].reads, &p.kernels[k].writes})
      for (int32_t t : *list) {
        const TensorDesc& td = p.tensors[static_cast<size_t>(t)];
        const int32_t root = td.role == TensorRole::Alias ? td.alias_of : t;
        const int64_t n = held[static_cast<size_t>(root)];
        if (n > 0 && n < fewest[k]) {
          fewest[k] = n;
          fewest_tensor[k] = root;
        }
      }
  }
  for (size_t s = 0; s < p.sections.size(); ++s) {
    const SectionDesc& sd = p.sections[s];
    if (!sd.micro_batched) continue;
    const GraphDesc& gd = p.graphs[static_cast<size_t>(sd.graph)];
    const int64_t n = gd.batch_size / gd.micro_batch_size;
    for (int32_t k : sd.kernels) {
      if (fewest[static_cast<size_t>(k)] >= n) continue;
      const int32_t t = fewest_tensor[static_cast<size_t>(k)];
      const size_t h = held_by[static_cast<size_t>(t)];
      corrupt("section {} '{}': runs {} micro-batches of graph {} '{}', but its kernel {} '{}' "
              "touches {}, held for the {} micro-batches of graph {} '{}'",
              s, sd.name, n, sd.graph, gd.name, k, p.kernels[static_cast<size_t>(k)].name,
              tensor_label(p, t), fewest[static_cast<size_t>(k)], h, p.graphs[h].name);
    }
  }
}

}  // namespace

void verify_graphs(const ProgramDesc& p) {
  for (size_t s = 0; s < p.sections.size(); ++s) {
    const SectionDesc& sd = p.sections[s];
    const GraphDesc& gd = p.graphs[static_cast<size_t>(sd.graph)];
    if (sd.micro_batched && !splits_batch(gd))
      corrupt("section {} '{}': micro-batched, but graph {} '{}' has micro_batch_size {} and "
              "batch_size {} (needs 0 < micro_batch_size < batch_size)",
              s, sd.name, sd.graph, gd.name, gd.micro_batch_size, gd.batch_size);
  }
  uint64_t batch_buffers = 0;
  std::unordered_map<std::string_view, size_t> names;
  for (size_t g = 0; g < p.graphs.size(); ++g) {
    const GraphDesc& gd = p.graphs[g];
    std::string label = fmt::format("graph {} '{}'", g, gd.name);
    auto [it, fresh] = names.emplace(gd.name, g);
    if (!fresh) corrupt("{}: name already used by graph {}", label, it->second);
    auto check_tensors = [&](const std::vector<int32_t>& list, std::string_view field,
                             TensorRole role, bool allow_none) {
      for (size_t i = 0; i < list.size(); ++i) {
        std::string f = fmt::format("{}[{}]", field, i);
        check_index(list[i], p.tensors.size(), allow_none, label, f, "tensors");
        if (list[i] < 0) continue;
        TensorRole actual = p.tensors[static_cast<size_t>(list[i])].role;
        if (actual != role)
          corrupt("{}: {} is {}, a {}, not a {}", label, f, tensor_label(p, list[i]),
                  tensor_role_name(actual), tensor_role_name(role));
      }
    };
    check_tensors(gd.inputs, "inputs", TensorRole::Input, false);
    check_tensors(gd.outputs, "outputs", TensorRole::Output, false);
    if (gd.output_grads.size() != gd.outputs.size())
      corrupt("{}: {} output_grads for {} outputs; each output has one (-1 for none)", label,
              gd.output_grads.size(), gd.outputs.size());
    check_tensors(gd.output_grads, "output_grads", TensorRole::OutputGrad, true);
    check_tensors(gd.parameters, "parameters", TensorRole::Parameter, false);
    for (size_t i = 0; i < gd.sections.size(); ++i) {
      std::string f = fmt::format("sections[{}]", i);
      check_index(gd.sections[i], p.sections.size(), false, label, f, "sections");
      const SectionDesc& s = p.sections[static_cast<size_t>(gd.sections[i])];
      if (s.graph != static_cast<int32_t>(g))
        corrupt("{}: {} is section {} '{}', which belongs to graph {}", label, f, gd.sections[i],
                s.name, s.graph);
    }
    if (gd.batch_size < 0 || gd.micro_batch_size < 0)
      corrupt("{}: batch_size {} and micro_batch_size {} must not be negative", label,
              gd.batch_size, gd.micro_batch_size);
    if (gd.batch_size > 0 && gd.micro_batch_size > gd.batch_size)
      corrupt("{}: micro_batch_size {} exceeds batch_size {}", label, gd.micro_batch_size,
              gd.batch_size);
    check_micro_batches(p, gd, label, batch_buffers);
    if (static_cast<int>(gd.mapping) >= kNumMappings)
      corrupt("{}: mapping code {} is not a mapping (0..{})", label, static_cast<int>(gd.mapping),
              kNumMappings - 1);
  }
  check_micro_batch_slices(p);
}

}  // namespace samba::pef::verify_detail
