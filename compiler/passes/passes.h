// Graph-to-graph passes. Each takes a graph and returns it rewritten, with
// the nodes it made redundant erased (Graph::erase_nodes), so no pass ever
// meets a node an earlier one removed. They run after autograd and the
// optimizers, on the whole training step, in the order an optimization
// level's pipeline lists (pipeline.h); the rewrites mixed precision asks for
// (mixed_precision.h) run before autograd, on the forward graph.
#pragma once

#include "compiler/ir/graph.h"

namespace samba::compiler {

// Erases nodes whose results nothing uses: a node stays when it updates a
// value in place, or computes an output, a persistent value, or a value a
// kept node reads.
Graph eliminate_dead_code(Graph g);

// Merges nodes that compute the same op with the same attributes and
// bindings on the same inputs (at the same version: an in-place update in
// between makes them different), and identical small constants. Nodes that
// update values in place are never merged.
Graph eliminate_common_subexpressions(Graph g);

// Evaluates, at compile time, nodes whose inputs are all constants (and
// creation ops without inputs) when the result is small, turning their
// outputs into constants. Nodes with run-time bindings or random results are
// left alone.
Graph fold_constants(Graph g);

// Runs what follows a GEMM in its epilogue: add(matmul(x, W), b) with W
// a matrix and b a row of its columns ([n] or [1, n]), and add(linear(x, w),
// b) for a linear without bias or activation, become one linear (W given as
// its transposed view); then an activation (relu, tanh, sigmoid, gelu) that
// is the only reader of a linear's result, or of a matmul's, is folded into
// the linear's epilogue; and max_pool2d over 2x2 windows, stride 2, of a
// conv2d or of its relu becomes one conv2d_max_pool2d. Only results nothing
// else reads (no other node, view or output) are fused, in one phase,
// without run-time bindings.
Graph fuse_gemm_epilogues(Graph g);

}  // namespace samba::compiler
