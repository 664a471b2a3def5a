#include "compiler/optim/optimizer.h"

#include "engine/core/error.h"
#include "engine/core/log.h"

namespace samba::compiler {
namespace {

// Which of the update op's state inputs a configuration uses: SGD keeps a
// momentum buffer (and the step counter that tells its first step) only with
// momentum; AdamW keeps the running maximum only with amsgrad.
bool uses_state(OptimizerKind k, std::string_view state, const Attrs& hyper) {
  if (k == OptimizerKind::SGD) return hyper.f("momentum") != 0;
  return state != "max_exp_avg_sq" || hyper.b("amsgrad");
}

// An argin hyperparameter that decides which state exists cannot change at
// run time: SGD compiled without momentum has no buffer to apply it to.
bool fixed_at_compile_time(OptimizerKind k, std::string_view name, const Attrs& hyper) {
  return k == OptimizerKind::SGD && (name == "momentum" || name == "dampening") && hyper.f("momentum") == 0;
}

}  // namespace

void emit_update(OptimizerKind kind, const Tensor& param, const Tensor& grad, const Attrs& hyper,
                 const OptimizerStateFn& state) {
  const OpDef& op = update_op(kind);
  std::vector<Tensor> inputs = {param, grad};
  // The schema lists the state after param and grad; the step counter is a
  // float32 scalar, every other state is shaped like the parameter.
  for (size_t i = 2; i < op.inputs.size(); ++i) {
    const std::string& name = op.inputs[i].name;
    if (!uses_state(kind, name, hyper))
      inputs.emplace_back();
    else if (name == "step")
      inputs.push_back(state(name, DType::Float32, {}));
    else
      inputs.push_back(state(name, param.dtype(), param.shape()));
  }
  Attrs attrs;
  for (const AttrSpec& a : op.attrs) attrs.set(a.name, *hyper.find(a.name));
  call(op, inputs, attrs);
}

void emit_grad_clip(std::span<const Tensor> grads, const Attrs& hyper) {
  if (!hyper.has("max_grad_norm") || grads.empty()) return;
  call("clip_grad_norm", grads, {{"max_norm", hyper.f("max_grad_norm")}});
}

void emit_optimizer(Graph& g, Tracer& tracer, const OptimizerSpec& spec, int index) {
  const std::string_view kind = optimizer_kind_name(spec.kind);
  const std::string prefix =
      spec.prefix_set ? spec.argin_prefix : (index == 0 ? std::string() : fmt::format("opt{}.", index));
  Tracer::Active active(tracer);

  // The parameters that get a gradient, per group.
  std::vector<std::vector<ValueId>> trained(spec.groups.size());
  std::vector<Tensor> all_grads;
  for (size_t gi = 0; gi < spec.groups.size(); ++gi)
    for (const Tensor& p : spec.groups[gi].params) {
      SAMBA_CHECK(p.defined(), Status::NullPointer, "{} optimizer {}: parameter group {} has a NULL tensor", kind,
                  index, gi);
      const ValueId pv = tracer.value_of(p);
      const Value& val = g.value(pv);
      SAMBA_CHECK(val.kind == ValueKind::Parameter && val.requires_grad, Status::InvalidArgument,
                  "{} optimizer {}: '{}' is not a trainable parameter of the model (it is a {}); "
                  "optimize tensors that require grad",
                  kind, index, val.name, value_kind_name(val.kind));
      if (val.grad == kNone) {
        log::info("{} optimizer {}: parameter '{}' gets no gradient from the model; skipped", kind, index, val.name);
        continue;
      }
      trained[gi].push_back(pv);
      all_grads.push_back(tracer.symbol(val.grad));
    }

  // Clipping takes the norm of all the optimizer's gradients together, in a
  // GRADNORM section before the updates.
  const Attrs defaults = resolve_hyperparameters(spec.kind, spec.defaults, {});
  if (defaults.has("max_grad_norm") && !all_grads.empty()) {
    tracer.set_phase(Phase::GradNorm);
    const size_t before = g.nodes.size();
    emit_grad_clip(all_grads, defaults);
    const std::string argin = prefix + "max_grad_norm";
    g.add_argin({argin, pef::ArginKind::Hyperparam, defaults.f("max_grad_norm")});
    for (size_t i = before; i < g.nodes.size(); ++i) g.nodes[i].bindings.push_back({"max_norm", argin});
  }

  tracer.set_phase(Phase::Optimizer);
  for (size_t gi = 0; gi < spec.groups.size(); ++gi) {
    const Attrs hp = resolve_hyperparameters(spec.kind, spec.defaults, spec.groups[gi].hyper);
    if (trained[gi].empty()) continue;
    const size_t first_update = g.nodes.size();
    for (ValueId pv : trained[gi]) {
      const Value param = g.value(pv);
      emit_update(spec.kind, tracer.symbol(pv), tracer.symbol(param.grad), hp,
                  [&](const std::string& what, DType dt, const Dims& shape) {
                    const ValueId s =
                        g.add_value(fmt::format("{}.{}", param.name, what), dt, shape, ValueKind::OptimizerState);
                    g.value(s).owner = param.name;
                    return tracer.symbol(s);
                  });
    }
    // The update op's argin attributes are bound to argins of the same name.
    const std::string scope = gi == 0 ? prefix : fmt::format("{}group{}.", prefix, gi);
    std::vector<Binding> bindings;
    for (const AttrSpec& a : update_op(spec.kind).attrs) {
      if (a.role != AttrRole::Hyperparam || fixed_at_compile_time(spec.kind, a.name, hp)) continue;
      const std::string argin = scope + a.name;
      g.add_argin({argin, pef::ArginKind::Hyperparam, *hp.find(a.name)});
      bindings.push_back({a.name, argin});
    }
    for (size_t i = first_update; i < g.nodes.size(); ++i)
      g.nodes[i].bindings.insert(g.nodes[i].bindings.end(), bindings.begin(), bindings.end());
  }
  tracer.set_phase(Phase::Forward);
}

}  // namespace samba::compiler
