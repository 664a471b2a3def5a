// A reference executor for the IR: runs a graph's nodes one by one on
// host tensors through the registry's eager kernels. It is the oracle the
// compiler's tests check compiled graphs against; the runtime executes PEFs.
#pragma once

#include <initializer_list>
#include <vector>

#include "compiler/ir/graph.h"

namespace samba::compiler {

// `values` has one entry per value id. Entries the caller fills (inputs,
// parameters, gradients, state) are used as given; constants and output
// gradients default to their captured host values, gradients and optimizer
// state to zeros (as on the device); everything else is computed. Nodes of the
// listed phases run, in graph order; in-place updates write into `values`.
void interpret(const Graph& g, std::vector<Tensor>& values, std::initializer_list<Phase> phases);

}  // namespace samba::compiler
