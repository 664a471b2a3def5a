// Optimizer hyperparameters, read from the registry's schemas.
#include <cctype>

#include "compiler/optim/optimizer.h"
#include "engine/core/error.h"

namespace samba::compiler {
namespace {

std::vector<Hyperparameter> read_schema(OptimizerKind k) {
  std::vector<Hyperparameter> out;
  for (const AttrSpec& a : update_op(k).attrs) out.push_back({a.name, &a, a.default_value});
  const AttrSpec* max_norm = OpRegistry::global().get("clip_grad_norm").find_attr("max_norm");
  out.push_back({"max_grad_norm", max_norm, std::monostate{}});
  return out;
}

const Hyperparameter* find(OptimizerKind k, std::string_view name) {
  for (const Hyperparameter& h : hyperparameters(k))
    if (h.name == name) return &h;
  return nullptr;
}

// The registry's check, so a value refused at run time (run, set_argin) is
// refused here too, with the same words.
AttrValue typed_value(const Hyperparameter& h, const AttrValue& v, std::string_view opt) {
  try {
    return check_attr_value(*h.spec, v, "hyperparameter", h.name);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: {}", opt, e.what()));
  }
}

void apply(OptimizerKind kind, const Attrs& given, Attrs& out) {
  const std::string_view opt = optimizer_kind_name(kind);
  for (const auto& [name, value] : given.items()) {
    // Deprecated: the creation-time spelling of beta1/beta2 before both
    // creation and run() used the argin names. Still accepted.
    if (kind == OptimizerKind::AdamW && name == "betas") {
      const auto* betas = std::get_if<std::vector<double>>(&value);
      SAMBA_CHECK(betas && betas->size() == 2, Status::InvalidArgument, "adamw: 'betas' must be two floats, got {}",
                  attr_value_str(value));
      out.set("beta1", typed_value(*find(kind, "beta1"), (*betas)[0], opt));
      out.set("beta2", typed_value(*find(kind, "beta2"), (*betas)[1], opt));
      continue;
    }
    const Hyperparameter* h = find(kind, name);
    if (!h) {
      std::vector<std::string_view> names;
      for (const Hyperparameter& x : hyperparameters(kind)) names.push_back(x.name);
      fail(Status::NotFound, "{}: unknown hyperparameter '{}'; {} takes: {}", opt, name, opt, fmt::join(names, ", "));
    }
    out.set(name, typed_value(*h, value, opt));
  }
}

}  // namespace

std::string_view optimizer_kind_name(OptimizerKind k) { return k == OptimizerKind::SGD ? "sgd" : "adamw"; }

OptimizerKind optimizer_kind_from_name(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "sgd") return OptimizerKind::SGD;
  if (lower == "adamw") return OptimizerKind::AdamW;
  fail(Status::NotFound, "unknown optimizer '{}'; expected 'sgd' or 'adamw'", name);
}

const OpDef& update_op(OptimizerKind k) {
  return OpRegistry::global().get(k == OptimizerKind::SGD ? "sgd_update" : "adamw_update");
}

const std::vector<Hyperparameter>& hyperparameters(OptimizerKind k) {
  static const std::vector<Hyperparameter> sgd = read_schema(OptimizerKind::SGD);
  static const std::vector<Hyperparameter> adamw = read_schema(OptimizerKind::AdamW);
  return k == OptimizerKind::SGD ? sgd : adamw;
}

Attrs resolve_hyperparameters(OptimizerKind kind, const Attrs& defaults, const Attrs& group) {
  SAMBA_CHECK(!group.has("max_grad_norm"), Status::InvalidArgument,
              "{}: max_grad_norm applies to all of the optimizer's gradients; set it in the optimizer's defaults, "
              "not in a parameter group",
              optimizer_kind_name(kind));
  Attrs out;
  for (const Hyperparameter& h : hyperparameters(kind)) out.set(h.name, h.default_value);
  apply(kind, defaults, out);
  apply(kind, group, out);
  return out;
}

}  // namespace samba::compiler
