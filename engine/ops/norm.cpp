// Vector norms over dims (torch.linalg.vector_norm: p = 2, 1, inf, -inf, 0
// or any other real), their backward, and normalize (x divided by its norm
// along dims, F.normalize), whose gradient is built from norm's.
#include <cmath>
#include <limits>

#include "engine/kernels/reduce_loops.h"
#include "engine/ops/operands.h"

namespace samba::ops {
namespace {

// The kinds of p whose reductions differ (a general p raises to powers).
enum class NormKind { Zero, One, Two, Max, Min, Power };

NormKind norm_kind(double p) {
  if (p == 0) return NormKind::Zero;
  if (p == 1) return NormKind::One;
  if (p == 2) return NormKind::Two;
  if (std::isinf(p)) return p > 0 ? NormKind::Max : NormKind::Min;
  return NormKind::Power;
}

template <typename A>
A sign_of(A v) {
  return static_cast<A>((v > A(0)) - (v < A(0)));
}

// out (A, shaped like rd's result) = the p-norm of x over rd's dims.
template <typename A>
void norm_into(const Tensor& x0, const ReduceDims& rd, double p, A* po) {
  const Tensor x = as_dtype(x0, dtype_of<A>());
  const ReduceLayout l = reduce_layout(x, rd.mask);
  const A pa = static_cast<A>(p);
  auto sum = [](A a, A b) { return a + b; };
  auto put = [po](int64_t o, A v) { po[o] = v; };
  switch (norm_kind(p)) {
    case NormKind::Zero:
      return reduce::run<A, A>(l, A(0), [](A v, int64_t) { return A(v != A(0)); }, sum, put);
    case NormKind::One:
      return reduce::run<A, A>(l, A(0), [](A v, int64_t) { return std::abs(v); }, sum, put);
    case NormKind::Two:
      return reduce::run<A, A>(
          l, A(0), [](A v, int64_t) { return v * v; }, sum,
          [po](int64_t o, A v) { po[o] = std::sqrt(v); });
    case NormKind::Max:
      return reduce::run<A, A>(
          l, A(0), [](A v, int64_t) { return std::abs(v); },
          [](A a, A b) { return reduce::max_nan(a, b); }, put);
    case NormKind::Min:
      return reduce::run<A, A>(
          l, std::numeric_limits<A>::infinity(), [](A v, int64_t) { return std::abs(v); },
          [](A a, A b) { return reduce::min_nan(a, b); }, put);
    case NormKind::Power:
      return reduce::run<A, A>(
          l, A(0), [pa](A v, int64_t) { return std::pow(std::abs(v), pa); }, sum,
          [po, pa](int64_t o, A v) { po[o] = std::pow(v, A(1) / pa); });
  }
}

void check_floating(const Tensor& x, const char* op, const char* what) {
  SAMBA_CHECK(is_floating(x.dtype()), Status::DTypeMismatch,
              "{}: {} has dtype {}; norms need a floating dtype", op, what, dtype_name(x.dtype()));
}

// d norm / dx times the incoming gradient, one result element at a time:
// x * g / n for p = 2, sgn(x) |x|^(p-1) g / n^(p-1) for another p (zero where
// the norm is zero), and for p = +-inf the gradient shared evenly among the
// elements at the extreme, as torch does.
template <typename A>
void norm_backward_into(const Tensor& grad_x, const Tensor& g0, const Tensor& x0,
                        const Tensor& n0, const ReduceDims& rd, double p) {
  constexpr DType kA = dtype_of<A>();
  const Tensor x = as_dtype(x0, kA);
  const Tensor n = reshaped(as_dtype(n0, kA), rd.kept_shape);
  const Tensor g = reshaped(as_dtype(g0, kA), rd.kept_shape);
  const NormKind kind = norm_kind(p);
  const A pa = static_cast<A>(p);
  // factor[o]: what every element of result o's gradient is scaled by.
  Tensor factor = Tensor::empty(rd.kept_shape, kA);
  A* pf = factor.data<A>();
  const A* pn = n.data<A>();
  const A* pg = g.data<A>();
  if (kind == NormKind::Max || kind == NormKind::Min) {
    reduce::run<A, int64_t>(
        reduce_layout(x, rd.mask), 0,
        [pn](A v, int64_t o) { return static_cast<int64_t>(std::abs(v) == pn[o]); },
        [](int64_t a, int64_t b) { return a + b; },
        [&](int64_t o, int64_t count) {
          pf[o] = count > 0 ? pg[o] / static_cast<A>(count) : A(0);
        });
  } else {
    for (int64_t o = 0; o < factor.numel(); ++o) {
      const A nv = pn[o];
      switch (kind) {
        case NormKind::One:
          pf[o] = pg[o];
          break;
        case NormKind::Two:
          pf[o] = nv == A(0) ? A(0) : pg[o] / nv;
          break;
        case NormKind::Power:
          pf[o] = nv == A(0) ? A(0) : pg[o] / std::pow(nv, pa - A(1));
          break;
        default:
          pf[o] = A(0);
      }
    }
  }
  reduce::broadcast_map<A, A, 3>(grad_x, {x, n, factor}, [kind, pa](A v, A nv, A f) {
    switch (kind) {
      case NormKind::Zero:
        return A(0);
      case NormKind::One:
        return sign_of(v) * f;
      case NormKind::Two:
        return v * f;
      case NormKind::Max:
      case NormKind::Min:
        return std::abs(v) == nv ? sign_of(v) * f : A(0);
      case NormKind::Power:
        return sign_of(v) * std::pow(std::abs(v), pa - A(1)) * f;
    }
    return A(0);
  });
}

Attrs norm_attrs(double p, const AttrValue& dim, bool keepdim) {
  return {{"p", p}, {"dim", dim}, {"keepdim", keepdim}};
}

// normalize's divisor: the norm over `dim`, kept as size-1 dims.
std::vector<int64_t> normalize_dims(const Attrs& a) { return a.ints("dim"); }

// y = x / max(n, eps): dx = g / d - [n > eps] (sum(g x) / d^2) dn/dx.
std::vector<Tensor> normalize_grad(const GradContext& c) {
  const Tensor& x = c.inputs[0];
  const Tensor& g = c.grad_outputs[0];
  const double p = c.attrs.f("p"), eps = c.attrs.f("eps");
  const AttrValue dim = normalize_dims(c.attrs);
  const Tensor n = call1("norm", {x}, norm_attrs(p, dim, true));
  const Tensor d = call1("clamp", {n}, {{"min", eps}});
  const Tensor gx = call1("sum", {call1("mul", {g, x})}, {{"dim", dim}, {"keepdim", true}});
  Tensor grad_n = call1("neg", {call1("div", {gx, call1("mul", {d, d})})});
  grad_n = call1("masked_fill", {grad_n, call1("le", {n, wrap_scalar(eps)})}, {{"value", 0.0}});
  const Tensor through_n = call1("norm_backward", {grad_n, x, n}, norm_attrs(p, dim, true));
  return {call1("add", {call1("div", {g, d}), through_n})};
}

}  // namespace

void register_norm(OpRegistry& r) {
  r.def("norm")
      .doc(
          "The p-norm of x over `dim` (all dims when absent), as torch.linalg.vector_norm: p = 2 "
          "(Frobenius for a matrix), 1, inf (largest |x|), -inf (smallest |x|), 0 (count of "
          "nonzeros) or any other real.")
      .input("x", "floating")
      .attr("p", AttrType::Float, 2.0, "the order; inf and -inf allowed")
      .optional_attr("dim", AttrType::Ints, "dims to reduce; none or [] reduces all")
      .attr("keepdim", AttrType::Bool, false)
      .fusion(Fusion::Reduction)
      .strided_inputs()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        check_floating(x, "norm", "x");
        SAMBA_CHECK(!std::isnan(c.attrs.f("p")), Status::InvalidArgument,
                    "norm: p must be a number or +-inf, got NaN");
        return {{x.dtype(), reduce_dims(x.shape(), c.attrs, "norm").out_shape}};
      })
      .kernel([](KernelContext& c) {
        const ReduceDims rd = reduce_dims(c.inputs[0].shape(), c.attrs, "norm");
        reduce::with_compute_output(c.outputs[0], [&]<typename A>(const Tensor& out) {
          norm_into<A>(c.inputs[0], rd, c.attrs.f("p"), out.data<A>());
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        Attrs a{{"p", c.attrs.f("p")}, {"keepdim", c.attrs.b("keepdim")}};
        if (c.attrs.has("dim")) a.set("dim", *c.attrs.find("dim"));
        return {call1("norm_backward", {c.grad_outputs[0], c.inputs[0], c.outputs[0]}, a)};
      });

  r.def("norm_backward")
      .doc(
          "Gradient of norm: grad times d norm / dx, zero where the norm is zero; for p = +-inf "
          "shared evenly among the elements at the extreme.")
      .input("grad", "gradient of the result")
      .input("x", "the input of norm")
      .input("result", "norm's result")
      .attr("p", AttrType::Float, 2.0)
      .optional_attr("dim", AttrType::Ints, "dims that were reduced; none or [] means all")
      .attr("keepdim", AttrType::Bool, false)
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[1];
        check_floating(x, "norm_backward", "x");
        const ReduceDims rd = reduce_dims(x.shape(), c.attrs, "norm_backward");
        for (int i : {0, 2})
          SAMBA_CHECK(c.inputs[i].shape() == rd.out_shape, Status::ShapeMismatch,
                      "norm_backward: {} has shape {}; expected {}", i == 0 ? "grad" : "result",
                      dims_str(c.inputs[i].shape()), dims_str(rd.out_shape));
        return {meta_of(x)};
      })
      .kernel([](KernelContext& c) {
        const ReduceDims rd = reduce_dims(c.inputs[1].shape(), c.attrs, "norm_backward");
        reduce::with_compute_output(c.outputs[0], [&]<typename A>(const Tensor& out) {
          norm_backward_into<A>(out, c.inputs[0], c.inputs[1], c.inputs[2], rd, c.attrs.f("p"));
        });
      });

  r.def("normalize")
      .doc(
          "x divided by its p-norm over `dim`, the norm clamped below at eps (F.normalize); the "
          "result has x's shape.")
      .input("x", "floating")
      .attr("p", AttrType::Float, 2.0, "the order of the norm")
      .attr("dim", AttrType::Ints, std::vector<int64_t>{1}, "dims the norm is taken over")
      .attr("eps", AttrType::Float, 1e-12, "smallest divisor")
      .fusion(Fusion::Opaque)
      .strided_inputs()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        check_floating(x, "normalize", "x");
        reduce_dims(x.shape(), normalize_dims(c.attrs), false, true, "normalize");
        return {meta_of(x)};
      })
      .kernel([](KernelContext& c) {
        const Tensor& x = c.inputs[0];
        const ReduceDims rd =
            reduce_dims(x.shape(), normalize_dims(c.attrs), false, true, "normalize");
        const double eps = c.attrs.f("eps");
        reduce::with_compute_output(c.outputs[0], [&]<typename A>(const Tensor& out) {
          Tensor n = Tensor::empty(rd.kept_shape, dtype_of<A>());
          norm_into<A>(x, rd, c.attrs.f("p"), n.data<A>());
          const A floor = static_cast<A>(eps);
          reduce::broadcast_map<A, A, 2>(out, {as_dtype(x, dtype_of<A>()), n},
                                         [floor](A v, A nv) { return v / std::max(nv, floor); });
        });
      })
      .grad(normalize_grad);
}

}  // namespace samba::ops
