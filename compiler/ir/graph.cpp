#include "compiler/ir/graph.h"

#include "engine/core/error.h"

namespace samba::compiler {

std::string_view value_kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::Input: return "input";
    case ValueKind::Parameter: return "parameter";
    case ValueKind::Buffer: return "buffer";
    case ValueKind::Constant: return "constant";
    case ValueKind::Intermediate: return "intermediate";
    case ValueKind::Gradient: return "gradient";
    case ValueKind::OptimizerState: return "optimizer_state";
    case ValueKind::OutputGrad: return "output_grad";
  }
  return "?";
}

bool is_persistent(ValueKind k) { return k != ValueKind::Intermediate; }

bool is_shared_across_graphs(ValueKind k) {
  return is_persistent(k) && k != ValueKind::OutputGrad && k != ValueKind::Constant;
}

std::string_view phase_name(Phase p) {
  switch (p) {
    case Phase::Forward: return "forward";
    case Phase::Backward: return "backward";
    case Phase::GradNorm: return "gradnorm";
    case Phase::Optimizer: return "optimizer";
    case Phase::ZeroGrad: return "zerograd";
  }
  return "?";
}

std::vector<ValueId> Node::mutated() const {
  std::vector<ValueId> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputSpec& spec = op->inputs[std::min(i, op->inputs.size() - 1)];
    if (spec.mutated && inputs[i] != kNone) out.push_back(inputs[i]);
  }
  return out;
}

ValueId Graph::add_value(std::string vname, DType dtype, Dims shape, ValueKind kind) {
  Value v;
  v.id = static_cast<ValueId>(values.size());
  v.name = std::move(vname);
  v.dtype = dtype;
  v.strides = contiguous_strides(shape);
  v.shape = std::move(shape);
  v.kind = kind;
  values.push_back(std::move(v));
  return values.back().id;
}

NodeId Graph::add_node(const OpDef& op, std::vector<ValueId> in, Attrs attrs, Phase phase) {
  Node n;
  n.id = static_cast<NodeId>(nodes.size());
  n.op = &op;
  n.inputs = std::move(in);
  n.attrs = std::move(attrs);
  n.phase = phase;
  n.name = fmt::format("{}_{}", op.name, name_counter_++);
  nodes.push_back(std::move(n));
  return nodes.back().id;
}

ValueId Graph::root(ValueId id) const {
  const Value& v = value(id);
  return v.is_view() ? v.view_of : id;
}

void Graph::add_argin(ArginSpec a) {
  if (const ArginSpec* have = find_argin(a.name)) {
    SAMBA_CHECK(have->kind == a.kind && have->default_value == a.default_value,
                Status::InvalidArgument,
                "argin '{}' is defined twice with different defaults ({} and {}); give the "
                "optimizers different argin prefixes",
                a.name, attr_value_str(have->default_value), attr_value_str(a.default_value));
    return;
  }
  argins.push_back(std::move(a));
}

const ArginSpec* Graph::find_argin(std::string_view n) const {
  for (const auto& a : argins)
    if (a.name == n) return &a;
  return nullptr;
}

std::vector<std::vector<NodeId>> Graph::consumers() const {
  std::vector<std::vector<NodeId>> out(values.size());
  for (const Node& n : nodes) {
    for (ValueId v : n.inputs)
      if (v != kNone && (out[v].empty() || out[v].back() != n.id)) out[v].push_back(n.id);
  }
  return out;
}

void Graph::erase_nodes(const std::vector<bool>& erased) {
  SAMBA_CHECK(erased.size() == nodes.size(), Status::Internal,
              "graph '{}': {} erase marks for {} nodes", name, erased.size(), nodes.size());
  std::vector<bool> used(values.size(), false);
  auto use = [&](ValueId v) {
    if (v != kNone) used[v] = true;
  };
  for (const Node& n : nodes) {
    if (erased[n.id]) continue;
    for (ValueId v : n.inputs) use(v);
    for (ValueId v : n.outputs) use(v);
  }
  for (const auto* list : {&inputs, &outputs, &parameters, &output_grads})
    for (ValueId v : *list) use(v);
  for (ValueId p : parameters) use(values[p].grad);
  for (const Value& v : values)
    if (used[v.id] && v.is_view()) used[v.view_of] = true;

  std::vector<NodeId> new_node(nodes.size(), kNone);
  std::vector<Node> kept_nodes;
  for (Node& n : nodes)
    if (!erased[n.id]) {
      new_node[n.id] = static_cast<NodeId>(kept_nodes.size());
      kept_nodes.push_back(std::move(n));
    }
  std::vector<ValueId> new_value(values.size(), kNone);
  std::vector<Value> kept_values;
  for (Value& v : values)
    if (used[v.id]) {
      new_value[v.id] = static_cast<ValueId>(kept_values.size());
      if (v.producer != kNone && new_node[v.producer] == kNone)
        fail(Status::Internal, "graph '{}': value '{}' is still used but its producer was erased",
             name, v.name);
      kept_values.push_back(std::move(v));
    }
  auto renumber = [&](ValueId& v) {
    if (v != kNone) v = new_value[v];
  };
  for (Value& v : kept_values) {
    renumber(v.id);
    renumber(v.view_of);
    renumber(v.grad);
    if (v.producer != kNone) v.producer = new_node[v.producer];
  }
  for (Node& n : kept_nodes) {
    n.id = new_node[n.id];
    for (ValueId& v : n.inputs) renumber(v);
    for (ValueId& v : n.outputs) renumber(v);
  }
  for (auto* list : {&inputs, &outputs, &parameters, &output_grads})
    for (ValueId& v : *list) renumber(v);
  nodes = std::move(kept_nodes);
  values = std::move(kept_values);
}

std::string describe(const Value& v) {
  return fmt::format("{}: {}{}", v.name, dtype_name(v.dtype), dims_str(v.shape));
}

void Graph::verify() const {
  std::vector<bool> defined(values.size(), false);
  for (const Value& v : values) {
    if (v.id != static_cast<ValueId>(&v - values.data())) fail(Status::Internal, "graph '{}': value '{}' has id {} at position {}", name, v.name, v.id, &v - values.data());
    if (v.producer == kNone) defined[v.id] = true;
    if (v.is_view()) {
      if (v.view_of < 0 || static_cast<size_t>(v.view_of) >= values.size())
        fail(Status::Internal, "graph '{}': value '{}' is a view of value {} which does not exist", name, v.name, v.view_of);
      if (values[v.view_of].is_view())
        fail(Status::Internal, "graph '{}': value '{}' is a view of '{}', itself a view", name, v.name, values[v.view_of].name);
    }
    if (v.strides.size() != v.shape.size())
      fail(Status::Internal, "graph '{}': value '{}' has {} strides for rank {}", name, v.name, v.strides.size(), v.shape.size());
    if (v.producer != kNone && (v.producer < 0 || static_cast<size_t>(v.producer) >= nodes.size()))
      fail(Status::Internal, "graph '{}': value '{}' records producer {} which does not exist",
           name, v.name, v.producer);
  }
  for (const Node& n : nodes) {
    if (n.id != static_cast<NodeId>(&n - nodes.data()))
      fail(Status::Internal, "graph '{}': node '{}' has id {} at position {}", name, n.name, n.id,
           &n - nodes.data());
    if (!n.op) fail(Status::Internal, "graph '{}': node {} has no op", name, n.id);
    for (ValueId in : n.inputs) {
      if (in == kNone) continue;
      if (in < 0 || static_cast<size_t>(in) >= values.size())
        fail(Status::Internal, "graph '{}': node '{}' reads value {} which does not exist", name, n.name, in);
      if (!defined[in])
        fail(Status::Internal, "graph '{}': node '{}' reads '{}' before it is computed", name, n.name, values[in].name);
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      ValueId o = n.outputs[k];
      if (o < 0 || static_cast<size_t>(o) >= values.size())
        fail(Status::Internal, "graph '{}': node '{}' writes value {} which does not exist", name, n.name, o);
      const Value& v = values[o];
      if (v.producer != n.id || v.producer_output != static_cast<int32_t>(k))
        fail(Status::Internal, "graph '{}': value '{}' is output {} of node '{}' but records producer {} output {}", name,
            v.name, k, n.name, v.producer, v.producer_output);
      if (defined[o]) fail(Status::Internal, "graph '{}': value '{}' is computed twice", name, v.name);
      defined[o] = true;
    }
    for (const Binding& b : n.bindings) {
      if (!n.op->find_attr(b.attr))
        fail(Status::Internal, "graph '{}': node '{}' binds unknown attribute '{}'", name, n.name, b.attr);
      if (!find_argin(b.argin))
        fail(Status::Internal, "graph '{}': node '{}' binds attribute '{}' to unknown argin '{}'", name, n.name, b.attr,
            b.argin);
    }
  }
  for (ValueId o : outputs)
    if (o < 0 || static_cast<size_t>(o) >= values.size() || !defined[o])
      fail(Status::Internal, "graph '{}': output value {} is never computed", name, o);
}

std::string Graph::dump() const {
  std::string out = fmt::format("graph {}\n", name);
  for (const Value& v : values) {
    if (v.producer != kNone) continue;
    out += fmt::format("  {} {}{}\n", value_kind_name(v.kind), describe(v),
                       v.requires_grad ? " requires_grad" : "");
  }
  for (const Node& n : nodes) {
    std::vector<std::string> ins, outs, attrs;
    for (ValueId i : n.inputs) ins.push_back(i == kNone ? "none" : values[i].name);
    for (ValueId o : n.outputs) outs.push_back(describe(values[o]));
    for (const auto& [k, v] : n.attrs.items()) {
      std::string s = fmt::format("{}={}", k, attr_value_str(v));
      for (const Binding& b : n.bindings)
        if (b.attr == k) s += fmt::format("<-{}", b.argin);
      attrs.push_back(std::move(s));
    }
    out += fmt::format("  [{}] {} = {}({}){}{}\n", phase_name(n.phase), fmt::join(outs, ", "), n.op->name,
                       fmt::join(ins, ", "), attrs.empty() ? "" : " ", fmt::join(attrs, " "));
  }
  std::vector<std::string> outs;
  for (ValueId o : outputs) outs.push_back(values[o].name);
  out += fmt::format("  return {}\n", fmt::join(outs, ", "));
  return out;
}

}  // namespace samba::compiler
