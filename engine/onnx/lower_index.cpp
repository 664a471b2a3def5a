// Lowerings of ONNX indexing and creation ops to registry ops.
#include "engine/onnx/lowerings.h"
#include "engine/ops/registry.h"

namespace samba::onnx_import::lower {
namespace {

// A scalar input that must be known at import (Range's bounds).
double constant_scalar(const NodeContext& c, size_t i, std::string_view what) {
  const Tensor& t = c.input(i);
  if (!t.has_data() || t.is_symbolic() || t.requires_grad())
    c.unsupported("input '{}' must be known when the model is imported (an initializer, a "
                  "Constant, or computed from them); it is computed from the graph's inputs",
                  what);
  if (t.numel() != 1) c.invalid("input '{}' must be a scalar, got shape {}", what, dims_str(t.shape()));
  return t.item_double();
}

}  // namespace

Out gather_elements(const NodeContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& index = c.input(1);
  const int64_t axis = axis_in(c, c.attr_int("axis", 0), x.dim(), "axis");
  // ONNX counts negative indices from the end of the axis.
  Tensor i64 = call1("cast", {index}, {{"dtype", DType::Int64}});
  const Tensor size = Tensor::scalar(static_cast<double>(x.size(axis)), DType::Int64, true);
  const Tensor zero = Tensor::scalar(0, DType::Int64, true);
  Tensor wrapped = call1("where", {call1("lt", {i64, zero}), call1("add", {i64, size}), i64});
  return {call1("gather", {x, wrapped}, {{"dim", axis}})};
}

Out trilu(const NodeContext& c) {
  int64_t k = 0;
  if (c.optional_input(1)) {
    const std::vector<int64_t> ks = c.constant_ints(1, "k");
    if (ks.size() != 1) c.invalid("'k' must hold one value, got {}", ks.size());
    k = ks[0];
  }
  const char* op = c.attr_int("upper", 1) != 0 ? "triu" : "tril";
  return {call1(op, {c.input(0)}, {{"diagonal", k}})};
}

Out range(const NodeContext& c) {
  const double start = constant_scalar(c, 0, "start");
  const double limit = constant_scalar(c, 1, "limit");
  const double delta = constant_scalar(c, 2, "delta");
  if (delta == 0) c.invalid("'delta' must not be 0");
  return {call1("arange", {},
                {{"start", start}, {"end", limit}, {"step", delta}, {"dtype", c.input(0).dtype()}})};
}

Out size(const NodeContext& c) {
  return {Tensor::scalar(static_cast<double>(c.input(0).numel()), DType::Int64)};
}

Out cast_like(const NodeContext& c) {
  return {call1("cast", {c.input(0)}, {{"dtype", c.input(1).dtype()}})};
}

Out tile(const NodeContext& c) {
  const Tensor& x = c.input(0);
  const std::vector<int64_t> repeats = c.constant_ints(1, "repeats");
  if (static_cast<int64_t>(repeats.size()) != x.dim())
    c.invalid("'repeats' has {} values for an input of rank {}", repeats.size(), x.dim());
  return {call1("repeat", {x}, {{"repeats", repeats}})};
}

}  // namespace samba::onnx_import::lower
