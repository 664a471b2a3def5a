// What the loss ops share: the `reduction` attribute, the layout of
// classification inputs ((C), (N, C) or (N, C, d1, ...)) and their targets
// and weights, the stable log-sum-exp of one row of class scores, and the
// reduction of per-row losses and of their gradients.
#pragma once

#include <limits>
#include <span>
#include <string>
#include <vector>

#include "engine/core/attrs.h"
#include "engine/core/dispatch.h"
#include "engine/core/error.h"
#include "engine/core/parallel.h"
#include "engine/core/scratch.h"
#include "engine/core/strided.h"
#include "engine/core/tensor.h"
#include "engine/kernels/reduce_loops.h"

namespace samba::ops::loss {

enum class Reduction { None, Sum, Mean };

inline Reduction reduction_of(const Attrs& a, const std::string& op) {
  const std::string& r = a.s("reduction");
  if (r == "mean") return Reduction::Mean;
  if (r == "sum") return Reduction::Sum;
  if (r == "none") return Reduction::None;
  fail(Status::InvalidArgument, "{}: reduction '{}' is not one of 'mean', 'sum', 'none'", op, r);
}

inline void check_floating(const Tensor& t, const std::string& op, const char* what) {
  SAMBA_CHECK(is_floating(t.dtype()), Status::DTypeMismatch,
              "{}: {} has dtype {}; expected a floating dtype", op, what, dtype_name(t.dtype()));
}

// ---- classification: input (C), (N, C) or (N, C, d1, ...) ----------------------

// Rows are (sample, position) pairs; a row's C class scores are `s` apart.
struct ClassLayout {
  int64_t n = 1, c = 1, s = 1;
  Dims row_shape;  // the input's shape without the class dim: targets and per-row losses
  int64_t rows() const { return n * s; }
  int64_t row_offset(int64_t row) const { return (row / s) * c * s + row % s; }
};

inline ClassLayout class_layout(const Tensor& input, const std::string& op) {
  SAMBA_CHECK(input.dim() >= 1, Status::ShapeMismatch,
              "{}: input has shape {}; expected (C), (N, C) or (N, C, d1, ...)", op,
              dims_str(input.shape()));
  check_floating(input, op, "input");
  ClassLayout l;
  const Dims& sh = input.shape();
  if (input.dim() == 1) {
    l.c = sh[0];
    SAMBA_CHECK(l.c > 0, Status::ShapeMismatch,
                "{}: input of shape {} has no classes; expected at least one", op, dims_str(sh));
    return l;
  }
  l.n = sh[0];
  l.c = sh[1];
  l.row_shape.push_back(sh[0]);
  for (int64_t d = 2; d < input.dim(); ++d) l.s *= sh[d], l.row_shape.push_back(sh[d]);
  // No class, no target index or distribution it could hold (and the
  // kernels size their work by the class count).
  SAMBA_CHECK(l.c > 0, Status::ShapeMismatch,
              "{}: input of shape {} has no classes; expected at least one class in dim 1", op,
              dims_str(sh));
  return l;
}

inline bool is_index_target(const Tensor& target) { return !is_floating(target.dtype()); }

// Checks a class-index target's dtype and shape.
inline void check_index_target(const Tensor& target, const ClassLayout& l, const std::string& op) {
  SAMBA_CHECK(target.dtype() == DType::Int64 || target.dtype() == DType::Int32,
              Status::DTypeMismatch,
              "{}: target has dtype {}; expected int64 or int32 class indices, or floating class "
              "probabilities",
              op, dtype_name(target.dtype()));
  SAMBA_CHECK(target.shape() == l.row_shape, Status::ShapeMismatch,
              "{}: target of class indices has shape {}; expected {} for the input's batch and "
              "spatial dims",
              op, dims_str(target.shape()), dims_str(l.row_shape));
}

// Class-index targets as int64, each checked to be a class or ignore_index.
inline Tensor class_indices(const Tensor& target, const ClassLayout& l, int64_t ignore_index,
                            const std::string& op) {
  check_index_target(target, l, op);
  Tensor t = as_dtype(target, DType::Int64).contiguous();
  const int64_t* pt = t.data<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i)
    SAMBA_CHECK(pt[i] == ignore_index || (pt[i] >= 0 && pt[i] < l.c), Status::OutOfRange,
                "{}: target {} (element {}) is out of range for {} classes (expected 0 to {}, or "
                "ignore_index {})",
                op, pt[i], i, l.c, l.c - 1, ignore_index);
  return t;
}

// `count` elements of A in the frame's `slot` (scratch.h).
template <typename A>
std::span<A> scratch_span(ScratchFrame& frame, int slot, int64_t count) {
  return {frame.get<A>(slot, static_cast<size_t>(count)), static_cast<size_t>(count)};
}

// Per-class weights as compute type A, in the frame's `slot`; all ones when absent.
template <typename A>
std::span<A> class_weights(ScratchFrame& frame, int slot, const Tensor& weight,
                           const ClassLayout& l) {
  std::span<A> w = scratch_span<A>(frame, slot, l.c);
  if (!weight.defined()) {
    std::fill(w.begin(), w.end(), A(1));
    return w;
  }
  Tensor wa = as_dtype(weight, dtype_of<A>()).contiguous();
  std::copy_n(wa.data<A>(), l.c, w.begin());
  return w;
}

inline void check_class_inputs(std::span<const Tensor> in, const ClassLayout& l,
                               const std::string& op) {
  const Tensor& target = in[1];
  if (!is_index_target(target))
    SAMBA_CHECK(target.shape() == in[0].shape(), Status::ShapeMismatch,
                "{}: target of class probabilities has shape {}; expected the input's shape {}", op,
                dims_str(target.shape()), dims_str(in[0].shape()));
  if (in.size() > 2 && in[2].defined()) {
    check_floating(in[2], op, "weight");
    SAMBA_CHECK(in[2].shape() == Dims{l.c}, Status::ShapeMismatch,
                "{}: weight has shape {}; expected [{}] (one per class)", op,
                dims_str(in[2].shape()), l.c);
  }
}

// log(sum(exp(x[k * cs]))) over the C scores of one row, max subtracted first.
template <typename A>
A row_logsumexp(const A* x, int64_t c, int64_t cs) {
  if (cs == 1) return reduce::logsumexp_run(x, c);
  A m = -std::numeric_limits<A>::infinity(), sum = 0;
  for (int64_t k = 0; k < c; ++k) m = reduce::max_nan(m, x[k * cs]);
  if (std::isinf(m)) return m;
  for (int64_t k = 0; k < c; ++k) sum += std::exp(x[k * cs] - m);
  return std::log(sum) + m;
}

// Writes per-row values `v` reduced as `r` (mean divides by sum(denom)) into out.
template <typename A>
void reduce_rows_into(const Tensor& out, std::span<const A> v, std::span<const A> denom,
                      Reduction r) {
  SAMBA_DISPATCH_FLOAT(out.dtype(), "loss", [&] {
    scalar_t* po = out.data<scalar_t>();
    if (r == Reduction::None) {
      for (size_t i = 0; i < v.size(); ++i) po[i] = convert_value<scalar_t>(v[i]);
      return;
    }
    double total = 0, d = 0;
    for (size_t i = 0; i < v.size(); ++i) total += v[i], d += denom[i];
    po[0] = convert_value<scalar_t>(r == Reduction::Sum ? total : total / d);
  });
}

// The factor each row's gradient is scaled by: grad[row] (none), grad (sum)
// or grad / sum(denom) (mean).
template <typename A>
std::span<const A> row_scales(ScratchFrame& frame, int slot, const Tensor& grad, int64_t rows,
                              std::span<const A> denom, Reduction r) {
  Tensor g = as_dtype(grad, dtype_of<A>()).contiguous();
  const A* pg = g.data<A>();
  std::span<A> scale = scratch_span<A>(frame, slot, rows);
  if (r == Reduction::None) {
    std::copy_n(pg, rows, scale.begin());
    return scale;
  }
  double d = 1;
  if (r == Reduction::Mean) {
    d = 0;
    for (A v : denom) d += v;
  }
  std::fill(scale.begin(), scale.end(), static_cast<A>(pg[0] / d));
  return scale;
}

inline Tensor optional_input(std::span<const Tensor> in, size_t i) {
  return i < in.size() ? in[i] : Tensor();
}

}  // namespace samba::ops::loss
