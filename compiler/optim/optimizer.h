// Optimizers as the compiler sees them: SGD and AdamW with parameter groups.
// emit_optimizer appends the update nodes (one fused registry op per
// parameter: sgd_update, adamw_update) and, for AdamW with max_grad_norm, a
// GRADNORM node clipping all of the optimizer's gradients. Numeric
// hyperparameters become argins with the compiled values as defaults, so
// run() can change them (learning-rate schedules).
#pragma once

#include <string>
#include <vector>

#include "compiler/trace/tracer.h"

namespace samba::compiler {

enum class OptimizerKind : uint8_t { SGD, AdamW };
std::string_view optimizer_kind_name(OptimizerKind k);  // "sgd", "adamw"
OptimizerKind optimizer_kind_from_name(std::string_view name);  // throws NotFound

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

// The hyperparameters an optimizer kind accepts, with their defaults
// (SambaFlow's: AdamW's betas default to (0.9, 0.997)). Throws NotFound for
// an unknown name, InvalidArgument for a bad value.
Attrs resolve_hyperparameters(OptimizerKind kind, const Attrs& defaults, const Attrs& group);

// Appends this optimizer's nodes to g (whose backward is already built). The
// argins of group k > 0 are named "<prefix>group<k>.<name>", of group 0
// "<prefix><name>". Parameters not used by the model (no gradient) are
// skipped with a log message.
void emit_optimizer(Graph& g, Tracer& tracer, const OptimizerSpec& spec, int index);

}  // namespace samba::compiler
