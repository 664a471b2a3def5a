#include "compiler/passes/passes.h"

namespace samba::compiler {
namespace {

// The linear epilogue activation a node computes, or "" when it is not one.
std::string epilogue_activation(const Node& n) {
  const std::string& op = n.op->name;
  if (op == "relu" || op == "tanh" || op == "sigmoid") return op;
  if (op == "gelu") return n.attrs.s("approximate") == "tanh" ? "gelu_tanh" : "gelu_erf";
  return "";
}

}  // namespace

Graph fuse_gemm_epilogues(Graph g) {
  const auto readers = g.consumers();
  std::vector<bool> erased(g.nodes.size(), false);
  std::vector<bool> viewed(g.values.size(), false);
  for (const Value& v : g.values)
    if (v.is_view()) viewed[v.view_of] = true;
  for (Node& lin : g.nodes) {
    if (lin.op->name != "linear" || lin.attrs.s("activation") != "none") continue;
    const ValueId y = lin.outputs[0];
    const Value& yv = g.value(y);
    if (yv.is_output || yv.kind != ValueKind::Intermediate || readers[y].size() != 1) continue;
    if (viewed[y]) continue;  // a view of y is another reader
    Node& act = g.node(readers[y][0]);
    const std::string name = epilogue_activation(act);
    if (name.empty() || act.phase != lin.phase || act.inputs.size() != 1 || act.inputs[0] != y ||
        !act.bindings.empty())
      continue;
    // The activation's result now comes straight out of the GEMM.
    lin.attrs.set("activation", name);
    const ValueId z = act.outputs[0];
    lin.outputs[0] = z;
    g.value(z).producer = lin.id;
    g.value(z).producer_output = 0;
    g.value(y).producer = kNone;  // no longer computed or read; erased with the activation
    erased[act.id] = true;
  }
  g.erase_nodes(erased);
  return g;
}

}  // namespace samba::compiler
