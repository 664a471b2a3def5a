#include "compiler/optim/optimizer.h"

#include "engine/core/error.h"
#include "engine/core/log.h"

namespace samba::compiler {
namespace {

struct Hyper {
  const char* name;
  AttrValue default_value;
  bool argin;  // numeric: run() may change it
};

const std::vector<Hyper>& hyperparameters(OptimizerKind k) {
  static const std::vector<Hyper> sgd = {
      {"lr", 1e-3, true},           {"momentum", 0.0, true}, {"dampening", 0.0, true},
      {"weight_decay", 0.0, true},  {"nesterov", false, false}, {"maximize", false, false},
  };
  static const std::vector<Hyper> adamw = {
      {"lr", 1e-3, true},           {"beta1", 0.9, true},       {"beta2", 0.997, true},
      {"eps", 1e-8, true},          {"weight_decay", 1e-2, true}, {"amsgrad", false, false},
      {"maximize", false, false},   {"max_grad_norm", std::monostate{}, true},
  };
  return k == OptimizerKind::SGD ? sgd : adamw;
}

std::vector<std::string> names_of(OptimizerKind k) {
  std::vector<std::string> out;
  for (const Hyper& h : hyperparameters(k)) out.push_back(h.name);
  out.push_back(k == OptimizerKind::AdamW ? "betas" : "");
  if (out.back().empty()) out.pop_back();
  return out;
}

double as_double(const AttrValue& v, std::string_view opt, std::string_view name) {
  if (auto* d = std::get_if<double>(&v)) return *d;
  if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  fail(Status::InvalidArgument, "{}: hyperparameter '{}' must be a number, got {}", opt, name,
       attr_value_str(v));
}

bool as_bool(const AttrValue& v, std::string_view opt, std::string_view name) {
  if (auto* b = std::get_if<bool>(&v)) return *b;
  if (auto* i = std::get_if<int64_t>(&v); i && (*i == 0 || *i == 1)) return *i == 1;
  fail(Status::InvalidArgument, "{}: hyperparameter '{}' must be a bool, got {}", opt, name,
       attr_value_str(v));
}

void apply(OptimizerKind kind, const Attrs& given, Attrs& out) {
  const std::string_view opt = optimizer_kind_name(kind);
  for (const auto& [name, value] : given.items()) {
    if (kind == OptimizerKind::AdamW && name == "betas") {
      const auto* betas = std::get_if<std::vector<double>>(&value);
      SAMBA_CHECK(betas && betas->size() == 2, Status::InvalidArgument,
                  "adamw: 'betas' must be two floats, got {}", attr_value_str(value));
      out.set("beta1", (*betas)[0]);
      out.set("beta2", (*betas)[1]);
      continue;
    }
    const Hyper* h = nullptr;
    for (const Hyper& x : hyperparameters(kind))
      if (name == x.name) h = &x;
    SAMBA_CHECK(h, Status::NotFound, "{}: unknown hyperparameter '{}'; {} takes: {}", opt, name, opt,
                fmt::join(names_of(kind), ", "));
    if (std::holds_alternative<bool>(h->default_value))
      out.set(name, as_bool(value, opt, name));
    else
      out.set(name, as_double(value, opt, name));
  }
}

void check_range(const Attrs& a, OptimizerKind kind) {
  const std::string_view opt = optimizer_kind_name(kind);
  auto nonneg = [&](const char* n) {
    SAMBA_CHECK(a.f(n) >= 0, Status::InvalidArgument, "{}: {} must be >= 0, got {}", opt, n, a.f(n));
  };
  nonneg("lr");
  nonneg("weight_decay");
  if (kind == OptimizerKind::SGD) {
    nonneg("momentum");
    SAMBA_CHECK(!a.b("nesterov") || (a.f("momentum") > 0 && a.f("dampening") == 0),
                Status::InvalidArgument,
                "sgd: nesterov momentum requires momentum > 0 and dampening 0 (got momentum {}, "
                "dampening {})",
                a.f("momentum"), a.f("dampening"));
  } else {
    for (const char* b : {"beta1", "beta2"})
      SAMBA_CHECK(a.f(b) >= 0 && a.f(b) < 1, Status::InvalidArgument,
                  "adamw: {} must be in [0, 1), got {}", b, a.f(b));
    SAMBA_CHECK(a.f("eps") > 0, Status::InvalidArgument, "adamw: eps must be > 0, got {}", a.f("eps"));
    if (a.has("max_grad_norm"))
      SAMBA_CHECK(a.f("max_grad_norm") > 0, Status::InvalidArgument,
                  "adamw: max_grad_norm must be > 0, got {}", a.f("max_grad_norm"));
  }
}

}  // namespace

std::string_view optimizer_kind_name(OptimizerKind k) {
  return k == OptimizerKind::SGD ? "sgd" : "adamw";
}

OptimizerKind optimizer_kind_from_name(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "sgd") return OptimizerKind::SGD;
  if (lower == "adamw") return OptimizerKind::AdamW;
  fail(Status::NotFound, "unknown optimizer '{}'; expected 'sgd' or 'adamw'", name);
}

Attrs resolve_hyperparameters(OptimizerKind kind, const Attrs& defaults, const Attrs& group) {
  Attrs out;
  for (const Hyper& h : hyperparameters(kind)) out.set(h.name, h.default_value);
  apply(kind, defaults, out);
  apply(kind, group, out);
  check_range(out, kind);
  return out;
}

void emit_optimizer(Graph& g, Tracer& tracer, const OptimizerSpec& spec, int index) {
  const std::string_view kind = optimizer_kind_name(spec.kind);
  const std::string prefix =
      spec.prefix_set ? spec.argin_prefix : (index == 0 ? std::string() : fmt::format("opt{}.", index));
  Tracer::Active active(tracer);

  // Gradient clipping (AdamW's max_grad_norm) takes the norm of all the
  // optimizer's gradients together, in a GRADNORM section before the updates.
  const Attrs defaults = resolve_hyperparameters(spec.kind, spec.defaults, {});
  for (const ParamGroup& group : spec.groups)
    SAMBA_CHECK(!group.hyper.has("max_grad_norm"), Status::InvalidArgument,
                "{} optimizer {}: max_grad_norm applies to all of the optimizer's gradients; set it in the "
                "optimizer's defaults, not in a parameter group",
                kind, index);
  if (spec.kind == OptimizerKind::AdamW && defaults.has("max_grad_norm")) {
    std::vector<Tensor> gs;
    for (const ParamGroup& group : spec.groups)
      for (const Tensor& p : group.params) {
        if (!p.defined()) continue;
        const ValueId pv = tracer.value_of(p);
        if (g.value(pv).grad != kNone) gs.push_back(tracer.symbol(g.value(pv).grad));
      }
    if (!gs.empty()) {
      tracer.set_phase(Phase::GradNorm);
      const size_t before = g.nodes.size();
      call("clip_grad_norm", gs, {{"max_norm", defaults.f("max_grad_norm")}});
      const std::string argin = prefix + "max_grad_norm";
      g.add_argin({argin, pef::ArginKind::Hyperparam, defaults.f("max_grad_norm")});
      for (size_t i = before; i < g.nodes.size(); ++i) g.nodes[i].bindings.push_back({"max_norm", argin});
    }
  }

  for (size_t gi = 0; gi < spec.groups.size(); ++gi) {
    const ParamGroup& group = spec.groups[gi];
    const Attrs hp = resolve_hyperparameters(spec.kind, spec.defaults, group.hyper);
    const std::string scope = gi == 0 ? prefix : fmt::format("{}group{}.", prefix, gi);

    // Numeric hyperparameters become argins; the op's attribute of the same
    // name is bound to it.
    std::vector<Binding> bindings;
    auto bind = [&](const char* name) {
      const std::string argin = scope + name;
      g.add_argin({argin, pef::ArginKind::Hyperparam, hp.find(name) ? *hp.find(name) : AttrValue{}});
      bindings.push_back({name, argin});
    };
    std::vector<std::pair<ValueId, ValueId>> updates;  // (param, gradient)
    for (const Tensor& p : group.params) {
      SAMBA_CHECK(p.defined(), Status::NullPointer, "{} optimizer {}: parameter group {} has a NULL tensor",
                  kind, index, gi);
      const ValueId pv = tracer.value_of(p);
      const Value& val = g.value(pv);
      SAMBA_CHECK(val.kind == ValueKind::Parameter && val.requires_grad, Status::InvalidArgument,
                  "{} optimizer {}: '{}' is not a trainable parameter of the model (it is a {}); "
                  "optimize tensors that require grad",
                  kind, index, val.name, value_kind_name(val.kind));
      if (val.grad == kNone) {
        log::info("{} optimizer {}: parameter '{}' gets no gradient from the model; skipped", kind,
                  index, val.name);
        continue;
      }
      updates.emplace_back(pv, val.grad);
    }
    if (updates.empty()) continue;

    tracer.set_phase(Phase::Optimizer);
    const size_t first_update = g.nodes.size();
    for (auto [pv, gv] : updates) {
      const Value param = g.value(pv);
      auto state = [&](const char* what, DType dt, Dims shape) {
        ValueId s = g.add_value(fmt::format("{}.{}", param.name, what), dt, std::move(shape),
                                ValueKind::OptimizerState);
        g.value(s).owner = param.name;
        return tracer.symbol(s);
      };
      const Tensor P = tracer.symbol(pv), G = tracer.symbol(gv);
      if (spec.kind == OptimizerKind::SGD) {
        Tensor buf, step;
        if (hp.f("momentum") != 0) {
          buf = state("momentum_buffer", param.dtype, param.shape);
          step = state("step", DType::Float32, {});
        }
        call("sgd_update", {P, G, buf, step},
             {{"lr", hp.f("lr")}, {"momentum", hp.f("momentum")}, {"dampening", hp.f("dampening")},
              {"weight_decay", hp.f("weight_decay")}, {"nesterov", hp.b("nesterov")},
              {"maximize", hp.b("maximize")}});
      } else {
        const Tensor m = state("exp_avg", param.dtype, param.shape);
        const Tensor v = state("exp_avg_sq", param.dtype, param.shape);
        const Tensor vmax = hp.b("amsgrad") ? state("max_exp_avg_sq", param.dtype, param.shape) : Tensor();
        const Tensor step = state("step", DType::Float32, {});
        call("adamw_update", {P, G, m, v, vmax, step},
             {{"lr", hp.f("lr")}, {"beta1", hp.f("beta1")}, {"beta2", hp.f("beta2")},
              {"eps", hp.f("eps")}, {"weight_decay", hp.f("weight_decay")},
              {"amsgrad", hp.b("amsgrad")}, {"maximize", hp.b("maximize")}});
      }
    }
    if (spec.kind == OptimizerKind::SGD) {
      bind("lr");
      if (hp.f("momentum") != 0) bind("momentum"), bind("dampening");
      bind("weight_decay");
    } else {
      for (const char* n : {"lr", "beta1", "beta2", "eps", "weight_decay"}) bind(n);
    }
    for (size_t i = first_update; i < g.nodes.size(); ++i)
      g.nodes[i].bindings.insert(g.nodes[i].bindings.end(), bindings.begin(), bindings.end());
  }
  tracer.set_phase(Phase::Forward);
}

}  // namespace samba::compiler
