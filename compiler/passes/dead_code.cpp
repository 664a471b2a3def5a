#include "compiler/passes/passes.h"

namespace samba::compiler {

void replace_uses(Graph& g, ValueId from, ValueId to) {
  for (Node& n : g.nodes)
    for (ValueId& v : n.inputs)
      if (v == from) v = to;
  for (ValueId& v : g.outputs)
    if (v == from) v = to;
}

void eliminate_dead_code(Graph& g) {
  std::vector<bool> used(g.values.size(), false);
  for (ValueId o : g.outputs) used[o] = true;
  // Walking backwards, a node is live when it has an effect or a live reader.
  for (size_t i = g.nodes.size(); i-- > 0;) {
    Node& n = g.nodes[i];
    if (n.dead) continue;
    bool live = !n.mutated().empty() || n.outputs.empty();
    for (ValueId o : n.outputs) {
      const Value& v = g.value(o);
      live |= used[o] || is_persistent(v.kind) || v.is_output;
    }
    if (!live) {
      n.dead = true;
      continue;
    }
    for (ValueId in : n.inputs) {
      if (in == kNone) continue;
      used[in] = true;
      used[g.root(in)] = true;
    }
  }
}

}  // namespace samba::compiler
