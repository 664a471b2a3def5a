#include "compiler/passes/passes.h"

namespace samba::compiler {

Graph eliminate_dead_code(Graph g) {
  std::vector<bool> used(g.values.size(), false), erased(g.nodes.size(), false);
  for (ValueId o : g.outputs) used[o] = true;
  // Walking backwards, a node stays when it has an effect or a kept reader.
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    bool keep = !n.mutated().empty() || n.outputs.empty();
    for (ValueId o : n.outputs) {
      const Value& v = g.value(o);
      keep |= used[o] || is_persistent(v.kind) || v.is_output;
    }
    if (!keep) {
      erased[i] = true;
      continue;
    }
    for (ValueId in : n.inputs) {
      if (in == kNone) continue;
      used[in] = true;
      used[g.root(in)] = true;
    }
  }
  g.erase_nodes(erased);
  return g;
}

}  // namespace samba::compiler
