// Lowerings of ONNX reductions, arg-reductions, scans and losses to registry ops.
#include "engine/onnx/lowerings.h"
#include "engine/ops/registry.h"

namespace samba::onnx_import::lower {
namespace {

Tensor wrapped_scalar(double v, const Tensor& like) {
  return Tensor::scalar(v, like.dtype(), true);
}

}  // namespace

Out reduce_of(const NodeContext& c, std::string_view kind) {
  const Tensor& x = c.input(0);
  if (kind == "l1") return reduce(c, "sum", call1("abs", {x}));
  if (kind == "sum_square") return reduce(c, "sum", call1("mul", {x, x}));
  if (kind == "l2") return {call1("sqrt", {reduce(c, "sum", call1("mul", {x, x})).at(0)})};
  if (kind == "log_sum") return {call1("log", {reduce(c, "sum", x).at(0)})};
  c.unsupported("reduction '{}' has no lowering", kind);
}

Out arg_reduce(const NodeContext& c, std::string_view op) {
  const Tensor& x = c.input(0);
  const int64_t axis = axis_in(c, c.attr_int("axis", 0), x.dim(), "axis");
  const Attrs attrs{{"dim", axis}, {"keepdim", c.attr_int("keepdims", 1) != 0}};
  if (c.attr_int("select_last_index", 0) == 0) return {call1(op, {x}, attrs)};
  // The last extreme is the first one of the reversed axis, counted back.
  const int64_t n = x.size(axis);
  std::vector<int64_t> reversed(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) reversed[static_cast<size_t>(i)] = n - 1 - i;
  const Tensor first =
      call1(op, {call1("index_select", {x, int64_vector(reversed)}, {{"dim", axis}})}, attrs);
  return {call1("add", {call1("neg", {first}),
                        Tensor::scalar(static_cast<double>(n - 1), first.dtype(), true)})};
}

Out cumsum(const NodeContext& c) {
  const Tensor& x = c.input(0);
  const std::vector<int64_t> axis = c.constant_ints(1, "axis");
  if (axis.size() != 1) c.invalid("'axis' must hold one value, got {}", axis.size());
  Tensor y = call1(
      "cumsum", {x},
      {{"dim", axis_in(c, axis[0], x.dim(), "axis")}, {"reverse", c.attr_int("reverse", 0) != 0}});
  // Exclusive: each element leaves itself out of its sum.
  if (c.attr_int("exclusive", 0) != 0) y = call1("sub", {y, x});
  return {y};
}

Out mean_of_inputs(const NodeContext& c) {
  Tensor acc = variadic(c, "add").at(0);
  if (c.input_count() == 1) return {acc};
  return {call1("div", {acc, wrapped_scalar(static_cast<double>(c.input_count()), acc)})};
}

namespace {

// nll_loss takes (N, C) scores and (N) targets; ONNX allows (N, C, d1, ...)
// and (N, d1, ...), which are the same loss over N * d1 * ... rows.
Out nll_over_rows(const NodeContext& c, const Tensor& log_prob, const Tensor& target,
                  const Tensor* weight) {
  const std::string reduction = c.attr_string("reduction", "mean");
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    c.unsupported("reduction '{}'; supported: none, sum, mean", reduction);
  if (log_prob.dim() < 2)
    c.invalid("the input must be (N, C, ...), got {}", dims_str(log_prob.shape()));
  Tensor scores = log_prob, labels = target;
  if (log_prob.dim() > 2) {
    std::vector<int64_t> perm{0};
    for (int64_t d = 2; d < log_prob.dim(); ++d) perm.push_back(d);
    perm.push_back(1);
    scores = call1("reshape", {call1("permute", {log_prob}, {{"dims", perm}})},
                   {{"shape", Dims{-1, log_prob.size(1)}}});
    labels = call1("reshape", {target}, {{"shape", Dims{-1}}});
  }
  Attrs attrs{{"reduction", reduction}};
  // Without ignore_index every target is a class, so the registry's default
  // (-100) never matches one.
  if (c.node().attrs.has("ignore_index")) attrs.set("ignore_index", c.attr_int("ignore_index", 0));
  labels = call1("cast", {labels}, {{"dtype", DType::Int64}});
  Tensor loss = weight ? call1("nll_loss", {scores, labels, *weight}, attrs)
                       : call1("nll_loss", {scores, labels}, attrs);
  if (reduction == "none" && log_prob.dim() > 2)
    loss = call1("reshape", {loss}, {{"shape", target.shape()}});
  return {loss};
}

}  // namespace

Out negative_log_likelihood_loss(const NodeContext& c) {
  return nll_over_rows(c, c.input(0), c.input(1), c.optional_input(2));
}

Out softmax_cross_entropy_loss(const NodeContext& c) {
  const Tensor log_prob = call1("log_softmax", {c.input(0)}, {{"dim", int64_t{1}}});
  Out out = nll_over_rows(c, log_prob, c.input(1), c.optional_input(2));
  if (c.output_count() > 1) out.push_back(log_prob);
  return out;
}

}  // namespace samba::onnx_import::lower
