// Statistical reductions and scans: var, std, logsumexp and cumsum, with the
// fused backward ops their gradients use.
#include <cmath>
#include <limits>

#include "engine/kernels/reduce_loops.h"
#include "engine/ops/operands.h"

namespace samba::ops {
namespace {

double var_divisor(const ReduceDims& rd, int64_t correction) {
  return std::max<double>(0.0, static_cast<double>(rd.count) - static_cast<double>(correction));
}

// Mean of x (element type A, contiguous or strided) over rd, one per result.
template <typename A>
std::vector<A> means(const ReduceLayout& l, const ReduceDims& rd) {
  std::vector<A> mean(l.results());
  const A inv = A(1) / static_cast<A>(rd.count);
  reduce::run<A, A>(
      l, A(0), [](A v, int64_t) { return v; }, [](A a, A b) { return a + b; },
      [&](int64_t o, A s) { mean[o] = s * inv; });
  return mean;
}

// Variance (or its square root) of xa into out, both of type A: the sum of
// squared deviations from the mean, two passes for stability.
template <typename A>
void var_kernel(const Tensor& xa, const ReduceDims& rd, int64_t correction, bool take_sqrt,
                const Tensor& out) {
  ReduceLayout l = reduce_layout(xa, rd.mask);
  std::vector<A> mean = means<A>(l, rd);
  const A* pm = mean.data();
  const A div = static_cast<A>(var_divisor(rd, correction));
  A* po = out.data<A>();
  reduce::run<A, A>(
      l, A(0),
      [pm](A v, int64_t o) {
        A d = v - pm[o];
        return d * d;
      },
      [](A a, A b) { return a + b; },
      [&](int64_t o, A ss) { po[o] = take_sqrt ? std::sqrt(ss / div) : ss / div; }, 2);
}

// log(sum(exp(x))) of xa into out, both of type A, with the max subtracted
// first; an all -inf (or +inf) slice gives -inf (+inf) rather than NaN.
template <typename A>
void logsumexp_kernel(const Tensor& xa, const ReduceDims& rd, const Tensor& out) {
  ReduceLayout l = reduce_layout(xa, rd.mask);
  A* po = out.data<A>();
  if (l.inner == 1 && l.segments == 1) {
    // Rows, the common case: Eigen vectorizes the exponentials.
    const A* base = l.base<A>();
    parallel_for(l.outer, std::max<int64_t>(1, kMinGrain / (8 * std::max<int64_t>(l.reduce, 1))),
                 [&](int64_t b, int64_t e) {
                   for (int64_t a = b; a < e; ++a)
                     po[a] = reduce::logsumexp_run(base + a * l.outer_stride, l.reduce);
                 });
    return;
  }
  std::vector<A> shift(l.results());
  reduce::run<A, A>(
      l, -std::numeric_limits<A>::infinity(), [](A v, int64_t) { return v; },
      [](A a, A b) { return reduce::max_nan(a, b); },
      [&](int64_t o, A m) { shift[o] = std::isinf(m) ? A(0) : m; });
  const A* ps = shift.data();
  reduce::run<A, A>(
      l, A(0), [ps](A v, int64_t o) { return std::exp(v - ps[o]); }, [](A a, A b) { return a + b; },
      [&](int64_t o, A sum) { po[o] = std::log(sum) + ps[o]; }, 10);
}

// grad * exp(x - result) into out, all of type A (grad and result with the
// reduced dims kept as size 1).
template <typename A>
void logsumexp_backward_kernel(const Tensor& grad, const Tensor& xa, const Tensor& result,
                               const ReduceDims& rd, const Tensor& out) {
  ReduceLayout l = reduce_layout(xa, rd.mask);
  if (l.inner == 1 && l.segments == 1 && l.source.impl() == xa.impl() && xa.is_contiguous()) {
    // Contiguous rows: Eigen vectorizes the exponentials.
    const A *px = xa.data<A>(), *pr = result.data<A>(), *pg = grad.data<A>();
    A* po = out.data<A>();
    const int64_t R = l.reduce;
    parallel_for(l.outer, std::max<int64_t>(1, kMinGrain / (8 * std::max<int64_t>(R, 1))),
                 [&](int64_t b, int64_t e) {
                   for (int64_t a = b; a < e; ++a) {
                     const int64_t at = a * l.outer_stride;
                     reduce::Run<A>(po + at, R) =
                         pg[a] * (reduce::ConstRun<A>(px + at, R) - pr[a]).exp();
                   }
                 });
    return;
  }
  reduce::broadcast_map<A, A, 3>(out, {xa, result, grad},
                                 [](A v, A lse, A g) { return g * std::exp(v - lse); });
}

// Inclusive prefix sums of x along `dim` (from the end when reverse). x is
// contiguous with a dtype whose natural sum dtype is out's.
void cumsum_kernel(const Tensor& x, int64_t dim, bool reverse, const Tensor& out) {
  int64_t A = 1, B = 1;
  for (int64_t d = 0; d < dim; ++d) A *= x.shape()[d];
  for (int64_t d = dim + 1; d < x.dim(); ++d) B *= x.shape()[d];
  const int64_t R = x.dim() == 0 ? 1 : x.shape()[dim];
  if (A * B * R == 0) return;
  SAMBA_DISPATCH_ALL(x.dtype(), "cumsum", [&] {
    using Acc = reduce::sum_acc_t<scalar_t>;
    using O = reduce::sum_out_t<scalar_t>;
    const scalar_t* px = x.data<scalar_t>();
    O* po = out.data<O>();
    const int64_t first = reverse ? R - 1 : 0, step = reverse ? -1 : 1;
    if (B == 1) {
      parallel_for(A, std::max<int64_t>(1, kMinGrain / R), [&](int64_t b, int64_t e) {
        for (int64_t a = b; a < e; ++a) {
          const scalar_t* row = px + a * R;
          O* orow = po + a * R;
          Acc acc = 0;
          for (int64_t i = 0, r = first; i < R; ++i, r += step) {
            acc += static_cast<Acc>(row[r]);
            orow[r] = convert_value<O>(acc);
          }
        }
      });
      return;
    }
    const int64_t tiles = (B + reduce::kTile - 1) / reduce::kTile;
    parallel_for(A * tiles, std::max<int64_t>(1, kMinGrain / (R * std::min(B, reduce::kTile))),
                 [&](int64_t b, int64_t e) {
                   std::array<Acc, reduce::kTile> acc;
                   for (int64_t u = b; u < e; ++u) {
                     const int64_t a = u / tiles, b0 = (u % tiles) * reduce::kTile;
                     const int64_t w = std::min(reduce::kTile, B - b0);
                     std::fill(acc.begin(), acc.begin() + w, Acc(0));
                     for (int64_t i = 0, r = first; i < R; ++i, r += step) {
                       const int64_t at = (a * R + r) * B + b0;
                       for (int64_t j = 0; j < w; ++j) {
                         acc[j] += static_cast<Acc>(px[at + j]);
                         po[at + j] = convert_value<O>(acc[j]);
                       }
                     }
                   }
                 });
  });
}

// A backward op's input `i` (grad or result, shaped like the reduction's
// result) in compute type A with the reduced dims kept as size 1.
template <typename A>
Tensor kept(const KernelContext& c, int i, const ReduceDims& rd) {
  return reshaped(as_dtype(c.inputs[i], dtype_of<A>()), rd.kept_shape);
}

std::vector<TensorMeta> infer_reduce_backward(const InferContext& c) {
  const char* op = c.op.name.c_str();
  const Tensor& x = c.inputs[1];
  ReduceDims rd = reduce_dims(x.shape(), c.attrs, op);
  for (int i : {0, 2})
    SAMBA_CHECK(c.inputs[i].shape() == rd.out_shape, Status::ShapeMismatch,
                "{}: {} has shape {}; expected {}", op, i == 0 ? "grad" : "result",
                dims_str(c.inputs[i].shape()), dims_str(rd.out_shape));
  SAMBA_CHECK(is_floating(x.dtype()), Status::DTypeMismatch,
              "{}: x has dtype {}; gradients need a floating dtype", op, dtype_name(x.dtype()));
  return {meta_of(x)};
}

void def_var(OpRegistry& r, const char* name, bool is_std) {
  r.def(name)
      .doc(is_std
               ? "Standard deviation over `dim` (all dims when absent) with divisor "
                 "max(0, N - correction)."
               : "Variance over `dim` (all dims when absent) with divisor max(0, N - correction).")
      .input("x")
      .optional_attr("dim", AttrType::Ints, "dims to reduce; none or [] reduces all")
      .attr("correction", AttrType::Int, int64_t{1},
            "subtracted from the element count (1: unbiased)")
      .attr("keepdim", AttrType::Bool, false)
      .fusion(Fusion::Reduction)
      .strided_inputs()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        SAMBA_CHECK(is_floating(x.dtype()), Status::DTypeMismatch,
                    "{}: input dtype {} is not floating", c.op.name, dtype_name(x.dtype()));
        return {{x.dtype(), reduce_dims(x.shape(), c.attrs, c.op.name.c_str()).out_shape}};
      })
      .kernel([is_std](KernelContext& c) {
        const Tensor& x = c.inputs[0];
        ReduceDims rd = reduce_dims(x.shape(), c.attrs, c.op.name.c_str());
        const int64_t corr = c.attrs.i("correction");
        reduce::with_compute_output(c.outputs[0], [&]<typename A>(const Tensor& out) {
          var_kernel<A>(as_dtype(x, dtype_of<A>()), rd, corr, is_std, out);
        });
      })
      .grad([is_std](const GradContext& c) -> std::vector<Tensor> {
        Attrs a{{"dim", *c.attrs.find("dim")},
                {"correction", c.attrs.i("correction")},
                {"keepdim", c.attrs.b("keepdim")},
                {"std", is_std}};
        return {call1("var_backward", {c.grad_outputs[0], c.inputs[0], c.outputs[0]}, a)};
      });
}

}  // namespace

void register_reduction_stats(OpRegistry& r) {
  def_var(r, "var", false);
  def_var(r, "std", true);

  r.def("var_backward")
      .doc(
          "Gradient of var (or std when `std`) over `dim`: grad * 2 (x - mean) / divisor, "
          "divided by 2 * std for std (0 where std is 0).")
      .input("grad", "gradient of the result")
      .input("x", "the reduced input")
      .input("result", "var or std of x")
      .optional_attr("dim", AttrType::Ints, "dims that were reduced; none or [] means all")
      .attr("correction", AttrType::Int, int64_t{1})
      .attr("keepdim", AttrType::Bool, false)
      .attr("std", AttrType::Bool, false, "result is a standard deviation")
      .fusion(Fusion::Opaque)
      .infer(infer_reduce_backward)
      .kernel([](KernelContext& c) {
        ReduceDims rd = reduce_dims(c.inputs[1].shape(), c.attrs, "var_backward");
        const double div = var_divisor(rd, c.attrs.i("correction"));
        const bool is_std = c.attrs.b("std");
        reduce::with_compute_output(c.outputs[0], [&]<typename A>(const Tensor& out) {
          Tensor xa = as_dtype(c.inputs[1], dtype_of<A>());
          Tensor grad = kept<A>(c, 0, rd), result = kept<A>(c, 2, rd);
          std::vector<A> mean = means<A>(reduce_layout(xa, rd.mask), rd);
          Tensor mean_t = Tensor::empty(rd.kept_shape, dtype_of<A>());
          Tensor scale = Tensor::empty(rd.kept_shape, dtype_of<A>());
          const A *pg = grad.data<A>(), *pr = result.data<A>();
          A *ps = scale.data<A>(), *pm = mean_t.data<A>();
          for (size_t o = 0; o < mean.size(); ++o) {
            pm[o] = mean[o];
            if (is_std)
              ps[o] = pr[o] == A(0) ? A(0) : pg[o] / (static_cast<A>(div) * pr[o]);
            else
              ps[o] = A(2) * pg[o] / static_cast<A>(div);
          }
          reduce::broadcast_map<A, A, 3>(out, {xa, mean_t, scale},
                                         [](A v, A m, A s) { return (v - m) * s; });
        });
      });

  r.def("logsumexp")
      .doc(
          "log(sum(exp(x))) over `dim` (all dims when absent), computed stably; integer inputs "
          "give float32.")
      .input("x")
      .optional_attr("dim", AttrType::Ints, "dims to reduce; none or [] reduces all")
      .attr("keepdim", AttrType::Bool, false)
      .fusion(Fusion::Reduction)
      .strided_inputs()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        DType dt = is_floating(x.dtype()) ? x.dtype() : DType::Float32;
        return {{dt, reduce_dims(x.shape(), c.attrs, "logsumexp").out_shape}};
      })
      .kernel([](KernelContext& c) {
        const Tensor& x = c.inputs[0];
        ReduceDims rd = reduce_dims(x.shape(), c.attrs, "logsumexp");
        reduce::with_compute_output(c.outputs[0], [&]<typename A>(const Tensor& out) {
          logsumexp_kernel<A>(as_dtype(x, dtype_of<A>()), rd, out);
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        Attrs a{{"dim", *c.attrs.find("dim")}, {"keepdim", c.attrs.b("keepdim")}};
        return {call1("logsumexp_backward", {c.grad_outputs[0], c.inputs[0], c.outputs[0]}, a)};
      });

  r.def("logsumexp_backward")
      .doc("Gradient of logsumexp over `dim`: grad * exp(x - result).")
      .input("grad", "gradient of the result")
      .input("x", "the reduced input")
      .input("result", "logsumexp of x")
      .optional_attr("dim", AttrType::Ints, "dims that were reduced; none or [] means all")
      .attr("keepdim", AttrType::Bool, false)
      .fusion(Fusion::Opaque)
      .infer(infer_reduce_backward)
      .kernel([](KernelContext& c) {
        ReduceDims rd = reduce_dims(c.inputs[1].shape(), c.attrs, "logsumexp_backward");
        reduce::with_compute_output(c.outputs[0], [&]<typename A>(const Tensor& out) {
          logsumexp_backward_kernel<A>(kept<A>(c, 0, rd), as_dtype(c.inputs[1], dtype_of<A>()),
                                       kept<A>(c, 2, rd), rd, out);
        });
      });

  r.def("cumsum")
      .doc(
          "Inclusive cumulative sum along `dim` (from the end when reverse). Integers and bool "
          "sum to int64.")
      .input("x")
      .required_attr("dim", AttrType::Int, "dim to scan along")
      .optional_attr("dtype", AttrType::DType, "accumulate and return in this dtype")
      .attr("reverse", AttrType::Bool, false, "scan from the last element to the first")
      .fusion(Fusion::Reduction)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        wrap_dim(c.attrs.i("dim"), x.dim(), "cumsum");
        DType dt =
            c.attrs.has("dtype") ? c.attrs.dtype("dtype") : reduce::natural_sum_dtype(x.dtype());
        SAMBA_CHECK(dt != DType::Bool, Status::DTypeMismatch,
                    "cumsum: dtype bool cannot hold a sum; use int64 or a floating dtype");
        return {{dt, x.shape()}};
      })
      .kernel([](KernelContext& c) {
        const Tensor& x = c.inputs[0];
        const Tensor& out = c.outputs[0];
        const int64_t dim = x.dim() == 0 ? 0 : wrap_dim(c.attrs.i("dim"), x.dim(), "cumsum");
        Tensor xs = reduce::natural_sum_dtype(x.dtype()) == out.dtype() ? x : x.to(out.dtype());
        cumsum_kernel(xs, dim, c.attrs.b("reverse"), out);
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1("cumsum", {c.grad_outputs[0]},
                      {{"dim", c.attrs.i("dim")}, {"reverse", !c.attrs.b("reverse")}})};
      });
}

}  // namespace samba::ops
