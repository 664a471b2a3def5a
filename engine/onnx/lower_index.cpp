// Lowerings of ONNX indexing and creation ops to registry ops.
#include <cmath>

#include "engine/onnx/lowerings.h"
#include "engine/ops/registry.h"

namespace samba::onnx_import::lower {
namespace {

// A scalar input that must be known at import (Range's bounds).
double constant_scalar(const NodeContext& c, size_t i, std::string_view what) {
  const Tensor& t = c.input(i);
  if (!t.has_data() || t.is_symbolic() || t.requires_grad())
    c.unsupported(
        "input '{}' must be known when the model is imported (an initializer, a "
        "Constant, or computed from them); it is computed from the graph's inputs",
        what);
  if (t.numel() != 1)
    c.invalid("input '{}' must be a scalar, got shape {}", what, dims_str(t.shape()));
  return t.item_double();
}

}  // namespace

namespace {

// ONNX counts negative indices from the end of the axis; the registry does not.
Tensor wrapped_index(const Tensor& index, int64_t size) {
  const Tensor i64 = call1("cast", {index}, {{"dtype", DType::Int64}});
  const Tensor n = Tensor::scalar(static_cast<double>(size), DType::Int64, true);
  const Tensor zero = Tensor::scalar(0, DType::Int64, true);
  return call1("where", {call1("lt", {i64, zero}), call1("add", {i64, n}), i64});
}

}  // namespace

namespace {

// 0, 1, ..., n - 1 laid along dim `axis` of a tensor of rank `rank` (size 1
// elsewhere), to compare against indices by broadcasting.
Tensor positions_along(int64_t n, int64_t axis, int64_t rank) {
  Dims shape(static_cast<size_t>(rank), 1);
  shape[static_cast<size_t>(axis)] = n;
  const Tensor seq =
      call1("arange", {}, {{"end", static_cast<double>(n)}, {"dtype", DType::Int64}});
  return call1("reshape", {seq}, {{"shape", shape}});
}

}  // namespace

Out hardmax(const NodeContext& c) {
  const Tensor& x = c.input(0);
  const int64_t axis = axis_in(c, c.attr_int("axis", -1), x.dim(), "axis");
  // One at the first maximum along the axis, zero elsewhere.
  const Tensor first = call1("argmax", {x}, {{"dim", axis}, {"keepdim", true}});
  const Tensor hit = call1("eq", {positions_along(x.size(axis), axis, x.dim()), first});
  return {call1("cast", {hit}, {{"dtype", x.dtype()}})};
}

Out one_hot(const NodeContext& c) {
  const Tensor& indices = c.input(0);
  // Any numeric type; a fractional depth counts its whole part.
  const double depth_value = constant_scalar(c, 1, "depth");
  if (!(depth_value >= 1 && depth_value <= static_cast<double>(kMaxDim)))
    c.invalid("'depth' must be in [1, 2^32], got {}", depth_value);
  const auto depth = static_cast<int64_t>(depth_value);
  const Tensor& values = c.input(2);
  if (values.numel() != 2)
    c.invalid("'values' must hold [off, on], got {}", dims_str(values.shape()));
  const int64_t rank = indices.dim() + 1;
  const int64_t axis = axis_in(c, c.attr_int("axis", -1), rank, "axis");
  const Tensor idx = call1("unsqueeze", {wrapped_index(indices, depth)}, {{"dim", axis}});
  const Tensor hit = call1("eq", {idx, positions_along(depth, axis, rank)});
  const Tensor flat = call1("reshape", {values}, {{"shape", Dims{2}}});
  const Tensor off = call1("select", {flat}, {{"dim", int64_t{0}}, {"index", int64_t{0}}});
  const Tensor on = call1("select", {flat}, {{"dim", int64_t{0}}, {"index", int64_t{1}}});
  return {call1("where", {hit, on, off})};
}

Out eye_like(const NodeContext& c) {
  const Tensor& x = c.input(0);
  if (x.dim() != 2) c.invalid("the input must be 2-D, got {}", dims_str(x.shape()));
  const DType dt = c.node().attrs.has("dtype")
                       ? dtype_of_onnx(static_cast<int32_t>(c.attr_int("dtype", 1)),
                                       c.where() + " attribute 'dtype'")
                       : x.dtype();
  // Ones where column - row == k.
  const Tensor diff =
      call1("sub", {positions_along(x.size(1), 1, 2), positions_along(x.size(0), 0, 2)});
  const Tensor k = Tensor::scalar(static_cast<double>(c.attr_int("k", 0)), DType::Int64, true);
  return {call1("cast", {call1("eq", {diff, k})}, {{"dtype", dt}})};
}

Out gather_elements(const NodeContext& c) {
  const Tensor& x = c.input(0);
  const int64_t axis = axis_in(c, c.attr_int("axis", 0), x.dim(), "axis");
  return {call1("gather", {x, wrapped_index(c.input(1), x.size(axis))}, {{"dim", axis}})};
}

Out scatter_elements(const NodeContext& c) {
  const Tensor& x = c.input(0);
  const int64_t axis = axis_in(c, c.attr_int("axis", 0), x.dim(), "axis");
  const std::string reduction = c.attr_string("reduction", "none");
  if (reduction != "none" && reduction != "add")
    c.unsupported("reduction '{}'; supported: none, add", reduction);
  return {call1(reduction == "add" ? "scatter_add" : "scatter",
                {x, wrapped_index(c.input(1), x.size(axis)), c.input(2)}, {{"dim", axis}})};
}

Out top_k(const NodeContext& c) {
  const Tensor& x = c.input(0);
  const std::vector<int64_t> k = c.constant_ints(1, "K");
  if (k.size() != 1 || k[0] < 0) c.invalid("'K' must hold one non-negative value");
  const int64_t axis = axis_in(c, c.attr_int("axis", -1), x.dim(), "axis");
  return call("topk", {x},
              {{"k", k[0]},
               {"dim", axis},
               {"largest", c.attr_int("largest", 1) != 0},
               {"sorted", c.attr_int("sorted", 1) != 0}});
}

Out depth_space(const NodeContext& c, bool to_space) {
  const Tensor& x = c.input(0);
  if (x.dim() != 4) c.invalid("the input must be (N, C, H, W), got {}", dims_str(x.shape()));
  const int64_t b = c.attr_int("blocksize", 0);
  if (b <= 0) c.invalid("blocksize must be positive, got {}", b);
  const int64_t n = x.size(0), ch = x.size(1), h = x.size(2), w = x.size(3);
  auto reshape = [](const Tensor& t, Dims shape) {
    return call1("reshape", {t}, {{"shape", shape}});
  };
  auto permute = [](const Tensor& t, std::vector<int64_t> dims) {
    return call1("permute", {t}, {{"dims", dims}});
  };
  if (!to_space) {  // SpaceToDepth
    if (h % b || w % b) c.invalid("H and W ({}, {}) must be multiples of blocksize {}", h, w, b);
    const Tensor t = permute(reshape(x, {n, ch, h / b, b, w / b, b}), {0, 3, 5, 1, 2, 4});
    return {reshape(t, {n, ch * b * b, h / b, w / b})};
  }
  if (b > ch / b || ch % (b * b))
    c.invalid("C ({}) must be a multiple of blocksize^2 (blocksize {})", ch, b);
  const int64_t c2 = ch / (b * b);
  const bool crd = c.attr_string("mode", "DCR") == "CRD";
  const Tensor t = crd ? permute(reshape(x, {n, c2, b, b, h, w}), {0, 1, 4, 2, 5, 3})
                       : permute(reshape(x, {n, b, b, c2, h, w}), {0, 3, 4, 1, 5, 2});
  return {reshape(t, {n, c2, h * b, w * b})};
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
  if (!std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta) || delta == 0)
    c.invalid("start, limit and delta must be finite and delta not 0, got {}, {}, {}", start, limit,
              delta);
  if ((limit - start) / delta > static_cast<double>(kMaxDim))
    c.unsupported("the range has more than 2^32 elements");
  return {
      call1("arange", {},
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
  for (size_t d = 0; d < repeats.size(); ++d)
    if (repeats[d] < 0 ||
        (repeats[d] > 0 && x.size(static_cast<int64_t>(d)) > kMaxDim / repeats[d]))
      c.invalid("repeats {} must be non-negative and keep each dim within 2^32", repeats[d]);
  return {call1("repeat", {x}, {{"repeats", repeats}})};
}

}  // namespace samba::onnx_import::lower
