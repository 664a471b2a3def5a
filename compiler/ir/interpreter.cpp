#include "compiler/ir/interpreter.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/ops/autograd.h"

namespace samba::compiler {

void interpret(const Graph& g, std::vector<Tensor>& values, std::initializer_list<Phase> phases) {
  autograd::NoGradGuard no_grad;
  values.resize(g.values.size());
  for (const Value& v : g.values) {
    if (values[v.id].defined() || v.producer != kNone || v.is_view()) continue;
    if ((v.kind == ValueKind::Constant || v.kind == ValueKind::OutputGrad) && v.host.defined())
      values[v.id] = v.host.clone();
    else if (v.kind == ValueKind::Gradient || v.kind == ValueKind::OptimizerState || v.kind == ValueKind::OutputGrad)
      values[v.id] = Tensor::zeros(v.shape, v.dtype);  // the device starts them at zero too
  }
  for (const Node& n : g.nodes) {
    if (std::find(phases.begin(), phases.end(), n.phase) == phases.end()) continue;
    std::vector<Tensor> in;
    for (ValueId v : n.inputs) {
      if (v == kNone) {
        in.emplace_back();
        continue;
      }
      SAMBA_CHECK(values[v].defined(), Status::InvalidState,
                  "interpret: node '{}' reads '{}', which has no value", n.name, g.value(v).name);
      in.push_back(values[v]);
    }
    std::vector<Tensor> out = call(*n.op, in, n.attrs);
    for (size_t k = 0; k < n.outputs.size(); ++k) values[n.outputs[k]] = out.at(k);
  }
}

}  // namespace samba::compiler
