// Optimizers: building them for the compiler, and stepping them eagerly.
#include "bindings/c/capi.h"
#include "engine/ops/autograd.h"

using namespace samba;
using namespace samba::capi;

namespace {

// The host state of one parameter for eager steps, created at its first step.
std::vector<Tensor>& eager_state(samba_optimizer* o, const Tensor& p, const Attrs& hp) {
  auto& st = o->eager_state[p.impl()];
  if (!st.empty()) return st;
  auto zeros = [&](const Dims& shape, DType dt) { return Tensor::zeros(shape, dt); };
  if (o->spec.kind == compiler::OptimizerKind::SGD) {
    if (hp.f("momentum") != 0) st = {zeros(p.shape(), p.dtype()), zeros({}, DType::Float32)};
  } else {
    st = {zeros(p.shape(), p.dtype()), zeros(p.shape(), p.dtype()),
          hp.b("amsgrad") ? zeros(p.shape(), p.dtype()) : Tensor(), zeros({}, DType::Float32)};
  }
  return st;
}

void step_group(samba_session* s, samba_optimizer* o, const compiler::ParamGroup& group) {
  const Attrs hp = compiler::resolve_hyperparameters(o->spec.kind, o->spec.defaults, group.hyper);
  std::vector<Tensor> with_grad, grads;
  for (const Tensor& p : group.params)
    if (p.impl()->grad) {
      with_grad.push_back(p);
      grads.push_back(Tensor(p.impl()->grad));
    }
  if (with_grad.empty()) return;
  if (o->spec.kind == compiler::OptimizerKind::AdamW && hp.has("max_grad_norm"))
    run_op(s, OpRegistry::global().get("clip_grad_norm"), grads, {{"max_norm", hp.f("max_grad_norm")}});
  for (size_t i = 0; i < with_grad.size(); ++i) {
    const Tensor& p = with_grad[i];
    std::vector<Tensor>& st = eager_state(o, p, hp);
    if (o->spec.kind == compiler::OptimizerKind::SGD) {
      std::vector<Tensor> in = {p, grads[i]};
      in.insert(in.end(), st.begin(), st.end());
      run_op(s, OpRegistry::global().get("sgd_update"), in,
             {{"lr", hp.f("lr")}, {"momentum", hp.f("momentum")}, {"dampening", hp.f("dampening")},
              {"weight_decay", hp.f("weight_decay")}, {"nesterov", hp.b("nesterov")},
              {"maximize", hp.b("maximize")}});
    } else {
      run_op(s, OpRegistry::global().get("adamw_update"), {{p, grads[i], st[0], st[1], st[2], st[3]}},
             {{"lr", hp.f("lr")}, {"beta1", hp.f("beta1")}, {"beta2", hp.f("beta2")}, {"eps", hp.f("eps")},
              {"weight_decay", hp.f("weight_decay")}, {"amsgrad", hp.b("amsgrad")},
              {"maximize", hp.b("maximize")}});
    }
  }
}

}  // namespace

extern "C" {

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
    for (const auto& g : o->spec.groups) step_group(s, o, g);
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
