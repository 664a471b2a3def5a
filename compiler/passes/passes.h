// Graph-to-graph passes. Each takes the graph, changes it in place (marking
// nodes dead, rewiring uses) and keeps Graph::verify() true. They run after
// autograd and the optimizers, on the whole training step.
#pragma once

#include "compiler/ir/graph.h"

namespace samba::compiler {

// Marks nodes dead whose results nothing uses: a node stays when it updates
// a value in place, or computes an output, a persistent value, or a value a
// live node reads.
void eliminate_dead_code(Graph& g);

// Merges nodes that compute the same op with the same attributes and
// bindings on the same inputs (at the same version: an in-place update in
// between makes them different), and identical small constants. Nodes that
// update values in place are never merged.
void eliminate_common_subexpressions(Graph& g);

// Evaluates, at compile time, nodes whose inputs are all constants (and
// creation ops without inputs) when the result is small, turning their
// outputs into constants. Nodes with run-time bindings or random results are
// left alone.
void fold_constants(Graph& g);

// Folds an activation (relu, tanh, sigmoid, gelu) that is the only reader of
// a linear's result into the linear's GEMM epilogue.
void fuse_gemm_epilogues(Graph& g);

// Replaces every use of value `from` (node inputs, graph outputs) with `to`.
void replace_uses(Graph& g, ValueId from, ValueId to);

}  // namespace samba::compiler
