#include "engine/ops/autograd.h"

#include <unordered_map>

#include "engine/core/error.h"

namespace samba::autograd {
namespace {

thread_local bool t_grad_enabled = true;

bool wants_grad(const Tensor& t) {
  return t.defined() && t.requires_grad() && is_floating(t.dtype());
}

// Adds `g` into the gradient of leaf `t`, in place when a gradient exists so
// that handles to it stay valid.
void accumulate_leaf(TensorImpl* leaf, const Tensor& g) {
  Tensor cur(leaf->grad);
  Tensor gg = g.dtype() == leaf->dtype ? g : g.to(leaf->dtype);
  if (!cur.defined()) {
    leaf->grad = gg.clone().ref();  // a fresh buffer: gradients never alias other tensors
    return;
  }
  Tensor sum = call1("add", {cur, gg});
  cur.copy_from(sum);
}

Tensor accumulate(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return call1("add", {a, b});
}

Tensor edge_target_meta_check(const OpDef& op, size_t i, const Tensor& g, const Tensor& input) {
  SAMBA_CHECK(g.shape() == input.shape(), Status::Internal,
              "gradient rule of op '{}' returned shape {} for input #{} of shape {}", op.name,
              dims_str(g.shape()), i, dims_str(input.shape()));
  return g.dtype() == input.dtype() ? g : g.to(input.dtype());
}

}  // namespace

bool grad_enabled() { return t_grad_enabled; }
NoGradGuard::NoGradGuard() : prev_(t_grad_enabled) { t_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { t_grad_enabled = prev_; }

void record(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
            std::vector<Tensor>& outputs) {
  bool any = false;
  for (const auto& t : inputs) any |= wants_grad(t);
  if (!any) return;
  auto node = std::make_shared<Node>();
  node->op = &op;
  node->attrs = attrs;
  node->inputs.reserve(inputs.size());
  node->next.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    node->inputs.push_back(t.defined() ? t.detach() : t);
    if (!wants_grad(t)) continue;
    if (t.impl()->grad_fn)
      node->next[i] = Edge{t.impl()->grad_fn, {}, t.impl()->output_nr};
    else
      node->next[i] = Edge{{}, t.ref(), 0};
  }
  node->n_outputs = outputs.size();
  node->outputs.reserve(outputs.size());
  for (size_t k = 0; k < outputs.size(); ++k) {
    Tensor& o = outputs[k];
    node->outputs.push_back(o.detach());
    if (!is_floating(o.dtype())) continue;
    if (o.impl()->grad_fn || o.impl()->requires_grad) o = o.detach();  // a view op returned an input
    o.impl()->requires_grad = true;
    o.impl()->grad_fn = node;
    o.impl()->output_nr = static_cast<int32_t>(k);
  }
}

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph) {
  SAMBA_CHECK(roots.size() == grads.size(), Status::InvalidArgument,
              "backward: {} tensors but {} gradients", roots.size(), grads.size());
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  std::unordered_map<Node*, int> deps;
  std::vector<std::shared_ptr<Node>> stack;

  for (size_t r = 0; r < roots.size(); ++r) {
    const Tensor& root = roots[r];
    SAMBA_CHECK(root.defined(), Status::NullPointer, "backward: tensor #{} is undefined", r);
    SAMBA_CHECK(root.requires_grad(), Status::InvalidState,
                "backward: tensor '{}' of shape {} does not require grad and has no gradient history",
                root.name(), dims_str(root.shape()));
    Tensor g = grads[r];
    if (!g.defined()) {
      SAMBA_CHECK(root.numel() == 1, Status::InvalidArgument,
                  "backward: a gradient is required for tensor of shape {} ({} elements); only "
                  "single-element tensors default to a gradient of ones",
                  dims_str(root.shape()), root.numel());
      g = Tensor::scalar(1.0, root.dtype());
      g = g.as_strided(root.shape(), Dims(root.shape().size(), 0), 0).contiguous();
    }
    SAMBA_CHECK(g.shape() == root.shape(), Status::ShapeMismatch,
                "backward: gradient of shape {} does not match tensor of shape {}", dims_str(g.shape()),
                dims_str(root.shape()));
    if (g.dtype() != root.dtype()) g = g.to(root.dtype());
    auto& fn = root.impl()->grad_fn;
    if (!fn) {
      NoGradGuard ng;
      accumulate_leaf(root.impl(), g);
      continue;
    }
    auto& buf = buffers[fn.get()];
    buf.resize(fn->n_outputs);
    {
      NoGradGuard ng;
      buf[root.impl()->output_nr] = accumulate(buf[root.impl()->output_nr], g);
    }
    stack.push_back(fn);
  }

  // Count, for every node reachable from the roots, how many edges lead to it.
  std::vector<std::shared_ptr<Node>> order = stack;
  {
    std::unordered_map<Node*, bool> seen;
    std::vector<std::shared_ptr<Node>> todo = stack;
    for (auto& n : stack) seen[n.get()] = true;
    while (!todo.empty()) {
      auto n = todo.back();
      todo.pop_back();
      for (auto& e : n->next) {
        if (!e.node) continue;
        ++deps[e.node.get()];
        if (!seen[e.node.get()]) {
          seen[e.node.get()] = true;
          todo.push_back(e.node);
        }
      }
    }
  }
  std::vector<std::shared_ptr<Node>> ready;
  {
    std::unordered_map<Node*, bool> queued;
    for (auto& n : stack)
      if (deps[n.get()] == 0 && !queued[n.get()]) ready.push_back(n), queued[n.get()] = true;
  }

  NoGradGuard ng;
  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.back();
    ready.pop_back();
    SAMBA_CHECK(!node->released, Status::InvalidState,
                "backward: the history of op '{}' was already freed by an earlier backward; pass "
                "retain_graph to backward the first time to run it again",
                node->op->name);
    std::vector<Tensor> gouts = std::move(buffers[node.get()]);
    gouts.resize(node->n_outputs);
    buffers.erase(node.get());
    bool any = false;
    for (auto& g : gouts) any |= g.defined();
    std::vector<Tensor> gin;
    if (any) {
      GradContext gc{*node->op, node->inputs, node->outputs, gouts, node->attrs, {}};
      gc.needs_input_grad.resize(node->next.size());
      for (size_t i = 0; i < node->next.size(); ++i)
        gc.needs_input_grad[i] = node->next[i].node || node->next[i].leaf;
      gin = node->op->grad(gc);
    }
    for (size_t i = 0; i < node->next.size(); ++i) {
      Edge& e = node->next[i];
      if (!e.node && !e.leaf) continue;
      Tensor g = i < gin.size() ? gin[i] : Tensor();
      if (g.defined()) g = edge_target_meta_check(*node->op, i, g, node->inputs[i]);
      if (e.leaf) {
        if (g.defined()) accumulate_leaf(e.leaf.get(), g);
        continue;
      }
      auto& buf = buffers[e.node.get()];
      buf.resize(e.node->n_outputs);
      if (g.defined()) buf[e.output_nr] = accumulate(buf[e.output_nr], g);
      if (--deps[e.node.get()] == 0) ready.push_back(e.node);
    }
    if (!retain_graph) {
      node->inputs.clear();
      node->outputs.clear();
      node->released = true;
    }
  }
}

}  // namespace samba::autograd
