#include "compiler/schedule/schedule.h"

#include <algorithm>
#include <unordered_set>

namespace samba::compiler {
namespace {

pef::SectionType section_type_of(Phase p) {
  switch (p) {
    case Phase::Forward: return pef::SectionType::FWD;
    case Phase::Backward: return pef::SectionType::BCKWD;
    case Phase::GradNorm: return pef::SectionType::GRADNORM;
    case Phase::Optimizer: return pef::SectionType::OPT;
    case Phase::ZeroGrad: return pef::SectionType::ZEROGRAD;
  }
  return pef::SectionType::FWD;
}

// The ops whose kernels run an elementwise chain on each block (a row for
// the normalizations) of their float32 output while it is in cache
// (ops::OutputTail): the runtime's fused epilogue.
bool takes_output_tail(const OpDef& op) {
  return op.name == "linear" || op.name == "matmul" || op.name == "conv2d" ||
         op.name == "layer_norm" || op.name == "softmax" || op.name == "log_softmax";
}

// Whether value v is computed before node n whatever the order: n reads it
// or one of its inputs depends on it, or v has no producing node (an input,
// a parameter, a constant). The search gives up (false: the chain is not
// joined, which is always correct) past a fixed number of nodes, so that
// kernel formation stays linear in the graph's size on large graphs.
bool precedes(const Graph& g, ValueId v, const Node& n) {
  constexpr size_t kMaxVisited = 4096;
  const NodeId target = g.value(v).producer;
  if (target == kNone) return true;
  std::vector<NodeId> stack{n.id};
  std::unordered_set<NodeId> seen;  // the nodes visited, not one flag per node of the graph
  while (!stack.empty()) {
    if (seen.size() > kMaxVisited) return false;
    const Node& at = g.node(stack.back());
    stack.pop_back();
    for (ValueId in : at.inputs) {
      if (in == kNone) continue;
      const NodeId p = g.value(in).producer;
      if (p == kNone || !seen.insert(p).second) continue;
      if (p == target) return true;
      stack.push_back(p);
    }
  }
  return false;
}

}  // namespace

std::vector<Kernel> form_kernels(const Graph& g, bool fuse_elementwise) {
  std::vector<Kernel> kernels;
  std::vector<int32_t> kernel_of_value(g.values.size(), -1);
  auto fusable = [](const Node& n) {
    return n.op->fusion == Fusion::Elementwise && n.mutated().empty() && !n.outputs.empty();
  };
  // A producer a chain may follow: one float32 output, which the chain's
  // first op reads itself (not through a view), every op of the chain
  // computing a float32 value of its shape with a block function.
  auto produces_for = [&](const Kernel& k, const Node& n) {
    const Node& front = g.node(k.nodes.front());
    if (!takes_output_tail(*front.op) || front.outputs.size() != 1 || !front.mutated().empty())
      return false;
    const Value& product = g.value(front.outputs[0]);
    if (product.dtype != DType::Float32 || n.outputs.size() != 1 || !n.bindings.empty() ||
        !n.op->float32_block || !n.op->float32_block(n.op->resolve(n.attrs)))
      return false;
    const Value& out = g.value(n.outputs[0]);
    if (out.dtype != DType::Float32 || out.shape != product.shape) return false;
    if (k.nodes.size() == 1 &&
        std::find(n.inputs.begin(), n.inputs.end(), product.id) == n.inputs.end())
      return false;
    // Its other operands must be ready before the producer runs (it
    // depends on them already): joining must not make the producer wait
    // for a branch it is independent of.
    for (ValueId in : n.inputs)
      if (in != kNone && kernel_of_value[g.root(in)] != static_cast<int32_t>(kernels.size() - 1) &&
          !precedes(g, g.root(in), front))
        return false;
    return true;
  };
  for (const Node& n : g.nodes) {
    if (n.op->view) continue;
    bool joined = false;
    if (fuse_elementwise && !kernels.empty() && fusable(n)) {
      Kernel& last = kernels.back();
      bool feeds = false;
      for (ValueId in : n.inputs)
        feeds |= in != kNone && kernel_of_value[g.root(in)] == static_cast<int32_t>(kernels.size() - 1);
      // An elementwise chain (all its ops are) or a producer and its chain.
      const bool joins = fusable(g.node(last.nodes.front())) || produces_for(last, n);
      if (last.phase == n.phase && joins && feeds) {
        last.nodes.push_back(n.id);
        joined = true;
      }
    }
    if (!joined) kernels.push_back(Kernel{{n.id}, n.phase});
    for (ValueId o : n.outputs) kernel_of_value[o] = static_cast<int32_t>(kernels.size() - 1);
  }
  return kernels;
}

std::vector<SectionPlan> cut_sections(const std::vector<Kernel>& kernels) {
  static constexpr Phase kOrder[] = {Phase::ZeroGrad, Phase::Forward, Phase::Backward, Phase::GradNorm,
                                     Phase::Optimizer};
  std::vector<SectionPlan> sections;
  for (Phase p : kOrder) {
    SectionPlan s;
    s.type = section_type_of(p);
    for (size_t k = 0; k < kernels.size(); ++k)
      if (kernels[k].phase == p) s.kernels.push_back(static_cast<int32_t>(k));
    if (!s.kernels.empty()) sections.push_back(std::move(s));
  }
  return sections;
}

void add_reduce_section(std::vector<SectionPlan>& sections) {
  for (size_t i = 0; i < sections.size(); ++i)
    if (sections[i].type == pef::SectionType::BCKWD) {
      sections.insert(sections.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                      SectionPlan{pef::SectionType::REDUCE, {}});
      return;
    }
}

}  // namespace samba::compiler
