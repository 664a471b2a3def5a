#include "compiler/passes/passes.h"
#include "engine/core/error.h"
#include "engine/ops/autograd.h"

namespace samba::compiler {
namespace {

// Larger results stay computed at run time rather than stored in the PEF.
constexpr size_t kMaxFoldedBytes = size_t{1} << 20;

bool foldable(const Graph& g, const Node& n) {
  if (n.outputs.empty() || !n.bindings.empty() || n.op->nondeterministic_seeded ||
      !n.mutated().empty())
    return false;
  for (const AttrSpec& a : n.op->attrs)
    if (a.role != AttrRole::Plain) return false;
  size_t bytes = 0;
  for (ValueId o : n.outputs) {
    const Value& v = g.value(o);
    if (v.kind != ValueKind::Intermediate || v.is_output) return false;
    bytes += static_cast<size_t>(numel_of(v.shape)) * element_size(v.dtype);
  }
  if (bytes > kMaxFoldedBytes) return false;
  for (ValueId in : n.inputs) {
    if (in == kNone) continue;
    const Value& v = g.value(g.root(in));
    if (v.kind != ValueKind::Constant || !v.host.has_data()) return false;
  }
  return true;
}

// The host tensor a constant value (or a view of one) stands for.
Tensor host_value(const Graph& g, ValueId id) {
  const Value& v = g.value(id);
  if (!v.is_view()) return v.host.contiguous();
  const Tensor base = g.value(v.view_of).host.contiguous();
  return base.as_strided(v.shape, v.strides, base.offset() + v.view_offset);
}

}  // namespace

Graph fold_constants(Graph g) {
  autograd::NoGradGuard no_grad;
  std::vector<bool> erased(g.nodes.size(), false);
  for (Node& n : g.nodes) {
    if (!foldable(g, n)) continue;
    std::vector<Tensor> in;
    for (ValueId v : n.inputs) in.push_back(v == kNone ? Tensor() : host_value(g, v));
    std::vector<Tensor> out;
    try {
      out = call(*n.op, in, n.attrs);
    } catch (const Error&) {
      continue;  // left for run time, where the same error surfaces with its context
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      Value& v = g.value(n.outputs[k]);
      v.kind = ValueKind::Constant;
      // The graph's dtype wins: an op on wrapped scalars alone (a backward's
      // `exponent - 1`) computes in the default dtype, while the graph
      // recorded the promoted one, and the PEF must hold what it declares.
      v.host = as_dtype(out[k], v.dtype).clone();
      v.producer = kNone;
      v.view_of = kNone;
      v.strides = contiguous_strides(v.shape);
      v.view_offset = 0;
    }
    erased[n.id] = true;
  }
  g.erase_nodes(erased);
  return g;
}

}  // namespace samba::compiler
