// Host autograd: ops computed eagerly on tensors that require grad record a
// Node; backward() walks the nodes in reverse topological order, calling each
// op's gradient rule (which emits registry ops) and accumulating into .grad.
#pragma once

#include <memory>
#include <vector>

#include "engine/ops/registry.h"

namespace samba::autograd {

struct Edge {
  std::shared_ptr<Node> node;  // producer of this input, or
  Ref<TensorImpl> leaf;        // a leaf that requires grad
  int32_t output_nr = 0;
};

struct Node {
  const OpDef* op = nullptr;
  Attrs attrs;
  std::vector<Tensor> inputs;   // saved inputs (detached)
  std::vector<Tensor> outputs;  // saved outputs (detached)
  std::vector<Edge> next;       // one per input
  size_t n_outputs = 0;
  bool released = false;        // saved tensors freed by backward without retain_graph
};

// Grad mode is per thread, on by default.
bool grad_enabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// Called by the dispatcher after an eager op: attaches history to `outputs`
// when any floating input requires grad.
void record(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
            std::vector<Tensor>& outputs);

// Fills .grad of the leaves reachable from `roots`, accumulating. `grads` has
// one entry per root; an undefined entry means ones (allowed for any root that
// has one element, as PyTorch allows for scalars).
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph);

}  // namespace samba::autograd
