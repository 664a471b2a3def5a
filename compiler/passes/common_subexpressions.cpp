#include <cstring>
#include <unordered_map>

#include "compiler/passes/passes.h"
#include "engine/core/error.h"

namespace samba::compiler {
namespace {

// Constants up to this size are compared byte for byte and merged.
constexpr size_t kMergeableConstantBytes = 4096;

std::string constant_key(const Value& v) {
  const Tensor c = v.host.contiguous();
  std::string key = fmt::format("{}{}:", dtype_name(v.dtype), dims_str(v.shape));
  key.append(static_cast<const char*>(c.raw_data()), c.nbytes());
  return key;
}

// Replaces every use of value `from` (node inputs, graph outputs) with `to`.
void replace_uses(Graph& g, ValueId from, ValueId to) {
  for (Node& n : g.nodes)
    for (ValueId& v : n.inputs)
      if (v == from) v = to;
  for (ValueId& v : g.outputs)
    if (v == from) v = to;
}

}  // namespace

Graph eliminate_common_subexpressions(Graph g) {
  // Identical small constants first, so nodes reading them compare equal.
  std::unordered_map<std::string, ValueId> constants;
  std::vector<ValueId> alias(g.values.size(), kNone);
  for (const Value& v : g.values) {
    if (v.kind != ValueKind::Constant || v.producer != kNone || !v.host.has_data() ||
        v.host.nbytes() > kMergeableConstantBytes)
      continue;
    auto [it, fresh] = constants.emplace(constant_key(v), v.id);
    if (!fresh) alias[v.id] = it->second;
  }
  for (Node& n : g.nodes)
    for (ValueId& in : n.inputs)
      if (in != kNone && alias[in] != kNone) in = alias[in];

  std::vector<int32_t> version(g.values.size(), 0);
  std::vector<bool> erased(g.nodes.size(), false);
  std::unordered_map<std::string, NodeId> seen;
  for (Node& n : g.nodes) {
    const std::vector<ValueId> writes = n.mutated();
    bool mergeable = writes.empty() && !n.outputs.empty();
    for (ValueId o : n.outputs) mergeable &= g.value(o).kind == ValueKind::Intermediate;
    if (mergeable) {
      std::string key = n.op->name;
      for (ValueId in : n.inputs)
        key += in == kNone ? std::string("|-") : fmt::format("|{}@{}", in, version[g.root(in)]);
      for (const auto& [k, v] : n.attrs.items()) key += fmt::format("|{}={}", k, attr_value_str(v));
      for (const Binding& b : n.bindings) key += fmt::format("|{}<-{}", b.attr, b.argin);
      auto [it, fresh] = seen.emplace(std::move(key), n.id);
      if (!fresh) {
        const Node& first = g.node(it->second);
        for (size_t k = 0; k < n.outputs.size(); ++k) {
          Value& dup = g.value(n.outputs[k]);
          const ValueId keep = first.outputs[k];
          if (dup.is_output) g.value(keep).is_output = true;
          replace_uses(g, dup.id, keep);
          // Views of the duplicate now view the kept value's bytes.
          for (Value& v : g.values)
            if (v.view_of == dup.id) v.view_of = g.root(keep);
        }
        erased[n.id] = true;
        continue;
      }
    }
    for (ValueId w : writes) ++version[g.root(w)];
  }
  g.erase_nodes(erased);
  return g;
}

}  // namespace samba::compiler
