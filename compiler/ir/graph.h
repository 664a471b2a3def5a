// The compiler's IR: a graph of registry op nodes over values. A node's
// meaning comes only from its op in the registry (engine/ops); the IR adds
// no semantics of its own. Nodes are kept in an order that is valid to run
// sequentially (trace order, then the backward and update nodes appended), so
// passes that only delete or merge nodes never need to sort. Every node in
// the graph runs: a pass that removes nodes erases them (erase_nodes), so
// nothing downstream has to skip any.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/ops/registry.h"
#include "engine/pef/program.h"

namespace samba::compiler {

using ValueId = int32_t;
using NodeId = int32_t;
inline constexpr int32_t kNone = -1;

// What a value is to the program; persistent kinds keep their bytes between
// runs (see pef::TensorRole).
enum class ValueKind : uint8_t {
  Input,
  Parameter,
  Buffer,
  Constant,
  Intermediate,
  Gradient,
  OptimizerState,
  OutputGrad,
};
std::string_view value_kind_name(ValueKind k);
bool is_persistent(ValueKind k);
// Whether values of this kind with the same name are one tensor in every
// graph of a multigraph program: the app's named state and inputs are; an
// output's gradient belongs to its graph, and a constant's name is the
// tracer's (const_0, ...), so two graphs' constants are unrelated.
bool is_shared_across_graphs(ValueKind k);

// Which part of a training step a node belongs to; sections are cut by phase.
enum class Phase : uint8_t { Forward, Backward, GradNorm, Optimizer, ZeroGrad };
std::string_view phase_name(Phase p);

struct Value {
  ValueId id = kNone;
  std::string name;
  DType dtype = DType::Float32;
  Dims shape;
  ValueKind kind = ValueKind::Intermediate;

  NodeId producer = kNone;  // the node computing it; kNone for graph-level values
  int32_t producer_output = 0;

  // A view (output of a View op) shares the bytes of `view_of`, a value that
  // is not a view; strides and offset (elements) place it in those bytes.
  ValueId view_of = kNone;
  Dims strides;
  int64_t view_offset = 0;

  Tensor host;  // Parameter/Buffer/Constant: the host tensor (may have no data)
  std::string region;
  std::optional<pef::MemType> mem;  // requested memory type; the planner decides otherwise
  int32_t batch_dim = -1;
  bool requires_grad = false;
  ValueId grad = kNone;  // Parameter: its Gradient value
  std::string owner;     // OptimizerState/Gradient: the parameter's name
  std::optional<pef::MaterializerDesc> materializer;
  bool is_output = false;  // returned by the model

  bool is_view() const { return view_of != kNone; }
};

// An attribute whose value comes from an argin at run time.
struct Binding {
  std::string attr;
  std::string argin;
};

struct Node {
  NodeId id = kNone;
  const OpDef* op = nullptr;
  std::vector<ValueId> inputs;  // kNone for an absent optional input
  std::vector<ValueId> outputs;
  Attrs attrs;  // resolved against the op's schema
  std::vector<Binding> bindings;
  Phase phase = Phase::Forward;
  std::string name;  // unique, "<op>_<n>"

  // Values this node writes in place (its op's mutated inputs).
  std::vector<ValueId> mutated() const;
};

struct ArginSpec {
  std::string name;
  pef::ArginKind kind = pef::ArginKind::Hyperparam;
  AttrValue default_value;
};

class Graph {
 public:
  std::string name;
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  std::vector<ValueId> parameters;
  std::vector<ValueId> output_grads;  // per output: its OutputGrad value or kNone
  std::vector<ArginSpec> argins;

  ValueId add_value(std::string name, DType dtype, Dims shape, ValueKind kind);
  NodeId add_node(const OpDef& op, std::vector<ValueId> inputs, Attrs attrs, Phase phase);

  Value& value(ValueId id) { return values.at(static_cast<size_t>(id)); }
  const Value& value(ValueId id) const { return values.at(static_cast<size_t>(id)); }
  Node& node(NodeId id) { return nodes.at(static_cast<size_t>(id)); }
  const Node& node(NodeId id) const { return nodes.at(static_cast<size_t>(id)); }

  // The value whose bytes `id` uses (itself unless it is a view).
  ValueId root(ValueId id) const;
  // Adds an argin, or checks that an existing one of that name agrees.
  void add_argin(ArginSpec a);
  const ArginSpec* find_argin(std::string_view name) const;

  // Nodes reading each value, in node order.
  std::vector<std::vector<NodeId>> consumers() const;

  // Removes the nodes marked in `erased` (indexed by node id) and then every
  // value nothing uses any more (no node reads or writes it, it is not part
  // of the graph's interface, no kept view looks into it), renumbering nodes
  // and values in their order. A kept value whose producer is erased is a
  // pass bug: throws Status::Internal naming it.
  void erase_nodes(const std::vector<bool>& erased);

  // Checks the graph's invariants (every reference in range, inputs defined
  // before use, outputs produced once, views pointing at non-views, bindings
  // naming real attributes and argins); throws Status::Internal naming the
  // node or value at fault.
  void verify() const;
  // A readable listing: values with their kinds, then one line per node.
  std::string dump() const;

 private:
  int32_t name_counter_ = 0;
};

// "name: float32[64, 784]" for messages and dumps.
std::string describe(const Value& v);

}  // namespace samba::compiler
