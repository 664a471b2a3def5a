// Kernels and sections. Nodes (views excepted: the runtime resolves them to
// aliases at load) are grouped into kernels, the nodes of a section's flow
// graph: one node per kernel, or, with elementwise fusion (o1), chains of
// elementwise ops that feed each other in one kernel. Kernels are then cut into sections
// by phase, in the schedule order ZEROGRAD, FWD, BCKWD, GRADNORM, OPT.
#pragma once

#include <vector>

#include "compiler/ir/graph.h"

namespace samba::compiler {

struct Kernel {
  std::vector<NodeId> nodes;  // in graph order
  Phase phase = Phase::Forward;
};

std::vector<Kernel> form_kernels(const Graph& g, bool fuse_elementwise);

struct SectionPlan {
  pef::SectionType type = pef::SectionType::FWD;
  std::vector<int32_t> kernels;  // indices into the kernel list, in order
};

// Sections in schedule order; phases without kernels get no section (an
// inference graph has only FWD).
std::vector<SectionPlan> cut_sections(const std::vector<Kernel>& kernels);

// Data parallel: a REDUCE section (no kernels: the runtime all-reduces the
// gradient buckets) right after BCKWD, so GRADNORM clips, and OPT applies,
// the gradient averaged over the replicas, as one process at the whole
// batch would. Nothing without a BCKWD section.
void add_reduce_section(std::vector<SectionPlan>& sections);

}  // namespace samba::compiler
