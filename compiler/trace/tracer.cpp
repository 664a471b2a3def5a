#include "compiler/trace/tracer.h"

#include "engine/core/error.h"
#include "engine/core/log.h"
#include "engine/rng/lazy_param.h"

namespace samba::compiler {

Tracer::Tracer(Graph& g) : g_(g) {
  symbols_.resize(g.values.size());
  for (const Value& v : g.values) by_name_[v.name] = v.id;
}

Tracer::~Tracer() = default;

Tracer::Active::Active(Tracer& t) : prev_(current_interceptor()) { current_interceptor() = &t; }
Tracer::Active::~Active() { current_interceptor() = prev_; }

std::string Tracer::unique_name(std::string base, const char* fallback_prefix) {
  if (base.empty()) base = fmt::format("{}{}", fallback_prefix, constant_counter_++);
  if (!by_name_.count(base)) return base;
  for (int k = 1;; ++k) {
    std::string n = fmt::format("{}_{}", base, k);
    if (!by_name_.count(n)) return n;
  }
}

void Tracer::forget_symbols() {
  for (const Tensor& s : symbols_)
    if (s.defined()) ids_.erase(s.impl());
  symbols_.assign(g_.values.size(), Tensor());
  for (const Value& v : g_.values) by_name_[v.name] = v.id;
}

Tensor Tracer::symbol(ValueId v) {
  if (symbols_.size() < g_.values.size()) symbols_.resize(g_.values.size());
  Tensor& s = symbols_[v];
  if (s.defined()) return s;
  const Value& val = g_.value(v);
  if (val.is_view()) {
    Tensor base = symbol(val.view_of);
    s = base.as_strided(val.shape, val.strides, val.view_offset);
  } else {
    s = Tensor::symbolic(val.shape, val.dtype);
  }
  s.impl()->name = val.name;
  ids_[s.impl()] = v;
  return s;
}

Tensor Tracer::add_input(const Tensor& example, const Dims& shape, int32_t batch_dim) {
  SAMBA_CHECK(example.defined(), Status::NullPointer, "compile: an input tensor is NULL");
  std::string name = example.name();
  SAMBA_CHECK(!by_name_.count(name) || name.empty(), Status::InvalidArgument,
              "compile: two inputs are named '{}'; input names must be unique", name);
  if (name.empty()) name = unique_name(fmt::format("input_{}", g_.inputs.size()), "input_");
  ValueId v = g_.add_value(name, example.dtype(), shape, ValueKind::Input);
  Value& val = g_.value(v);
  val.batch_dim = batch_dim;
  val.host = example;
  val.region = example.impl()->region_name;
  if (example.impl()->mem_type >= 0) val.mem = static_cast<pef::MemType>(example.impl()->mem_type);
  by_name_[name] = v;
  g_.inputs.push_back(v);
  hosts_.push_back(example);
  return symbol(v);
}

ValueId Tracer::value_of(const Tensor& t, bool mutated) {
  SAMBA_CHECK(t.defined(), Status::NullPointer, "tracing: an op input is undefined");
  if (auto it = ids_.find(t.impl()); it != ids_.end()) return it->second;
  SAMBA_CHECK(!t.is_symbolic(), Status::InvalidArgument,
              "tracing: symbolic tensor '{}' of shape {} does not belong to this trace (a symbolic "
              "tensor from another compile or model call was kept and reused)",
              t.name(), dims_str(t.shape()));
  TensorImpl* impl = t.impl();
  const bool trainable = impl->requires_grad && !impl->grad_fn;
  ValueKind kind;
  if (trainable || impl->is_parameter) {
    kind = ValueKind::Parameter;
  } else if (!impl->name.empty()) {
    kind = ValueKind::Buffer;
  } else {
    kind = ValueKind::Constant;
    if (impl->grad_fn)
      log::warn("tracing: a tensor of shape {} computed eagerly with autograd history is used by "
                "the model; it is captured as a constant (its history is not part of the graph)",
                dims_str(t.shape()));
  }
  SAMBA_CHECK(kind != ValueKind::Constant || t.has_data(), Status::InvalidState,
              "tracing: an unnamed tensor of shape {} without data is used by the model; give it "
              "a name (it becomes a buffer) or values (it becomes a constant)",
              dims_str(t.shape()));
  SAMBA_CHECK(!mutated || kind != ValueKind::Constant, Status::InvalidArgument,
              "tracing: an op updates an unnamed tensor of shape {} in place; name it so that it "
              "becomes a persistent buffer",
              dims_str(t.shape()));
  std::string name = impl->name;
  if (kind == ValueKind::Parameter && name.empty()) {
    // SambaFlow names parameters after their module path; a C program that
    // did not name one gets a stable name in trace order, set on the tensor
    // too so the app can find it by that name later.
    name = unique_name(fmt::format("param_{}", param_counter_++), "param_");
    impl->name = name;
  } else if (kind == ValueKind::Constant) {
    name = unique_name("", "const_");
  } else {
    auto it = by_name_.find(name);
    SAMBA_CHECK(it == by_name_.end(), Status::InvalidArgument,
                "tracing: two different tensors are named '{}' ({} {} and a {} tensor of shape "
                "{}); sn_names must be unique",
                name, value_kind_name(g_.value(it->second).kind), describe(g_.value(it->second)),
                dtype_name(t.dtype()), dims_str(t.shape()));
  }
  // The graph works on the tensor's values in logical (contiguous) order; a
  // strided host tensor is copied when its data is captured.
  ValueId v = g_.add_value(name, t.dtype(), t.shape(), kind);
  Value& val = g_.value(v);
  // A constant is the value the model used now. Its tensor may borrow memory
  // only the caller keeps alive (samba_tensor_wrap; a binding's temporary,
  // such as a mask the model computed with torch), and the PEF is written
  // after the model returned: keep a copy.
  val.host = kind == ValueKind::Constant ? t.clone() : t;
  val.requires_grad = kind == ValueKind::Parameter && impl->requires_grad;
  val.region = impl->region_name;
  if (impl->mem_type >= 0) val.mem = static_cast<pef::MemType>(impl->mem_type);
  // A built-in materializer travels in the PEF, so the program can give
  // the tensor its initial values itself.
  if (const auto* init = rng::lazy_initializer(t); init && init->materializer()->builtin() &&
                                                   kind != ValueKind::Constant)
    val.materializer = *init->materializer()->builtin();
  by_name_[name] = v;
  ids_[impl] = v;
  hosts_.push_back(t);
  if (kind == ValueKind::Parameter) g_.parameters.push_back(v);
  return v;
}

ValueId Tracer::contiguous_copy(ValueId v) {
  const OpDef& cast = OpRegistry::global().get("cast");
  const Value& val = g_.value(v);
  Attrs attrs = cast.resolve(Attrs{{"dtype", val.dtype}});
  NodeId n = emit(cast, {v}, attrs, {{val.dtype, val.shape}});
  return g_.node(n).outputs[0];
}

NodeId Tracer::emit(const OpDef& op, std::vector<ValueId> in, const Attrs& attrs,
                    const std::vector<TensorMeta>& metas) {
  NodeId n = g_.add_node(op, std::move(in), attrs, phase_);
  const std::string node_name = g_.node(n).name;
  if (phase_ == Phase::Forward) {
    // Dropout rates and seeds become argins named after the node
    // ("dropout_3.p"), so run() can change them and evaluation mode can zero
    // the rates without recompiling.
    for (const AttrSpec& a : op.attrs) {
      if (a.role != AttrRole::DropoutRate && a.role != AttrRole::DropoutSeed) continue;
      const std::string argin = fmt::format("{}.{}", node_name, a.name);
      g_.add_argin({argin,
                    a.role == AttrRole::DropoutRate ? pef::ArginKind::DropoutRate : pef::ArginKind::DropoutSeed,
                    *attrs.find(a.name)});
      g_.node(n).bindings.push_back({a.name, argin});
    }
  }
  for (size_t k = 0; k < metas.size(); ++k) {
    std::string vname =
        metas.size() == 1 ? node_name : fmt::format("{}.{}", node_name, op.outputs[std::min(k, op.outputs.size() - 1)].name);
    if (op.outputs.size() == 1 && metas.size() > 1) vname = fmt::format("{}.{}", node_name, k);
    ValueId v = g_.add_value(unique_name(vname, "v"), metas[k].dtype, metas[k].shape, ValueKind::Intermediate);
    Value& val = g_.value(v);
    val.producer = n;
    val.producer_output = static_cast<int32_t>(k);
    by_name_[val.name] = v;
    g_.node(n).outputs.push_back(v);
  }
  return n;
}

std::vector<Tensor> Tracer::record(const OpDef& op, std::span<const Tensor> inputs,
                                   const Attrs& resolved, std::vector<TensorMeta> metas) {
  std::vector<ValueId> in(inputs.size(), kNone);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    const InputSpec& spec = op.inputs[std::min(i, op.inputs.size() - 1)];
    in[i] = value_of(inputs[i], spec.mutated);
    const Value& v = g_.value(in[i]);
    if (spec.mutated) {
      SAMBA_CHECK(!v.is_view(), Status::Unsupported,
                  "tracing: op '{}' updates '{}' in place, which is a view of '{}'; in-place "
                  "updates of views are not supported in compiled graphs",
                  op.name, v.name, g_.value(v.view_of).name);
      continue;
    }
    const Tensor sym = symbol(in[i]);
    const bool needs_copy = op.view ? op.view_needs_contiguous : !op.strided_inputs;
    if (needs_copy && !sym.is_contiguous()) in[i] = contiguous_copy(in[i]);
  }

  if (!op.view) {
    NodeId n = emit(op, std::move(in), resolved, metas);
    std::vector<Tensor> out;
    for (ValueId v : g_.node(n).outputs) out.push_back(symbol(v));
    return out;
  }

  // A view op: its outputs alias the root of input 0. The op's own view
  // function computes the strides and offset on the symbolic input, which
  // carries the root-relative layout.
  std::vector<Tensor> sym_in;
  for (ValueId v : in) sym_in.push_back(v == kNone ? Tensor() : symbol(v));
  std::vector<Tensor> views = op.view(sym_in, resolved);
  const ValueId base = g_.root(in.at(0));
  NodeId n = emit(op, in, resolved, metas);
  std::vector<Tensor> out;
  for (size_t k = 0; k < views.size(); ++k) {
    SAMBA_CHECK(views[k].is_symbolic() && !views[k].has_data(), Status::Internal,
                "tracing: view op '{}' made a copy of a symbolic tensor", op.name);
    Value& val = g_.value(g_.node(n).outputs.at(k));
    val.view_of = base;
    val.strides = views[k].strides();
    val.view_offset = views[k].offset();
    out.push_back(symbol(val.id));
  }
  return out;
}

std::string signature_line(const Graph& g, const Node& n) {
  std::vector<std::string> ins, outs, attrs;
  for (ValueId v : n.inputs) {
    if (v == kNone) {
      ins.push_back("none");
      continue;
    }
    const Value& val = g.value(v);
    // Intermediates are named after nodes, which a re-trace numbers the same
    // way; inputs and parameters carry their sn_names.
    ins.push_back(describe(val));
  }
  for (const auto& [k, v] : n.attrs.items()) attrs.push_back(fmt::format("{}={}", k, attr_value_str(v)));
  for (ValueId v : n.outputs) outs.push_back(fmt::format("{}{}", dtype_name(g.value(v).dtype), dims_str(g.value(v).shape)));
  return fmt::format("{}({}){}{} -> {}", n.op->name, fmt::join(ins, ", "), attrs.empty() ? "" : " ",
                     fmt::join(attrs, " "), fmt::join(outs, ", "));
}

}  // namespace samba::compiler
