// Optimizers as the compiler and the C ABI see them: SGD and AdamW with
// parameter groups. Every fact about a hyperparameter (name, type, default,
// valid range, whether run() may change it) is read from the registry's
// schema of the optimizer's update op (sgd_update, adamw_update) and of
// clip_grad_norm, never restated here. emit_update is the one place a step is
// expressed: traced by emit_optimizer into the OPT section, run at once by
// samba_optimizer_step.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "compiler/trace/tracer.h"

namespace samba::compiler {

enum class OptimizerKind : uint8_t { SGD, AdamW };
std::string_view optimizer_kind_name(OptimizerKind k);  // "sgd", "adamw"
OptimizerKind optimizer_kind_from_name(std::string_view name);  // throws NotFound

// The registry op performing one step of `k` on one parameter.
const OpDef& update_op(OptimizerKind k);

// One hyperparameter of an optimizer: an attribute of its update op, or
// max_grad_norm (clip_grad_norm's max_norm, with no default: no clipping).
// `spec` is the registry's schema: type, range, and AttrRole::Hyperparam for
// the numeric ones that become argins.
struct Hyperparameter {
  std::string name;  // the same at creation and in run()'s hyperparam_dict
  const AttrSpec* spec;
  AttrValue default_value;
};
const std::vector<Hyperparameter>& hyperparameters(OptimizerKind k);

struct ParamGroup {
  std::vector<Tensor> params;
  Attrs hyper;  // overrides of the optimizer's defaults for this group
};

struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::SGD;
  // Prepended to this optimizer's argin names ("" for the first optimizer,
  // "opt<i>." for the others unless set).
  std::string argin_prefix;
  bool prefix_set = false;
  Attrs defaults;  // hyperparameters for every group
  std::vector<ParamGroup> groups;
};

// Every hyperparameter of `kind` with its value: the schema's default,
// overridden by `defaults`, then by `group`. AdamW also accepts the
// deprecated `betas` (two floats) for beta1 and beta2. Throws NotFound for
// an unknown name, InvalidArgument for a value of the wrong type or out of
// the schema's range, or for max_grad_norm in a group (it applies to all of
// the optimizer's gradients together).
Attrs resolve_hyperparameters(OptimizerKind kind, const Attrs& defaults, const Attrs& group);

// The state tensor `name` (an input of the update op: momentum_buffer,
// exp_avg, step, ...) of the parameter being updated, created on first use.
using OptimizerStateFn = std::function<Tensor(const std::string& name, DType dtype, const Dims& shape)>;

// One step of `kind` for `param` with gradient `grad` and resolved
// hyperparameters `hyper`, as a call of the update op: recorded while a
// tracer is active, computed at once otherwise. Asks `state` only for the
// state this configuration uses.
void emit_update(OptimizerKind kind, const Tensor& param, const Tensor& grad, const Attrs& hyper,
                 const OptimizerStateFn& state);

// When `hyper` has max_grad_norm: clips `grads` together, in place
// (clip_grad_norm, as torch.nn.utils.clip_grad_norm_ before the step).
void emit_grad_clip(std::span<const Tensor> grads, const Attrs& hyper);

// Appends this optimizer's nodes to g (whose backward is already built):
// with max_grad_norm a GRADNORM node clipping all of the optimizer's
// gradients, then one update node per parameter. Argin hyperparameters
// become argins with the compiled values as defaults, so run() can change
// them (learning-rate schedules): those of group k > 0 are named
// "<prefix>group<k>.<name>", of group 0 "<prefix><name>". Parameters not
// used by the model (no gradient) are skipped with a log message.
void emit_optimizer(Graph& g, Tracer& tracer, const OptimizerSpec& spec, int index);

}  // namespace samba::compiler
