#include <unordered_set>

#include "compiler/passes/passes.h"
#include "engine/core/error.h"
#include "engine/kernels/conv_geometry.h"
#include "engine/kernels/gemm.h"

namespace samba::compiler {
namespace {

using Readers = std::vector<std::vector<NodeId>>;

// The linear epilogue activation a node computes, or "" when it is not one.
std::string epilogue_activation(const Node& n) {
  for (const ops::EpilogueActivation& e : ops::epilogue_activations())
    if (!e.op.empty() && e.op == n.op->name &&
        (e.approximate.empty() || e.approximate == n.attrs.s("approximate")))
      return std::string(e.name);
  return "";
}

// What the pass sees of the graph before it changes it: who reads each value
// and which values have views (a view is a reader the consumer lists miss).
struct Uses {
  Readers readers;
  std::vector<bool> viewed;

  explicit Uses(const Graph& g) : readers(g.consumers()), viewed(g.values.size(), false) {
    for (const Value& v : g.values)
      if (v.is_view()) viewed[v.view_of] = true;
  }

  // `v` is a result only `reader` sees (no output, view or other reader), so
  // a GEMM may hand it straight to that reader's computation.
  bool only_reader(const Graph& g, ValueId v, const Node& reader) const {
    const Value& val = g.value(v);
    return !val.is_output && val.kind == ValueKind::Intermediate && !viewed[v] &&
           readers[v].size() == 1 && readers[v][0] == reader.id;
  }
};

// Two nodes that may become one kernel: the same step part, and nothing set
// at run time (a binding would have to survive on the fused node).
bool same_step(const Node& a, const Node& b) {
  return a.phase == b.phase && a.bindings.empty() && b.bindings.empty();
}

// `act` is an epilogue activation of exactly `y`.
bool activation_of(const Node& act, ValueId y) {
  return !epilogue_activation(act).empty() && act.inputs.size() == 1 && act.inputs[0] == y;
}

// A product the GEMM epilogue can finish: matmul(x, W) with W a (k, n) matrix,
// or a linear with neither bias nor activation. Float only: integer
// products take a plain loop that has no epilogue.
bool bare_product(const Graph& g, const Node& n) {
  if (n.op->name != "matmul" && n.op->name != "linear") return false;
  const Value& x = g.value(n.inputs[0]);
  if (!is_floating(x.dtype) || x.shape.size() < 2) return false;
  if (n.op->name == "matmul") return g.value(n.inputs[1]).shape.size() == 2;
  return (n.inputs.size() < 3 || n.inputs[2] == kNone) && n.attrs.s("activation") == "none";
}

// The bias `add` adds to the product `y`: its other operand when that is a
// row of y's last dim ([n] or [1, n]) of y's dtype, added as is (alpha 1)
// without changing y's shape or dtype; kNone otherwise.
ValueId bias_added_to(const Graph& g, const Node& add, ValueId y) {
  if (add.op->name != "add" || add.inputs.size() != 2 || add.attrs.f("alpha") != 1.0) return kNone;
  const ValueId b = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
  if (b == y || b == kNone) return kNone;
  const Value &yv = g.value(y), &bv = g.value(b), &sum = g.value(add.outputs[0]);
  const int64_t n = yv.shape.back();
  const bool row = bv.shape == Dims{n} || bv.shape == Dims{1, n};
  return row && bv.dtype == yv.dtype && sum.dtype == yv.dtype && sum.shape == yv.shape ? b : kNone;
}

// Whether a node strictly between `from` and `to` writes `root` in place:
// reading it at `to` instead of `from` would then see other values.
bool written_between(const Graph& g, NodeId from, NodeId to, ValueId root) {
  for (NodeId k = from + 1; k < to; ++k)
    for (ValueId w : g.node(k).mutated())
      if (g.root(w) == root) return true;
  return false;
}

// New nodes are appended to the graph; each must run just before an anchor
// node, and the nodes the rewrite replaced are erased afterwards.
class Rewriter {
 public:
  explicit Rewriter(Graph& g) : g_(g), first_new_(g.nodes.size()), erased_(g.nodes.size(), false) {}

  void erase(NodeId n) { erased_[n] = true; }
  bool erased(NodeId n) const { return erased_[n]; }

  // A node of view op `op` over `of`, placed before `anchor`; returns its value.
  ValueId view(std::string_view op_name, ValueId of, Attrs attrs, Phase phase, NodeId anchor) {
    const OpDef& op = OpRegistry::global().get(op_name);
    attrs = op.resolve(attrs);
    // The tracer's symbolic layout of `of`, so the op's own view function
    // gives the strides and offset in the root's bytes.
    const ValueId root = g_.root(of);
    const DType dtype = g_.value(of).dtype;
    Tensor layout = Tensor::symbolic(g_.value(root).shape, dtype);
    if (const Value& in = g_.value(of); in.is_view())
      layout = layout.as_strided(in.shape, in.strides, in.view_offset);
    const Tensor v = op.view(std::span<const Tensor>(&layout, 1), attrs).at(0);
    const NodeId n = add(op, {of}, std::move(attrs), phase, anchor);
    const ValueId out =
        g_.add_value(fresh_name(g_.node(n).name), dtype, v.shape(), ValueKind::Intermediate);
    Value& val = g_.value(out);  // taken after add_value, which may move the values
    val.view_of = root;
    val.strides = v.strides();
    val.view_offset = v.offset();
    val.producer = n;
    g_.node(n).outputs = {out};
    return out;
  }

  // A linear computing the existing value `out`, placed before `anchor`.
  void linear(std::vector<ValueId> in, Attrs attrs, ValueId out, Phase phase, NodeId anchor) {
    const OpDef& op = OpRegistry::global().get("linear");
    const NodeId n = add(op, std::move(in), op.resolve(attrs), phase, anchor);
    g_.node(n).outputs = {out};
    g_.value(out).producer = n;
    g_.value(out).producer_output = 0;
  }

  // Puts the new nodes before their anchors, keeping their order, and erases
  // the replaced ones with every value nothing reads any more.
  void commit() {
    const size_t old = first_new_;
    std::vector<std::vector<NodeId>> before(old);
    for (size_t k = 0; k < anchor_.size(); ++k)
      before[anchor_[k]].push_back(static_cast<NodeId>(old + k));
    std::vector<NodeId> order;
    for (size_t o = 0; o < old; ++o) {
      order.insert(order.end(), before[o].begin(), before[o].end());
      order.push_back(static_cast<NodeId>(o));
    }
    std::vector<NodeId> new_id(g_.nodes.size());
    std::vector<Node> nodes;
    std::vector<bool> erased;
    for (NodeId id : order) {
      new_id[id] = static_cast<NodeId>(nodes.size());
      erased.push_back(id < static_cast<NodeId>(old) && erased_[id]);
      nodes.push_back(std::move(g_.node(id)));
      nodes.back().id = new_id[id];
    }
    g_.nodes = std::move(nodes);
    for (Value& v : g_.values)
      if (v.producer != kNone) v.producer = new_id[v.producer];
    g_.erase_nodes(erased);
  }

 private:
  NodeId add(const OpDef& op, std::vector<ValueId> in, Attrs attrs, Phase phase, NodeId anchor) {
    anchor_.push_back(anchor);
    return g_.add_node(op, std::move(in), std::move(attrs), phase);
  }

  // Names are the PEF's tensor names, so a new value never takes one in use.
  std::string fresh_name(std::string base) {
    if (names_.empty())
      for (const Value& v : g_.values) names_.insert(v.name);
    std::string name = base;
    for (int k = 1; names_.count(name); ++k) name = fmt::format("{}_{}", base, k);
    names_.insert(name);
    return name;
  }

  Graph& g_;
  size_t first_new_;
  std::vector<bool> erased_;
  std::vector<NodeId> anchor_;
  std::unordered_set<std::string> names_;
};

// add(matmul(x, W), b) and add(linear(x, w), b) become linear(x, w, b), and a
// matmul whose only reader is an epilogue activation a linear, so the second
// step can fold the activation. linear reads its weight as (n, k): W is
// given to it as its transpose, a view the GEMM reads in place (a transpose
// flag), so nothing is copied at run time.
Graph fold_products_into_linears(Graph g) {
  const Uses uses(g);
  Rewriter rw(g);
  const size_t count = g.nodes.size();
  for (size_t i = 0; i < count; ++i) {
    if (!bare_product(g, g.node(static_cast<NodeId>(i)))) continue;
    // Copies: the rewrite appends nodes, which moves the graph's node list.
    const Node prod = g.node(static_cast<NodeId>(i));
    const ValueId y = prod.outputs[0];
    if (uses.readers[y].size() != 1) continue;
    const Node next = g.node(uses.readers[y][0]);
    // An add whose operands are both products fuses with the first only.
    if (!uses.only_reader(g, y, next) || !same_step(prod, next) || rw.erased(next.id)) continue;
    const ValueId x = prod.inputs[0], w = prod.inputs[1];
    const bool is_matmul = prod.op->name == "matmul";
    const ValueId b = bias_added_to(g, next, y);
    if (b != kNone) {
      // The product now runs where the add ran.
      if (written_between(g, prod.id, next.id, g.root(x)) ||
          written_between(g, prod.id, next.id, g.root(w)))
        continue;
      const Phase phase = prod.phase;
      const NodeId at = next.id;
      const ValueId weight = is_matmul ? rw.view("t", w, {}, phase, at) : w;
      const ValueId bias =
          g.value(b).shape.size() == 1
              ? b
              : rw.view("squeeze", b, {{"dim", std::vector<int64_t>{0}}}, phase, at);
      rw.linear({x, weight, bias}, is_matmul ? Attrs{} : prod.attrs, next.outputs[0], phase, at);
      rw.erase(prod.id);
      rw.erase(at);
    } else if (is_matmul && activation_of(next, y)) {
      rw.linear({x, rw.view("t", w, {}, prod.phase, prod.id)}, {}, y, prod.phase, prod.id);
      rw.erase(prod.id);
    }
  }
  rw.commit();
  return g;
}

// An activation that is a linear's only reader runs on each GEMM tile.
Graph fold_activations_into_linears(Graph g) {
  const Uses uses(g);
  std::vector<bool> erased(g.nodes.size(), false);
  for (Node& lin : g.nodes) {
    if (lin.op->name != "linear" || lin.attrs.s("activation") != "none") continue;
    const ValueId y = lin.outputs[0];
    if (uses.readers[y].size() != 1) continue;
    Node& act = g.node(uses.readers[y][0]);
    if (!uses.only_reader(g, y, act) || !same_step(lin, act) || !activation_of(act, y)) continue;
    // The activation's result now comes straight out of the GEMM.
    lin.attrs.set("activation", epilogue_activation(act));
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

// max_pool2d over 2x2 windows with stride 2, no padding, dilation or ceil
// mode: the pooling conv2d_max_pool2d does. The attributes are read as the
// op reads them (one value for both dims, an empty stride the kernel's).
bool pools_2x2(const Node& n) {
  if (n.op->name != "max_pool2d") return false;
  const ops::PoolParams p = ops::pool_params(n.attrs, n.op->name, true);
  auto both = [](ops::HW v, int64_t want) { return v.h == want && v.w == want; };
  return both(p.kernel, 2) && both(p.stride, 2) && both(p.padding, 0) && both(p.dilation, 1) &&
         !p.ceil_mode;
}

// max_pool2d(conv2d(x)) and max_pool2d(relu(conv2d(x))), each value read by
// the next op alone (so never where training keeps them for the backward),
// become one conv2d_max_pool2d: the convolution's blocks are pooled as they
// are stored, and the unpooled values are never written.
Graph fold_pools_into_convolutions(Graph g) {
  const Uses uses(g);
  std::vector<bool> erased(g.nodes.size(), false);
  const OpDef& fused = OpRegistry::global().get("conv2d_max_pool2d");
  for (Node& conv : g.nodes) {
    if (conv.op->name != "conv2d" || g.value(conv.outputs[0]).dtype != DType::Float32) continue;
    // The single reader of v that is an op of `conv`'s step.
    auto next = [&](ValueId v) -> Node* {
      if (uses.readers[v].size() != 1) return nullptr;
      Node& n = g.node(uses.readers[v][0]);
      return uses.only_reader(g, v, n) && same_step(conv, n) && !erased[n.id] ? &n : nullptr;
    };
    const ValueId y = conv.outputs[0];
    Node* relu = next(y);
    if (relu && (relu->op->name != "relu" || relu->inputs.size() != 1)) relu = nullptr;
    Node* pool = next(relu ? relu->outputs[0] : y);
    if (!pool || !pools_2x2(*pool) || pool->outputs.size() != 1) continue;
    Attrs attrs = conv.attrs;
    attrs.set("activation", std::string(relu ? "relu" : "none"));
    conv.op = &fused;
    conv.attrs = fused.resolve(attrs);
    // The pooled result now comes straight out of the convolution.
    const ValueId z = pool->outputs[0];
    conv.outputs[0] = z;
    g.value(z).producer = conv.id;
    g.value(z).producer_output = 0;
    g.value(y).producer = kNone;  // no longer computed or read
    if (relu) {
      g.value(relu->outputs[0]).producer = kNone;
      erased[relu->id] = true;
    }
    erased[pool->id] = true;
  }
  g.erase_nodes(erased);
  return g;
}

}  // namespace

Graph fuse_gemm_epilogues(Graph g) {
  return fold_pools_into_convolutions(
      fold_activations_into_linears(fold_products_into_linears(std::move(g))));
}

}  // namespace samba::compiler
