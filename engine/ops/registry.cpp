#include "engine/ops/registry.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"
#include "engine/ops/autograd.h"

namespace samba {

namespace ops {
void register_all_families(OpRegistry& r);  // generated from engine/ops/*.cpp
}

// ---- schema -----------------------------------------------------------------

std::string_view fusion_name(Fusion f) {
  switch (f) {
    case Fusion::Elementwise: return "elementwise";
    case Fusion::Reduction: return "reduction";
    case Fusion::Contraction: return "contraction";
    case Fusion::View: return "view";
    case Fusion::Creation: return "creation";
    case Fusion::Opaque: return "opaque";
  }
  return "?";
}

const AttrSpec* OpDef::find_attr(std::string_view n) const {
  for (const auto& a : attrs)
    if (a.name == n) return &a;
  return nullptr;
}

// Converts a user value to the schema's type where the meaning is unambiguous.
static AttrValue coerce(const AttrSpec& spec, const AttrValue& v, std::string_view what,
                        std::string_view name) {
  auto bad = [&]() -> AttrValue {
    fail(Status::InvalidArgument, "{} '{}' expects {}, got {} {}", what, name,
         attr_type_name(spec.type), attr_value_kind(v), attr_value_str(v));
  };
  if (std::holds_alternative<std::monostate>(v)) {
    if (spec.optional) return v;
    return bad();
  }
  switch (spec.type) {
    case AttrType::Int:
      if (std::holds_alternative<int64_t>(v)) return v;
      if (auto* b = std::get_if<bool>(&v)) return int64_t{*b};
      if (auto* d = std::get_if<double>(&v)) {
        // -2^63 and 2^63 are exact doubles; every double in between that has
        // no fraction is an int64 exactly.
        SAMBA_CHECK(std::isfinite(*d) && *d == std::trunc(*d) && *d >= -0x1p63 && *d < 0x1p63,
                    Status::InvalidArgument, "{} '{}' must be an integer in [-2^63, 2^63), got {}",
                    what, name, *d);
        return static_cast<int64_t>(*d);
      }
      return bad();
    case AttrType::Float:
      if (std::holds_alternative<double>(v)) return v;
      if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
      return bad();
    case AttrType::Bool:
      if (std::holds_alternative<bool>(v)) return v;
      if (auto* i = std::get_if<int64_t>(&v); i && (*i == 0 || *i == 1)) return *i == 1;
      return bad();
    case AttrType::String:
      if (std::holds_alternative<std::string>(v)) return v;
      return bad();
    case AttrType::Ints:
      if (std::holds_alternative<std::vector<int64_t>>(v)) return v;
      if (auto* i = std::get_if<int64_t>(&v)) return std::vector<int64_t>{*i};
      return bad();
    case AttrType::Floats:
      if (std::holds_alternative<std::vector<double>>(v)) return v;
      if (auto* d = std::get_if<double>(&v)) return std::vector<double>{*d};
      if (auto* i = std::get_if<int64_t>(&v)) return std::vector<double>{static_cast<double>(*i)};
      if (auto* is = std::get_if<std::vector<int64_t>>(&v)) return std::vector<double>(is->begin(), is->end());
      return bad();
    case AttrType::DType:
      if (std::holds_alternative<DType>(v)) return v;
      if (auto* s = std::get_if<std::string>(&v)) {
        if (auto d = dtype_from_name(*s)) return *d;
        fail(Status::InvalidArgument, "{} '{}': unknown dtype name '{}'", what, name, *s);
      }
      if (auto* i = std::get_if<int64_t>(&v)) {
        if (is_valid_dtype(static_cast<int32_t>(*i))) return static_cast<DType>(*i);
        fail(Status::InvalidArgument, "{} '{}': {} is not a dtype code (0..{})", what, name, *i,
             kNumDTypes - 1);
      }
      return bad();
  }
  return bad();
}

AttrValue check_attr_value(const AttrSpec& spec, const AttrValue& v, std::string_view what,
                           std::string_view name) {
  AttrValue value = coerce(spec, v, what, name);
  if (!spec.range) return value;
  const double x = std::holds_alternative<double>(value) ? std::get<double>(value)
                   : std::holds_alternative<int64_t>(value)
                       ? static_cast<double>(std::get<int64_t>(value))
                       : 0.0;
  SAMBA_CHECK(spec.range->contains(x), Status::InvalidArgument, "{} '{}' must be {}, got {}", what,
              name, spec.range->str(), x);
  return value;
}

bool AttrRange::contains(double v) const {
  if (!std::isfinite(v)) return false;  // hyperparameters are finite numbers
  return (min_open ? v > min : v >= min) && (max_open ? v < max : v <= max);
}

std::string AttrRange::str() const {
  const bool low = std::isfinite(min), high = std::isfinite(max);
  if (low && high) return fmt::format("in {}{}, {}{}", min_open ? '(' : '[', min, max, max_open ? ')' : ']');
  if (low) return fmt::format("{} {}", min_open ? ">" : ">=", min);
  if (high) return fmt::format("{} {}", max_open ? "<" : "<=", max);
  return "a number";
}

Attrs OpDef::resolve(const Attrs& given) const {
  for (const auto& [n, v] : given.items()) {
    if (!find_attr(n)) {
      std::vector<std::string> names;
      for (const auto& a : attrs) names.push_back(a.name);
      fail(Status::NotFound, "op '{}' has no attribute '{}'; its attributes are: {}", name, n,
           names.empty() ? std::string("(none)") : fmt::format("{}", fmt::join(names, ", ")));
    }
  }
  Attrs out;
  for (const auto& spec : attrs) {
    const AttrValue* v = given.find(spec.name);
    if (v && !std::holds_alternative<std::monostate>(*v)) {
      try {
        out.set(spec.name, check_attr_value(spec, *v, "attribute", spec.name));
      } catch (const Error& e) {
        throw Error(e.code(), fmt::format("op '{}': {}", name, e.what()));
      }
    } else if (!std::holds_alternative<std::monostate>(spec.default_value) || spec.optional) {
      out.set(spec.name, spec.default_value);
    } else {
      fail(Status::InvalidArgument, "op '{}' requires attribute '{}' ({}){}", name, spec.name,
           attr_type_name(spec.type), spec.doc.empty() ? "" : ": " + spec.doc);
    }
  }
  return out;
}

void OpDef::check_inputs(std::span<const Tensor> in) const {
  size_t fixed = inputs.size();
  bool variadic = !inputs.empty() && inputs.back().variadic;
  if (variadic) --fixed;
  size_t required = 0;
  for (size_t i = 0; i < fixed; ++i)
    if (!inputs[i].optional) required = i + 1;
  SAMBA_CHECK(in.size() >= required && (variadic || in.size() <= fixed), Status::InvalidArgument,
              "op '{}' takes {}{} input{}, got {}: {}", name, variadic ? "at least " : "",
              variadic ? fixed : (required == fixed ? fixed : required), fixed == 1 ? "" : "s",
              in.size(), signature());
  for (size_t i = 0; i < in.size(); ++i) {
    const InputSpec& spec = i < fixed ? inputs[i] : inputs.back();
    SAMBA_CHECK(in[i].defined() || spec.optional, Status::NullPointer,
                "op '{}': input '{}' (#{}) is missing", name, spec.name, i);
  }
}

std::string OpDef::signature() const {
  std::vector<std::string> parts;
  for (const auto& i : inputs)
    parts.push_back(i.variadic ? "*" + i.name : (i.optional ? i.name + "?" : i.name));
  std::vector<std::string> as;
  for (const auto& a : attrs) {
    std::string s = fmt::format("{}: {}", a.name, attr_type_name(a.type));
    if (!std::holds_alternative<std::monostate>(a.default_value))
      s += " = " + attr_value_str(a.default_value);
    else if (a.optional)
      s += " = none";
    as.push_back(std::move(s));
  }
  std::string sig = fmt::format("{}({}", name, fmt::join(parts, ", "));
  if (!as.empty()) sig += fmt::format("{}*, {}", parts.empty() ? "" : ", ", fmt::join(as, ", "));
  return sig + ")";
}

// ---- builder -------------------------------------------------------------------

OpBuilder& OpBuilder::doc(std::string s) { d_.doc = std::move(s); return *this; }
OpBuilder& OpBuilder::input(std::string n, std::string doc) {
  d_.inputs.push_back({std::move(n), std::move(doc)});
  return *this;
}
OpBuilder& OpBuilder::optional_input(std::string n, std::string doc) {
  d_.inputs.push_back({std::move(n), std::move(doc), true});
  return *this;
}
OpBuilder& OpBuilder::variadic_input(std::string n, std::string doc) {
  d_.inputs.push_back({std::move(n), std::move(doc), false, true});
  return *this;
}
OpBuilder& OpBuilder::mutated_input(std::string n, std::string doc) {
  d_.inputs.push_back({std::move(n), std::move(doc), true, false, true});
  return *this;
}
OpBuilder& OpBuilder::variadic_mutated_input(std::string n, std::string doc) {
  d_.inputs.push_back({std::move(n), std::move(doc), false, true, true});
  return *this;
}
OpBuilder& OpBuilder::no_outputs() {
  d_.has_no_outputs = true;
  return *this;
}
OpBuilder& OpBuilder::output(std::string n, std::string doc) {
  d_.outputs.push_back({std::move(n), std::move(doc)});
  return *this;
}
OpBuilder& OpBuilder::variadic_output(std::string n, std::string doc) {
  d_.outputs.push_back({std::move(n), std::move(doc), true});
  return *this;
}
OpBuilder& OpBuilder::attr(std::string n, AttrType t, AttrValue def, std::string doc) {
  d_.attrs.push_back({std::move(n), t, std::move(def), false, std::move(doc)});
  return *this;
}
OpBuilder& OpBuilder::required_attr(std::string n, AttrType t, std::string doc) {
  d_.attrs.push_back({std::move(n), t, std::monostate{}, false, std::move(doc)});
  return *this;
}
OpBuilder& OpBuilder::optional_attr(std::string n, AttrType t, std::string doc) {
  d_.attrs.push_back({std::move(n), t, std::monostate{}, true, std::move(doc)});
  return *this;
}
OpBuilder& OpBuilder::fusion(Fusion f) { d_.fusion = f; return *this; }
OpBuilder& OpBuilder::strided_inputs() { d_.strided_inputs = true; return *this; }
OpBuilder& OpBuilder::seeded() { d_.nondeterministic_seeded = true; return *this; }
OpBuilder& OpBuilder::view_of_contiguous() { d_.view_needs_contiguous = true; return *this; }
OpBuilder& OpBuilder::attr_role(std::string_view name, AttrRole role) {
  for (auto& a : d_.attrs)
    if (a.name == name) {
      a.role = role;
      return *this;
    }
  fail(Status::Internal, "op '{}': attr_role names unknown attribute '{}'", d_.name, name);
}
OpBuilder& OpBuilder::range(std::string_view name, AttrRange range) {
  for (auto& a : d_.attrs)
    if (a.name == name) {
      SAMBA_CHECK(a.type == AttrType::Float || a.type == AttrType::Int, Status::Internal,
                  "op '{}': range given for attribute '{}', which is not a number", d_.name, name);
      a.range = range;
      return *this;
    }
  fail(Status::Internal, "op '{}': range names unknown attribute '{}'", d_.name, name);
}
OpBuilder& OpBuilder::argin(std::string_view name, AttrRange range) {
  attr_role(name, AttrRole::Hyperparam);
  return this->range(name, range);
}
OpBuilder& OpBuilder::flops(FlopsFn f) { d_.flops = std::move(f); return *this; }
OpBuilder& OpBuilder::float32_block(Float32BlockFn f) { d_.float32_block = std::move(f); return *this; }
OpBuilder& OpBuilder::rows_work(RowsWorkFn f) { d_.rows_work = f; return *this; }
OpBuilder& OpBuilder::infer(InferFn f) { d_.infer = std::move(f); return *this; }
OpBuilder& OpBuilder::kernel(KernelFn f) { d_.kernel = std::move(f); return *this; }
OpBuilder& OpBuilder::view(ViewFn f) { d_.view = std::move(f); return *this; }
OpBuilder& OpBuilder::grad(GradFn f) { d_.grad = std::move(f); return *this; }

// ---- registry ------------------------------------------------------------------

const OpRegistry& OpRegistry::global() {
  static const OpRegistry* r = [] {
    auto* reg = new OpRegistry();
    ops::register_all_families(*reg);
    reg->finalize();
    return reg;
  }();
  return *r;
}

OpBuilder OpRegistry::def(std::string name) {
  SAMBA_CHECK(!find(name), Status::Internal, "op '{}' is defined twice", name);
  defs_.push_back(std::make_unique<OpDef>());
  defs_.back()->name = std::move(name);
  by_name_[defs_.back()->name] = defs_.back().get();
  return OpBuilder(*defs_.back());
}

const OpDef* OpRegistry::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

static size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

const OpDef& OpRegistry::get(std::string_view name) const {
  if (const OpDef* d = find(name)) return *d;
  const OpDef* best = nullptr;
  size_t best_d = 3;
  for (const OpDef* d : ordered_) {
    size_t e = edit_distance(name, d->name);
    if (e < best_d) best_d = e, best = d;
  }
  fail(Status::NotFound, "unknown op '{}'{}", name,
       best ? fmt::format("; did you mean '{}'?", best->name) : std::string());
}

void OpRegistry::finalize() {
  ordered_.clear();
  for (const auto& d : defs_) {
    SAMBA_CHECK(!d->has_no_outputs || d->outputs.empty(), Status::Internal,
                "op '{}' declares outputs and no_outputs()", d->name);
    if (d->outputs.empty() && !d->has_no_outputs) d->outputs.push_back({"out", ""});  // one output unless declared
    SAMBA_CHECK(d->infer && (d->kernel || d->view), Status::Internal,
                "op '{}' is incomplete (needs infer and a kernel or a view)", d->name);
    ordered_.push_back(d.get());
  }
  std::sort(ordered_.begin(), ordered_.end(), [](auto* a, auto* b) { return a->name < b->name; });
}

// ---- calling -------------------------------------------------------------------

OpInterceptor*& current_interceptor() {
  thread_local OpInterceptor* t = nullptr;
  return t;
}

// While tracing, an error names the op and the tensors it was given, since
// the model code that called it is not on the engine's side of the boundary.
static std::vector<Tensor> traced_call(OpInterceptor& ic, const OpDef& op, std::span<const Tensor> inputs,
                                       const Attrs& given) {
  try {
    op.check_inputs(inputs);
    Attrs attrs = op.resolve(given);
    std::vector<TensorMeta> metas = op.infer(InferContext{op, inputs, attrs});
    for (const auto& m : metas) check_shape(m.shape);
    return ic.record(op, inputs, attrs, std::move(metas));
  } catch (const Error& e) {
    std::vector<std::string> ins;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::string& in_name = op.inputs.empty() ? std::string("?") : op.inputs[std::min(i, op.inputs.size() - 1)].name;
      const Tensor& t = inputs[i];
      ins.push_back(t.defined() ? fmt::format("{}={}{}{}", in_name, t.name().empty() ? "" : t.name() + ": ",
                                              dtype_name(t.dtype()), dims_str(t.shape()))
                                : fmt::format("{}=none", in_name));
    }
    throw Error(e.code(), fmt::format("while tracing op '{}' with inputs ({}): {}", op.name,
                                      fmt::join(ins, ", "), e.what()));
  }
}

std::vector<Tensor> call(const OpDef& op, std::span<const Tensor> inputs, const Attrs& given) {
  if (OpInterceptor* ic = current_interceptor()) return traced_call(*ic, op, inputs, given);
  op.check_inputs(inputs);
  Attrs attrs = op.resolve(given);
  std::vector<TensorMeta> metas = op.infer(InferContext{op, inputs, attrs});
  for (const auto& m : metas) check_shape(m.shape);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    const std::string& in_name = op.inputs[std::min(i, op.inputs.size() - 1)].name;
    SAMBA_CHECK(!inputs[i].is_symbolic(), Status::InvalidState,
                "op '{}': input '{}' is a symbolic tensor of shape {}; symbolic tensors have no "
                "values and can only be used while tracing a model",
                op.name, in_name, dims_str(inputs[i].shape()));
    inputs[i].materialize();  // a lazy parameter gets its values on first use
    SAMBA_CHECK(inputs[i].has_data(), Status::InvalidState,
                "op '{}': input '{}' ('{}') has no data (it was cleared or never materialized)",
                op.name, in_name, inputs[i].name());
  }
  std::vector<Tensor> outs;
  if (op.view) {
    outs = op.view(inputs, attrs);
  } else {
    outs.reserve(metas.size());
    for (const auto& m : metas) outs.push_back(Tensor::empty(m.shape, m.dtype));
    std::vector<Tensor> contiguous_in;
    std::span<const Tensor> kin = inputs;
    if (!op.strided_inputs) {
      bool all = true;
      for (const auto& t : inputs) all &= !t.defined() || t.is_contiguous();
      if (!all) {
        contiguous_in.reserve(inputs.size());
        for (size_t i = 0; i < inputs.size(); ++i) {
          const Tensor& t = inputs[i];
          const InputSpec& spec = op.inputs[std::min(i, op.inputs.size() - 1)];
          // A copy of an input the op writes in place would lose the update.
          SAMBA_CHECK(!spec.mutated || !t.defined() || t.is_contiguous(), Status::InvalidArgument,
                      "op '{}': input '{}' is updated in place and must be contiguous (strides {})",
                      op.name, spec.name, dims_str(t.strides()));
          contiguous_in.push_back(t.defined() ? t.contiguous() : t);
        }
        kin = contiguous_in;
      }
    }
    KernelContext kc{op, kin, outs, attrs, nullptr};
    op.kernel(kc);
  }
  if (op.grad && autograd::grad_enabled()) autograd::record(op, inputs, attrs, outs);
  return outs;
}

std::vector<Tensor> call(std::string_view op, std::span<const Tensor> inputs, const Attrs& attrs) {
  return call(OpRegistry::global().get(op), inputs, attrs);
}

std::vector<Tensor> call(std::string_view op, std::initializer_list<Tensor> inputs, const Attrs& attrs) {
  return call(OpRegistry::global().get(op), std::span<const Tensor>(inputs.begin(), inputs.size()), attrs);
}

Tensor call1(std::string_view op, std::initializer_list<Tensor> inputs, const Attrs& attrs) {
  auto outs = call(op, inputs, attrs);
  SAMBA_CHECK(outs.size() == 1, Status::Internal, "op '{}' returned {} outputs; expected one", op, outs.size());
  return std::move(outs[0]);
}

}  // namespace samba

namespace samba {

double estimate_flops(const OpDef& op, const InferContext& c, std::span<const TensorMeta> outputs) {
  if (op.flops) return op.flops(c, outputs);
  double out_elems = 0, in_elems = 0;
  for (const auto& m : outputs) out_elems += static_cast<double>(numel_of(m.shape));
  for (const auto& t : c.inputs)
    if (t.defined()) in_elems += static_cast<double>(t.numel());
  switch (op.fusion) {
    case Fusion::Elementwise: return out_elems;
    case Fusion::Reduction: return in_elems;
    case Fusion::View:
    case Fusion::Creation: return 0;
    case Fusion::Contraction:
    case Fusion::Opaque: return std::max(in_elems, out_elems);
  }
  return 0;
}

}  // namespace samba
