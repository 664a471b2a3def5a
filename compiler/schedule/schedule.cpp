#include "compiler/schedule/schedule.h"

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

}  // namespace

std::vector<Kernel> form_kernels(const Graph& g, bool fuse_elementwise) {
  std::vector<Kernel> kernels;
  std::vector<int32_t> kernel_of_value(g.values.size(), -1);
  auto fusable = [](const Node& n) {
    return n.op->fusion == Fusion::Elementwise && n.mutated().empty() && !n.outputs.empty();
  };
  for (const Node& n : g.nodes) {
    if (n.op->view) continue;
    bool joined = false;
    if (fuse_elementwise && !kernels.empty() && fusable(n)) {
      Kernel& last = kernels.back();
      const Node& prev = g.node(last.nodes.back());
      bool feeds = false;
      for (ValueId in : n.inputs)
        feeds |= in != kNone && kernel_of_value[g.root(in)] == static_cast<int32_t>(kernels.size() - 1);
      if (last.phase == n.phase && fusable(prev) && fusable(g.node(last.nodes.front())) && feeds) {
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
