// Lowering functions of the op table (op_table.cpp lists which ONNX op and
// opsets each serves). Math and neural-network ops are in lower_math.cpp,
// shape and data movement ops in lower_shape.cpp.
#pragma once

#include "engine/onnx/op_table.h"

namespace samba::onnx_import::lower {

using Out = std::vector<Tensor>;

// A registry op of one input (the row's registry_ops), e.g. Relu -> relu.
Out unary(const NodeContext& c, std::string_view op);
// A broadcasting registry op of two inputs, e.g. Add -> add.
Out binary(const NodeContext& c, std::string_view op);
// A broadcasting registry op folded over any number of inputs (Max, Min, Sum).
Out variadic(const NodeContext& c, std::string_view op);

Out matmul(const NodeContext& c);
Out gemm(const NodeContext& c);
Out conv(const NodeContext& c);
Out max_pool(const NodeContext& c);
Out average_pool(const NodeContext& c);
Out global_average_pool(const NodeContext& c);
Out global_max_pool(const NodeContext& c);
Out conv_transpose(const NodeContext& c);
Out batch_normalization(const NodeContext& c);
Out layer_normalization(const NodeContext& c);
Out softmax(const NodeContext& c, std::string_view op);
Out reduce(const NodeContext& c, std::string_view op);
// The ONNX reduction attributes (axes, keepdims, noop_with_empty_axes) applied
// to `x`, a function of the node's input.
Out reduce(const NodeContext& c, std::string_view op, const Tensor& x);
// ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum ("l1", "l2", "sum_square",
// "log_sum"): a sum of a function of the input (lower_reduce.cpp).
Out reduce_of(const NodeContext& c, std::string_view kind);
// ArgMax, ArgMin: `op` is argmax or argmin.
Out arg_reduce(const NodeContext& c, std::string_view op);
Out cumsum(const NodeContext& c);
Out mean_of_inputs(const NodeContext& c);
Out negative_log_likelihood_loss(const NodeContext& c);
Out softmax_cross_entropy_loss(const NodeContext& c);
Out leaky_relu(const NodeContext& c);
// PRelu, Elu, Selu, Celu, HardSigmoid, HardSwish, Softplus, Softsign,
// ThresholdedRelu, Tan, Sign, Floor, Ceil, Sinh, Cosh, IsNaN, IsInf, Shrink:
// compositions of registry ops (lower_activation.cpp).
Out activation(const NodeContext& c, std::string_view kind);
Out clip(const NodeContext& c);
Out div(const NodeContext& c);
Out pow(const NodeContext& c);
Out mod(const NodeContext& c);
Out instance_normalization(const NodeContext& c);
Out dropout(const NodeContext& c);

Out identity(const NodeContext& c);
Out constant(const NodeContext& c);
Out constant_of_shape(const NodeContext& c);
Out shape(const NodeContext& c);
Out cast(const NodeContext& c);
Out reshape(const NodeContext& c);
Out flatten(const NodeContext& c);
Out transpose(const NodeContext& c);
Out concat(const NodeContext& c);
Out gather(const NodeContext& c);
Out slice(const NodeContext& c);
Out squeeze(const NodeContext& c);
Out unsqueeze(const NodeContext& c);
Out expand(const NodeContext& c);
Out where(const NodeContext& c);
Out split(const NodeContext& c);
Out pad(const NodeContext& c);
// Indexing and creation ops (lower_index.cpp).
Out gather_elements(const NodeContext& c);
Out trilu(const NodeContext& c);
Out range(const NodeContext& c);
Out size(const NodeContext& c);
Out cast_like(const NodeContext& c);
Out tile(const NodeContext& c);
Out scatter_elements(const NodeContext& c);
Out top_k(const NodeContext& c);
Out hardmax(const NodeContext& c);
Out one_hot(const NodeContext& c);
Out eye_like(const NodeContext& c);
// DepthToSpace (to_space) and SpaceToDepth: reshape, permute, reshape.
Out depth_space(const NodeContext& c, bool to_space);

// A 1-D int64 tensor of `v` (indices and shapes known at import).
Tensor int64_vector(const std::vector<int64_t>& v);

// Normalizes an ONNX axis (negative counts from the end) against `rank`.
int64_t axis_in(const NodeContext& c, int64_t axis, int64_t rank, std::string_view what);

}  // namespace samba::onnx_import::lower
