// Reductions over dims with keepdim: sum, mean, max and min (values, like
// torch.amax/amin), argmax and argmin.
#include <cmath>
#include <limits>

#include "engine/kernels/reduce_loops.h"
#include "engine/ops/operands.h"

namespace samba::ops {
namespace {

using reduce::is_nan;
using reduce::natural_sum_dtype;

// out = scale * (sum of x over rd's dims); out has natural_sum_dtype(x).
void sum_kernel(const Tensor& x, const ReduceDims& rd, const Tensor& out, double scale) {
  ReduceLayout l = reduce_layout(x, rd.mask);
  SAMBA_DISPATCH_ALL(x.dtype(), "sum", [&] {
    using Acc = reduce::sum_acc_t<scalar_t>;
    using O = reduce::sum_out_t<scalar_t>;
    O* po = out.data<O>();
    // Integer sums are never scaled (mean needs a floating dtype).
    const Acc s = std::is_floating_point_v<Acc> ? static_cast<Acc>(scale) : Acc(1);
    reduce::run<scalar_t, Acc>(
        l, Acc(0), [](scalar_t v, int64_t) { return static_cast<Acc>(v); },
        [](Acc a, Acc b) { return a + b; },
        [&](int64_t o, Acc v) { po[o] = convert_value<O>(v * s); });
  });
}

// The attributes a reduction's gradient rule passes on to a backward op.
Attrs dims_attrs(const Attrs& a) { return {{"dim", *a.find("dim")}, {"keepdim", a.b("keepdim")}}; }

// The gradient of a reduction that sums (scale = 1) or averages: g spread back over x.
Tensor spread_back(const GradContext& c, double scale) {
  const Tensor& x = c.inputs[0];
  ReduceDims rd = reduce_dims(x.shape(), c.attrs, c.op.name.c_str());
  Tensor g = c.grad_outputs[0];
  // A 0-d gradient (a scalar loss) meets a 0-d number: a compiled program
  // keeps the number as a 0-d constant of its own dtype, which would then
  // promote the product, so the number takes the gradient's float dtype.
  if (scale != 1.0) {
    const bool float_loss =
        g.dim() == 0 && (g.dtype() == DType::Float32 || g.dtype() == DType::Float64);
    g = call1("mul", {g, float_loss ? Tensor::scalar(scale, g.dtype(), true) : wrap_scalar(scale)});
  }
  g = call1("reshape", {g}, {{"shape", rd.kept_shape}});
  return call1("expand", {g}, {{"shape", x.shape()}});
}

// The dtype max, min, argmax and argmin compute in: float32 for bf16/fp16,
// int64 for the narrower integers and bool (exact either way), so their
// kernels are compiled for three types only.
DType extreme_dtype(DType t) {
  if (t == DType::Float32 || t == DType::Float64 || t == DType::Int64) return t;
  return is_floating(t) ? DType::Float32 : DType::Int64;
}

template <typename F>
void dispatch_extreme(DType t, F&& fn) {
  switch (t) {
    case DType::Float32:
      return fn.template operator()<float>();
    case DType::Float64:
      return fn.template operator()<double>();
    case DType::Int64:
      return fn.template operator()<int64_t>();
    default:
      fail(Status::Internal, "dispatch_extreme: dtype {}", dtype_name(t));
  }
}

void check_nonempty(const Tensor& x, const ReduceDims& rd, const char* op) {
  SAMBA_CHECK(rd.count > 0, Status::InvalidArgument,
              "{}: cannot reduce over zero elements (input shape {}); the reduced dims must not "
              "have size 0",
              op, dims_str(x.shape()));
}

// max (kMax) or min over rd's dims; NaN wins, as in torch.amax.
template <bool kMax>
void extreme_kernel(const Tensor& x0, const ReduceDims& rd, const Tensor& out) {
  Tensor x = as_dtype(x0, extreme_dtype(x0.dtype()));
  Tensor result = out.dtype() == x.dtype() ? out : Tensor::empty(out.shape(), x.dtype());
  ReduceLayout l = reduce_layout(x, rd.mask);
  dispatch_extreme(x.dtype(), [&]<typename T>() {
    T init;
    if constexpr (std::numeric_limits<T>::has_infinity)
      init = kMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    else
      init = kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    T* po = result.data<T>();
    reduce::run<T, T>(
        l, init, [](T v, int64_t) { return v; },
        [](T a, T b) { return kMax ? reduce::max_nan(a, b) : reduce::min_nan(a, b); },
        [&](int64_t o, T v) { po[o] = v; });
  });
  if (result.impl() != out.impl()) out.copy_from(result);
}

// Index of the max (kMax) or min along the reduced elements; the first on
// ties, and the first NaN when there is one (NaN counts as the extreme).
template <bool kMax>
void arg_kernel(const Tensor& x0, const ReduceDims& rd, const Tensor& out) {
  Tensor x = as_dtype(x0, extreme_dtype(x0.dtype()));
  ReduceLayout l = reduce_layout(x, rd.mask, false);
  const int64_t A = l.outer, R = l.reduce, B = l.inner;
  int64_t* po = out.data<int64_t>();
  if (A * B == 0) return;
  dispatch_extreme(x.dtype(), [&]<typename scalar_t>() {
    using V = scalar_t;
    auto better = [](V v, V best) {
      if constexpr (kMax)
        return v > best || (is_nan(v) && !is_nan(best));
      else
        return v < best || (is_nan(v) && !is_nan(best));
    };
    const scalar_t* base = l.base<scalar_t>();
    // The best value of p[r0, r1) (unit stride) and its first index: a
    // vectorized max/min pass, then a search for the first element equal to it.
    auto id = [](scalar_t v, int64_t) { return static_cast<V>(v); };
    auto pick = [](V a, V b) { return kMax ? reduce::max_nan(a, b) : reduce::min_nan(a, b); };
    auto scan = [&](const scalar_t* p, int64_t r0, int64_t r1) {
      const V best = reduce::accumulate_run(p + r0, r1 - r0, 0, static_cast<V>(p[r0]), id, pick);
      int64_t at = r0;
      if (is_nan(best))
        while (!is_nan(static_cast<V>(p[at]))) ++at;
      else
        while (static_cast<V>(p[at]) != best) ++at;
      return std::pair<V, int64_t>{best, at};
    };
    if (B == 1) {
      const int64_t pieces = (R + reduce::kSplit - 1) / reduce::kSplit;
      if (A < reduce::kFewResults && pieces > 1) {
        std::vector<std::pair<V, int64_t>> part(A * pieces);
        parallel_for(A * pieces, 1, [&](int64_t b, int64_t e) {
          for (int64_t u = b; u < e; ++u) {
            const int64_t r0 = (u % pieces) * reduce::kSplit;
            part[u] =
                scan(base + (u / pieces) * l.outer_stride, r0, std::min(R, r0 + reduce::kSplit));
          }
        });
        for (int64_t a = 0; a < A; ++a) {
          auto best = part[a * pieces];
          for (int64_t k = 1; k < pieces; ++k)
            if (better(part[a * pieces + k].first, best.first)) best = part[a * pieces + k];
          po[a] = best.second;
        }
        return;
      }
      parallel_for(A, std::max<int64_t>(1, kMinGrain / R), [&](int64_t b, int64_t e) {
        for (int64_t a = b; a < e; ++a) po[a] = scan(base + a * l.outer_stride, 0, R).second;
      });
      return;
    }
    const int64_t tiles = (B + reduce::kTile - 1) / reduce::kTile;
    parallel_for(A * tiles, std::max<int64_t>(1, kMinGrain / (R * std::min(B, reduce::kTile))),
                 [&](int64_t b, int64_t e) {
                   std::array<V, reduce::kTile> best;
                   std::array<int64_t, reduce::kTile> at;
                   for (int64_t u = b; u < e; ++u) {
                     const int64_t a = u / tiles, b0 = (u % tiles) * reduce::kTile;
                     const int64_t w = std::min(reduce::kTile, B - b0);
                     const scalar_t* p = base + a * l.outer_stride + b0;
                     for (int64_t j = 0; j < w; ++j) best[j] = static_cast<V>(p[j]), at[j] = 0;
                     for (int64_t r = 1; r < R; ++r) {
                       const scalar_t* row = p + r * l.reduce_stride;
                       for (int64_t j = 0; j < w; ++j) {
                         V v = static_cast<V>(row[j]);
                         if (better(v, best[j])) best[j] = v, at[j] = r;
                       }
                     }
                     for (int64_t j = 0; j < w; ++j) po[a * B + b0 + j] = at[j];
                   }
                 });
  });
}

void def_extreme(OpRegistry& r, const char* name, bool is_max) {
  r.def(name)
      .doc(is_max ? "Largest value over `dim` (all dims when absent), like torch.amax; NaN wins."
                  : "Smallest value over `dim` (all dims when absent), like torch.amin; NaN wins.")
      .input("x")
      .optional_attr("dim", AttrType::Ints, "dims to reduce; none or [] reduces all")
      .attr("keepdim", AttrType::Bool, false)
      .fusion(Fusion::Reduction)
      .strided_inputs()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        ReduceDims rd = reduce_dims(x.shape(), c.attrs, c.op.name.c_str());
        check_nonempty(x, rd, c.op.name.c_str());
        return {{x.dtype(), rd.out_shape}};
      })
      .kernel([is_max](KernelContext& c) {
        ReduceDims rd = reduce_dims(c.inputs[0].shape(), c.attrs, c.op.name.c_str());
        if (is_max)
          extreme_kernel<true>(c.inputs[0], rd, c.outputs[0]);
        else
          extreme_kernel<false>(c.inputs[0], rd, c.outputs[0]);
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1("extremum_backward", {c.grad_outputs[0], c.inputs[0], c.outputs[0]},
                      dims_attrs(c.attrs))};
      });
}

void def_arg(OpRegistry& r, const char* name, bool is_max) {
  r.def(name)
      .doc(is_max ? "Index (int64) of the largest value along `dim`, or of the flattened input "
                    "when `dim` is absent; the first one on ties."
                  : "Index (int64) of the smallest value along `dim`, or of the flattened input "
                    "when `dim` is absent; the first one on ties.")
      .input("x")
      .optional_attr("dim", AttrType::Int, "dim to reduce; none flattens the input")
      .attr("keepdim", AttrType::Bool, false)
      .fusion(Fusion::Reduction)
      .strided_inputs()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        ReduceDims rd = reduce_one_dim(x.shape(), c.attrs, c.op.name.c_str());
        check_nonempty(x, rd, c.op.name.c_str());
        return {{DType::Int64, rd.out_shape}};
      })
      .kernel([is_max](KernelContext& c) {
        ReduceDims rd = reduce_one_dim(c.inputs[0].shape(), c.attrs, c.op.name.c_str());
        if (is_max)
          arg_kernel<true>(c.inputs[0], rd, c.outputs[0]);
        else
          arg_kernel<false>(c.inputs[0], rd, c.outputs[0]);
      });
}

}  // namespace

void register_reduction(OpRegistry& r) {
  r.def("sum")
      .doc(
          "Sum over `dim` (all dims when absent), keeping reduced dims as size 1 when keepdim. "
          "Integers and bool sum to int64.")
      .input("x")
      .optional_attr("dim", AttrType::Ints, "dims to reduce; none or [] reduces all")
      .attr("keepdim", AttrType::Bool, false)
      .optional_attr("dtype", AttrType::DType, "accumulate and return in this dtype")
      .fusion(Fusion::Reduction)
      .strided_inputs()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        DType dt = c.attrs.has("dtype") ? c.attrs.dtype("dtype") : natural_sum_dtype(x.dtype());
        SAMBA_CHECK(dt != DType::Bool, Status::DTypeMismatch,
                    "sum: dtype bool cannot hold a sum; use int64 or a floating dtype");
        return {{dt, reduce_dims(x.shape(), c.attrs, "sum").out_shape}};
      })
      .kernel([](KernelContext& c) {
        const Tensor& out = c.outputs[0];
        const Tensor& x = c.inputs[0];
        ReduceDims rd = reduce_dims(x.shape(), c.attrs, "sum");
        sum_kernel(natural_sum_dtype(x.dtype()) == out.dtype() ? x : x.to(out.dtype()), rd, out,
                   1.0);
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> { return {spread_back(c, 1.0)}; });

  r.def("mean")
      .doc(
          "Mean over `dim` (all dims when absent), keeping reduced dims as size 1 when keepdim. "
          "Needs a floating input or a floating `dtype`.")
      .input("x")
      .optional_attr("dim", AttrType::Ints, "dims to reduce; none or [] reduces all")
      .attr("keepdim", AttrType::Bool, false)
      .optional_attr("dtype", AttrType::DType, "accumulate and return in this floating dtype")
      .fusion(Fusion::Reduction)
      .strided_inputs()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        DType dt = c.attrs.has("dtype") ? c.attrs.dtype("dtype") : x.dtype();
        SAMBA_CHECK(is_floating(dt), Status::DTypeMismatch,
                    "mean: {} {} is not floating; mean needs a floating input or a floating dtype "
                    "attribute",
                    c.attrs.has("dtype") ? "dtype" : "input dtype", dtype_name(dt));
        return {{dt, reduce_dims(x.shape(), c.attrs, "mean").out_shape}};
      })
      .kernel([](KernelContext& c) {
        const Tensor& out = c.outputs[0];
        ReduceDims rd = reduce_dims(c.inputs[0].shape(), c.attrs, "mean");
        sum_kernel(as_dtype(c.inputs[0], out.dtype()), rd, out,
                   1.0 / static_cast<double>(rd.count));
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        ReduceDims rd = reduce_dims(c.inputs[0].shape(), c.attrs, "mean");
        return {spread_back(c, 1.0 / static_cast<double>(rd.count))};
      });

  def_extreme(r, "max", true);
  def_extreme(r, "min", false);
  def_arg(r, "argmax", true);
  def_arg(r, "argmin", false);

  r.def("extremum_backward")
      .doc(
          "Gradient of max/min over `dim`: grad shared evenly among the elements of x equal to "
          "the result.")
      .input("grad", "gradient of the result")
      .input("x", "the reduced input")
      .input("result", "max or min of x over `dim`")
      .optional_attr("dim", AttrType::Ints, "dims that were reduced; none or [] means all")
      .attr("keepdim", AttrType::Bool, false)
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[1];
        ReduceDims rd = reduce_dims(x.shape(), c.attrs, "extremum_backward");
        for (int i : {0, 2})
          SAMBA_CHECK(c.inputs[i].shape() == rd.out_shape, Status::ShapeMismatch,
                      "extremum_backward: {} has shape {}; expected {}", i == 0 ? "grad" : "result",
                      dims_str(c.inputs[i].shape()), dims_str(rd.out_shape));
        SAMBA_CHECK(is_floating(x.dtype()), Status::DTypeMismatch,
                    "extremum_backward: x has dtype {}; gradients need a floating dtype",
                    dtype_name(x.dtype()));
        return {meta_of(x)};
      })
      .kernel([](KernelContext& c) {
        const Tensor& out = c.outputs[0];
        const Tensor& x = c.inputs[1];
        ReduceDims rd = reduce_dims(x.shape(), c.attrs, "extremum_backward");
        reduce::with_compute_output(out, [&]<typename A>(const Tensor& grad_x) {
          constexpr DType kA = dtype_of<A>();
          Tensor xa = as_dtype(x, kA);
          Tensor res = reshaped(as_dtype(c.inputs[2], kA), rd.kept_shape);
          Tensor g = as_dtype(c.inputs[0], kA);
          const A* pr = res.data<A>();
          const A* pg = g.data<A>();
          Tensor share = Tensor::empty(rd.kept_shape, kA);
          A* ps = share.data<A>();
          reduce::run<A, int64_t>(
              reduce_layout(xa, rd.mask), 0,
              [pr](A v, int64_t o) { return static_cast<int64_t>(v == pr[o]); },
              [](int64_t a, int64_t b) { return a + b; },
              [&](int64_t o, int64_t n) { ps[o] = n > 0 ? pg[o] / static_cast<A>(n) : A(0); });
          reduce::broadcast_map<A, A, 3>(grad_x, {xa, res, share},
                                         [](A v, A m, A s) { return v == m ? s : A(0); });
        });
      });
}

}  // namespace samba::ops
