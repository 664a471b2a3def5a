// Optimizers: building them for the compiler, and stepping them eagerly.
#include <cmath>
#include <nlohmann/json.hpp>

#include "bindings/c/capi.h"
#include "engine/ops/autograd.h"

using namespace samba;
using namespace samba::capi;

namespace {

// An eager step: the optimizer's gradients clipped together, then each
// parameter updated, by the same calls the compiler traces.
void step(samba_optimizer* o) {
  const compiler::OptimizerKind kind = o->spec.kind;
  std::vector<Tensor> all_grads;
  for (const auto& group : o->spec.groups)
    for (const Tensor& p : group.params)
      if (p.impl()->grad) all_grads.emplace_back(p.impl()->grad);
  compiler::emit_grad_clip(all_grads, compiler::resolve_hyperparameters(kind, o->spec.defaults, {}));
  for (const auto& group : o->spec.groups) {
    const Attrs hp = compiler::resolve_hyperparameters(kind, o->spec.defaults, group.hyper);
    for (const Tensor& p : group.params) {
      if (!p.impl()->grad) continue;
      auto& state = o->eager_state[p.impl()];
      compiler::emit_update(kind, p, Tensor(p.impl()->grad), hp,
                            [&](const std::string& what, DType dtype, const Dims& shape) {
                              Tensor& t = state[what];
                              if (!t.defined()) t = Tensor::zeros(shape, dtype);
                              return t;
                            });
    }
  }
}

nlohmann::json bound(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

std::string schema_json(compiler::OptimizerKind kind) {
  nlohmann::json out = nlohmann::json::array();
  for (const compiler::Hyperparameter& h : compiler::hyperparameters(kind)) {
    nlohmann::json j = {{"name", h.name}, {"type", std::string(attr_type_name(h.spec->type))}, {"doc", h.spec->doc}};
    add_argin_schema(*h.spec, j);
    if (const double* d = std::get_if<double>(&h.default_value))
      j["default"] = *d;
    else if (const bool* b = std::get_if<bool>(&h.default_value))
      j["default"] = *b;
    else
      j["default"] = nullptr;
    out.push_back(std::move(j));
  }
  return out.dump();
}

}  // namespace

void samba::capi::add_argin_schema(const AttrSpec& a, nlohmann::json& j) {
  j["argin"] = a.role == AttrRole::Hyperparam;
  j["range"] = nullptr;
  if (const auto& r = a.range)
    j["range"] = {{"min", bound(r->min)}, {"max", bound(r->max)}, {"min_open", r->min_open}, {"max_open", r->max_open}};
}

extern "C" {

samba_status samba_optimizer_schema_json(const char* kind, const char** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    require(kind, "kind");
    const compiler::OptimizerKind k = compiler::optimizer_kind_from_name(kind);
    static const std::string sgd = schema_json(compiler::OptimizerKind::SGD);
    static const std::string adamw = schema_json(compiler::OptimizerKind::AdamW);
    *out = (k == compiler::OptimizerKind::SGD ? sgd : adamw).c_str();
  });
}

samba_status samba_optimizer_create(const char* kind, const samba_attrs* defaults, samba_optimizer** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    require(kind, "kind");
    auto o = std::make_unique<samba_optimizer>();
    o->spec.kind = compiler::optimizer_kind_from_name(kind);
    if (defaults) o->spec.defaults = defaults->impl;
    compiler::resolve_hyperparameters(o->spec.kind, o->spec.defaults, {});  // validates
    *out = o.release();
  });
}

void samba_optimizer_release(samba_optimizer* o) { delete o; }

samba_status samba_optimizer_add_param_group(samba_optimizer* o, samba_tensor* const* params, size_t n,
                                             const samba_attrs* hyper) {
  return SAMBA_GUARDED({
    require(o, "opt");
    if (n) require(params, "params");
    compiler::ParamGroup g;
    if (hyper) g.hyper = hyper->impl;
    compiler::resolve_hyperparameters(o->spec.kind, o->spec.defaults, g.hyper);
    for (size_t i = 0; i < n; ++i) {
      SAMBA_CHECK(params[i], Status::NullPointer, "params[{}] is NULL", i);
      const Tensor t = tensor(params[i]);
      SAMBA_CHECK(t.requires_grad() && !t.impl()->grad_fn, Status::InvalidArgument,
                  "params[{}] ('{}', shape {}) is not a trainable parameter: it must be a leaf that "
                  "requires grad",
                  i, t.name(), dims_str(t.shape()));
      for (const auto& other : o->spec.groups)
        for (const Tensor& q : other.params)
          SAMBA_CHECK(q.impl() != t.impl(), Status::InvalidArgument,
                      "params[{}] ('{}') is already in a parameter group of this optimizer", i, t.name());
      for (const Tensor& q : g.params)
        SAMBA_CHECK(q.impl() != t.impl(), Status::InvalidArgument,
                    "params[{}] ('{}') appears twice in the group", i, t.name());
      g.params.push_back(t);
    }
    o->spec.groups.push_back(std::move(g));
  });
}

samba_status samba_optimizer_set_argin_prefix(samba_optimizer* o, const char* prefix) {
  return SAMBA_GUARDED({
    require(o, "opt");
    require(prefix, "prefix");
    o->spec.argin_prefix = prefix;
    o->spec.prefix_set = true;
  });
}

samba_status samba_optimizer_step(samba_session* s, samba_optimizer* o) {
  return SAMBA_GUARDED({
    require(o, "opt");
    autograd::NoGradGuard no_grad;
    // Without a session the calling thread's current pool is kept, as for
    // samba_op_call.
    std::optional<ThreadPool::Scope> pool;
    if (s) pool.emplace(&s->impl.pool());
    step(o);
  });
}

samba_status samba_optimizer_zero_grad(samba_optimizer* o) {
  return SAMBA_GUARDED({
    require(o, "opt");
    for (const auto& g : o->spec.groups)
      for (const Tensor& p : g.params) p.impl()->grad = {};
  });
}

}  // extern "C"
