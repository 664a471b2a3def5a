// The ONNX op table: ONNX op and opset range -> registry ops. Rows are kept
// sorted by op type; an op whose meaning changed at some opset has one row
// per range.
#include "engine/onnx/op_table.h"

#include <fmt/ranges.h>

#include <algorithm>

#include "engine/onnx/lowerings.h"

namespace samba::onnx_import {
namespace {

constexpr int64_t kLast = 17;  // the newest opset the rows were written against

#define SAMBA_ONNX_UNARY(onnx, op) \
  {onnx, 13, kLast, op, [](const NodeContext& c) { return lower::unary(c, op); }}
#define SAMBA_ONNX_BINARY(onnx, op) \
  {onnx, 13, kLast, op, [](const NodeContext& c) { return lower::binary(c, op); }}

const OpRule kTable[] = {
    SAMBA_ONNX_UNARY("Abs", "abs"),
    SAMBA_ONNX_BINARY("Add", "add"),
    SAMBA_ONNX_BINARY("And", "logical_and"),
    {"ArgMax", 13, kLast, "argmax",
     [](const NodeContext& c) { return lower::arg_reduce(c, "argmax"); }},
    {"ArgMin", 13, kLast, "argmin",
     [](const NodeContext& c) { return lower::arg_reduce(c, "argmin"); }},
    {"AveragePool", 13, kLast, "avg_pool2d", lower::average_pool},
    {"BatchNormalization", 13, kLast, "batch_norm", lower::batch_normalization},
    {"Cast", 13, kLast, "cast", lower::cast},
    {"CastLike", 15, kLast, "cast", lower::cast_like},
    {"Ceil", 13, kLast, "neg, div",
     [](const NodeContext& c) { return lower::activation(c, "Ceil"); }},
    {"Celu", 13, kLast, "where, gt, exp, div, sub, mul",
     [](const NodeContext& c) { return lower::activation(c, "Celu"); }},
    {"Clip", 13, kLast, "clamp, maximum, minimum", lower::clip},
    {"Concat", 13, kLast, "cat", lower::concat},
    {"Constant", 13, kLast, "(a constant)", lower::constant},
    {"ConstantOfShape", 13, kLast, "full", lower::constant_of_shape},
    {"Conv", 13, kLast, "conv2d", lower::conv},
    {"ConvTranspose", 13, kLast, "conv_transpose2d, pad, slice, add", lower::conv_transpose},
    SAMBA_ONNX_UNARY("Cos", "cos"),
    {"Cosh", 13, kLast, "exp, neg, add, mul",
     [](const NodeContext& c) { return lower::activation(c, "Cosh"); }},
    {"CumSum", 13, kLast, "cumsum, sub", lower::cumsum},
    {"DepthToSpace", 13, kLast, "reshape, permute",
     [](const NodeContext& c) { return lower::depth_space(c, true); }},
    {"Div", 13, kLast, "div", lower::div},
    {"Dropout", 13, kLast, "dropout, ones_like, mul, ne (identity in inference)", lower::dropout},
    {"Elu", 13, kLast, "where, gt, exp, sub, mul",
     [](const NodeContext& c) { return lower::activation(c, "Elu"); }},
    SAMBA_ONNX_BINARY("Equal", "eq"),
    SAMBA_ONNX_UNARY("Erf", "erf"),
    SAMBA_ONNX_UNARY("Exp", "exp"),
    {"Expand", 13, kLast, "expand", lower::expand},
    {"EyeLike", 13, kLast, "arange, reshape, sub, eq, cast", lower::eye_like},
    {"Flatten", 13, kLast, "reshape", lower::flatten},
    {"Floor", 13, kLast, "div", [](const NodeContext& c) { return lower::activation(c, "Floor"); }},
    {"Gather", 13, kLast, "embedding, index_select, reshape", lower::gather},
    {"GatherElements", 13, kLast, "gather, where, lt, add, cast", lower::gather_elements},
    {"Gemm", 13, kLast, "linear, matmul, permute, mul, add", lower::gemm},
    {"GlobalAveragePool", 13, kLast, "adaptive_avg_pool2d", lower::global_average_pool},
    {"GlobalMaxPool", 13, kLast, "max", lower::global_max_pool},
    SAMBA_ONNX_BINARY("Greater", "gt"),
    SAMBA_ONNX_BINARY("GreaterOrEqual", "ge"),
    {"HardSigmoid", 13, kLast, "clamp, mul, add",
     [](const NodeContext& c) { return lower::activation(c, "HardSigmoid"); }},
    {"HardSwish", 14, kLast, "clamp, mul, add",
     [](const NodeContext& c) { return lower::activation(c, "HardSwish"); }},
    {"Hardmax", 13, kLast, "argmax, arange, reshape, eq, cast", lower::hardmax},
    {"Identity", 13, kLast, "(none)", lower::identity},
    {"InstanceNormalization", 13, kLast, "group_norm", lower::instance_normalization},
    {"IsInf", 13, kLast, "eq, logical_or",
     [](const NodeContext& c) { return lower::activation(c, "IsInf"); }},
    {"IsNaN", 13, kLast, "ne", [](const NodeContext& c) { return lower::activation(c, "IsNaN"); }},
    {"LayerNormalization", 17, kLast, "layer_norm", lower::layer_normalization},
    {"LeakyRelu", 13, kLast, "leaky_relu", lower::leaky_relu},
    SAMBA_ONNX_BINARY("Less", "lt"),
    SAMBA_ONNX_BINARY("LessOrEqual", "le"),
    SAMBA_ONNX_UNARY("Log", "log"),
    {"LogSoftmax", 13, kLast, "log_softmax",
     [](const NodeContext& c) { return lower::softmax(c, "log_softmax"); }},
    {"MatMul", 13, kLast, "matmul", lower::matmul},
    {"Max", 13, kLast, "maximum",
     [](const NodeContext& c) { return lower::variadic(c, "maximum"); }},
    {"MaxPool", 13, kLast, "max_pool2d, max_pool2d_with_indices", lower::max_pool},
    {"Mean", 13, kLast, "add, div", lower::mean_of_inputs},
    {"Min", 13, kLast, "minimum",
     [](const NodeContext& c) { return lower::variadic(c, "minimum"); }},
    {"Mod", 13, kLast, "div, mul, sub", lower::mod},
    SAMBA_ONNX_BINARY("Mul", "mul"),
    SAMBA_ONNX_UNARY("Neg", "neg"),
    {"NegativeLogLikelihoodLoss", 13, kLast, "nll_loss, permute, reshape",
     lower::negative_log_likelihood_loss},
    SAMBA_ONNX_UNARY("Not", "logical_not"),
    {"OneHot", 13, kLast, "arange, reshape, unsqueeze, eq, select, where", lower::one_hot},
    SAMBA_ONNX_BINARY("Or", "logical_or"),
    {"PRelu", 13, kLast, "where, gt, mul",
     [](const NodeContext& c) { return lower::activation(c, "PRelu"); }},
    {"Pad", 13, kLast, "pad", lower::pad},
    {"Pow", 13, kLast, "pow, cast", lower::pow},
    {"Range", 13, kLast, "arange", lower::range},
    SAMBA_ONNX_UNARY("Reciprocal", "reciprocal"),
    {"ReduceL1", 13, kLast, "abs, sum",
     [](const NodeContext& c) { return lower::reduce_of(c, "l1"); }},
    {"ReduceL2", 13, kLast, "mul, sum, sqrt",
     [](const NodeContext& c) { return lower::reduce_of(c, "l2"); }},
    {"ReduceLogSum", 13, kLast, "sum, log",
     [](const NodeContext& c) { return lower::reduce_of(c, "log_sum"); }},
    {"ReduceLogSumExp", 13, kLast, "logsumexp",
     [](const NodeContext& c) { return lower::reduce(c, "logsumexp"); }},
    {"ReduceMax", 13, kLast, "max", [](const NodeContext& c) { return lower::reduce(c, "max"); }},
    {"ReduceMean", 13, kLast, "mean",
     [](const NodeContext& c) { return lower::reduce(c, "mean"); }},
    {"ReduceMin", 13, kLast, "min", [](const NodeContext& c) { return lower::reduce(c, "min"); }},
    {"ReduceSum", 13, kLast, "sum", [](const NodeContext& c) { return lower::reduce(c, "sum"); }},
    {"ReduceSumSquare", 13, kLast, "mul, sum",
     [](const NodeContext& c) { return lower::reduce_of(c, "sum_square"); }},
    SAMBA_ONNX_UNARY("Relu", "relu"),
    {"Reshape", 13, kLast, "reshape", lower::reshape},
    {"ScatterElements", 13, kLast, "scatter, scatter_add", lower::scatter_elements},
    {"Selu", 13, kLast, "where, gt, exp, sub, mul",
     [](const NodeContext& c) { return lower::activation(c, "Selu"); }},
    {"Shape", 13, kLast, "(a constant)", lower::shape},
    {"Shrink", 13, kLast, "lt, gt, where, add, sub",
     [](const NodeContext& c) { return lower::activation(c, "Shrink"); }},
    SAMBA_ONNX_UNARY("Sigmoid", "sigmoid"),
    {"Sign", 13, kLast, "gt, lt, cast, sub",
     [](const NodeContext& c) { return lower::activation(c, "Sign"); }},
    SAMBA_ONNX_UNARY("Sin", "sin"),
    {"Sinh", 13, kLast, "exp, neg, sub, mul",
     [](const NodeContext& c) { return lower::activation(c, "Sinh"); }},
    {"Size", 13, kLast, "(a constant)", lower::size},
    {"Slice", 13, kLast, "slice", lower::slice},
    {"Softmax", 13, kLast, "softmax",
     [](const NodeContext& c) { return lower::softmax(c, "softmax"); }},
    {"SoftmaxCrossEntropyLoss", 13, kLast, "log_softmax, nll_loss, permute, reshape",
     lower::softmax_cross_entropy_loss},
    {"Softplus", 13, kLast, "exp, add, log",
     [](const NodeContext& c) { return lower::activation(c, "Softplus"); }},
    {"Softsign", 13, kLast, "abs, add, div",
     [](const NodeContext& c) { return lower::activation(c, "Softsign"); }},
    {"SpaceToDepth", 13, kLast, "reshape, permute",
     [](const NodeContext& c) { return lower::depth_space(c, false); }},
    {"Split", 13, kLast, "split", lower::split},
    SAMBA_ONNX_UNARY("Sqrt", "sqrt"),
    {"Squeeze", 13, kLast, "squeeze", lower::squeeze},
    SAMBA_ONNX_BINARY("Sub", "sub"),
    {"Sum", 13, kLast, "add", [](const NodeContext& c) { return lower::variadic(c, "add"); }},
    {"Tan", 13, kLast, "sin, cos, div",
     [](const NodeContext& c) { return lower::activation(c, "Tan"); }},
    SAMBA_ONNX_UNARY("Tanh", "tanh"),
    {"ThresholdedRelu", 13, kLast, "where, gt, zeros_like",
     [](const NodeContext& c) { return lower::activation(c, "ThresholdedRelu"); }},
    {"Tile", 13, kLast, "repeat", lower::tile},
    {"TopK", 13, kLast, "topk", lower::top_k},
    {"Transpose", 13, kLast, "permute", lower::transpose},
    {"Trilu", 14, kLast, "triu, tril", lower::trilu},
    {"Unsqueeze", 13, kLast, "unsqueeze", lower::unsqueeze},
    {"Where", 13, kLast, "where", lower::where},
    SAMBA_ONNX_BINARY("Xor", "logical_xor"),
};

#undef SAMBA_ONNX_UNARY
#undef SAMBA_ONNX_BINARY

}  // namespace

std::span<const OpRule> op_table() { return kTable; }

const OpRule* find_rule(std::string_view op_type, int64_t opset) {
  for (const OpRule& r : kTable)
    if (r.op_type == op_type && r.since <= opset && opset <= r.until) return &r;
  return nullptr;
}

const OpRule& rule_for(std::string_view node_name, std::string_view op_type, int64_t opset) {
  const OpRule* rule = find_rule(op_type, opset);
  if (rule == nullptr)
    fail(Status::Unsupported,
         "node '{}' ({}, opset {}): the op is not supported at this opset; supported: {}",
         node_name, op_type, opset, supported_ops(opset));
  return *rule;
}

std::string supported_ops(int64_t opset) {
  std::vector<std::string_view> names;
  for (const OpRule& r : kTable)
    if (r.since <= opset && opset <= r.until) names.push_back(r.op_type);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return fmt::format("{}", fmt::join(names, ", "));
}

DType dtype_of_onnx(int32_t onnx_type, std::string_view what) {
  switch (onnx_type) {
    case 1:
      return DType::Float32;
    case 2:
      return DType::UInt8;
    case 3:
      return DType::Int8;
    case 5:
      return DType::Int16;
    case 6:
      return DType::Int32;
    case 7:
      return DType::Int64;
    case 9:
      return DType::Bool;
    case 10:
      return DType::Float16;
    case 11:
      return DType::Float64;
    case 16:
      return DType::BFloat16;
    default:
      fail(Status::Unsupported,
           "{}: ONNX data type {} has no Samba dtype; supported: FLOAT, DOUBLE, FLOAT16, BFLOAT16, "
           "INT64, INT32, INT16, INT8, UINT8, BOOL",
           what, onnx_type);
  }
}

// ---- NodeContext ----------------------------------------------------------------

std::string NodeContext::where() const {
  return fmt::format("node '{}' ({}, opset {})", node_.name, node_.op_type, opset_);
}

const Tensor& NodeContext::input(size_t i) const {
  if (i >= inputs_.size() || !inputs_[i].defined())
    fail(Status::InvalidArgument, "{}: input {} is required but missing", where(), i);
  return inputs_[i];
}

const Tensor* NodeContext::optional_input(size_t i) const {
  return i < inputs_.size() && inputs_[i].defined() ? &inputs_[i] : nullptr;
}

size_t NodeContext::output_count() const {
  size_t n = 0;
  for (size_t i = 0; i < node_.outputs.size(); ++i)
    if (!node_.outputs[i].empty()) n = i + 1;
  return n;
}

int64_t NodeContext::attr_int(std::string_view name, int64_t def) const {
  return node_.attrs.has(name) ? node_.attrs.i(name) : def;
}
double NodeContext::attr_float(std::string_view name, double def) const {
  return node_.attrs.has(name) ? node_.attrs.f(name) : def;
}
std::string NodeContext::attr_string(std::string_view name, std::string def) const {
  return node_.attrs.has(name) ? node_.attrs.s(name) : def;
}
std::optional<std::vector<int64_t>> NodeContext::attr_ints(std::string_view name) const {
  if (!node_.attrs.has(name)) return std::nullopt;
  return node_.attrs.ints(name);
}
const Tensor* NodeContext::attr_tensor(std::string_view name) const {
  for (const auto& [n, t] : node_.tensor_attrs)
    if (n == name) return &t;
  return nullptr;
}

std::vector<int64_t> NodeContext::constant_ints(size_t i, std::string_view what) const {
  const Tensor& t = input(i);
  if (!t.has_data() || t.is_symbolic() || t.requires_grad())
    fail(Status::Unsupported,
         "{}: input '{}' must be known when the model is imported (an initializer, a Constant, or "
         "computed from them); it is computed from the graph's inputs",
         where(), what);
  if (is_floating(t.dtype()) || t.dim() > 1)
    fail(Status::InvalidArgument, "{}: input '{}' must be a 1-D integer tensor, got {} of shape {}",
         where(), what, dtype_name(t.dtype()), dims_str(t.shape()));
  Tensor v = t.to(DType::Int64);
  const int64_t* p = v.data<int64_t>();
  return std::vector<int64_t>(p, p + v.numel());
}

}  // namespace samba::onnx_import
