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
Out batch_normalization(const NodeContext& c);
Out layer_normalization(const NodeContext& c);
Out softmax(const NodeContext& c, std::string_view op);
Out reduce(const NodeContext& c, std::string_view op);
Out leaky_relu(const NodeContext& c);
Out clip(const NodeContext& c);
Out div(const NodeContext& c);
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

// Normalizes an ONNX axis (negative counts from the end) against `rank`.
int64_t axis_in(const NodeContext& c, int64_t axis, int64_t rank, std::string_view what);

}  // namespace samba::onnx_import::lower
