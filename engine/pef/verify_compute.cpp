// verify_program, computation half: kernels and their op calls against the
// registry, argins and bindings, sections, the schedule and graphs.
#include <unordered_map>

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
    if (td.role == TensorRole::Alias && td.strides != contiguous_strides(td.shape))
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
  for (const ArginBinding& b : c.bindings) check_binding(p, *def, b, where);
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
    for (size_t i = 0; i < kd.reads.size(); ++i) {
      check_index(kd.reads[i], p.tensors.size(), false, label, fmt::format("reads[{}]", i),
                  "tensors");
      marks.read[static_cast<size_t>(kd.reads[i])] = stamp;
    }
    for (size_t i = 0; i < kd.writes.size(); ++i) {
      check_index(kd.writes[i], p.tensors.size(), false, label, fmt::format("writes[{}]", i),
                  "tensors");
      marks.write[static_cast<size_t>(kd.writes[i])] = stamp;
    }
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
  for (size_t s = 0; s < p.sections.size(); ++s) {
    const SectionDesc& sd = p.sections[s];
    std::string label = fmt::format("section {} '{}'", s, sd.name);
    auto [it, fresh] = ids.emplace(sd.id, s);
    if (!fresh) corrupt("{}: id {} already used by section {}", label, sd.id, it->second);
    if (static_cast<int>(sd.type) >= kNumSectionTypes)
      corrupt("{}: type code {} is not a section type (0..{})", label, static_cast<int>(sd.type),
              kNumSectionTypes - 1);
    check_index(sd.graph, p.graphs.size(), false, label, "graph", "graphs");
    for (size_t i = 0; i < sd.kernels.size(); ++i)
      check_index(sd.kernels[i], p.kernels.size(), false, label, fmt::format("kernels[{}]", i),
                  "kernels");
    for (size_t i = 0; i < sd.reads.size(); ++i)
      check_index(sd.reads[i], p.tensors.size(), false, label, fmt::format("reads[{}]", i),
                  "tensors");
    for (size_t i = 0; i < sd.writes.size(); ++i)
      check_index(sd.writes[i], p.tensors.size(), false, label, fmt::format("writes[{}]", i),
                  "tensors");
  }
  for (size_t c = 0; c < p.schedule.size(); ++c) {
    const CallDesc& cd = p.schedule[c];
    std::string label = fmt::format("schedule call {} (id {})", c, cd.id);
    // The runtime selects calls by id ranges and indexes the schedule with
    // them, so an id is the call's position, not just a unique name.
    if (cd.id < 0 || static_cast<size_t>(cd.id) != c)
      corrupt("{}: call id {} is not its position {} (call ids are 0..{} in order)", label, cd.id,
              c, p.schedule.size() - 1);
    check_index(cd.section, p.sections.size(), false, label, "section", "sections");
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
}

}  // namespace samba::pef::verify_detail
