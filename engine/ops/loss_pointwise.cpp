// Pointwise losses with PyTorch's semantics: mse_loss and l1_loss (with
// broadcasting) and binary_cross_entropy_with_logits (computed stably), with
// the fused backward ops their gradients use. Kernels compute in float or
// double (reduce::with_compute_output) and are compiled for those two only.
#include <cmath>

#include "engine/kernels/loss_rows.h"
#include "engine/ops/operands.h"

namespace samba::ops {
namespace {

using namespace loss;

// Loss elements f(...) over the broadcast shape of `in`, reduced as `r` into
// out (compute type A).
template <typename A, size_t K, typename F>
void pointwise_loss(const Tensor& out, const std::array<Tensor, K>& in, Reduction r, F f) {
  Dims shape = broadcast_all(std::span<const Tensor>(in.data(), K), "loss");
  std::array<Tensor, K> ina;
  for (size_t k = 0; k < K; ++k) ina[k] = as_dtype(in[k], dtype_of<A>());
  if (r == Reduction::None) {
    reduce::broadcast_map<A, A, K>(out, ina, [&](auto... v) { return static_cast<A>(f(v...)); });
    return;
  }
  const int64_t n = numel_of(shape);
  const A scale = r == Reduction::Sum ? A(1) : A(1) / static_cast<A>(n);
  bool same_shape = true;
  for (const Tensor& t : ina) same_shape &= t.shape() == shape && t.is_contiguous();
  A total;
  if (same_shape) {
    // No broadcasting: sum the loss elements as they are computed.
    std::array<const A*, K> p;
    for (size_t k = 0; k < K; ++k) p[k] = ina[k].template data<A>();
    total = [&]<size_t... I>(std::index_sequence<I...>) {
      return reduce::sum_indexed<A>(n, [&](int64_t i) { return static_cast<A>(f(p[I][i]...)); });
    }
    (std::make_index_sequence<K>{});
  } else {
    Tensor elems = Tensor::empty(shape, dtype_of<A>());
    reduce::broadcast_map<A, A, K>(elems, ina, [&](auto... v) { return static_cast<A>(f(v...)); });
    const A* pe = elems.data<A>();
    total = reduce::sum_indexed<A>(n, [pe](int64_t i) { return pe[i]; });
  }
  out.data<A>()[0] = total * scale;
}

std::vector<TensorMeta> infer_pointwise_loss(const InferContext& c) {
  const std::string& op = c.op.name;
  DType dt = c.inputs[0].dtype();
  for (size_t i = 0; i < c.inputs.size(); ++i)
    if (c.inputs[i].defined()) check_floating(c.inputs[i], op, c.op.inputs[i].name.c_str());
  if (op == "binary_cross_entropy_with_logits") {
    SAMBA_CHECK(c.inputs[1].shape() == c.inputs[0].shape(), Status::ShapeMismatch,
                "{}: target has shape {}; expected the input's shape {}", op,
                dims_str(c.inputs[1].shape()), dims_str(c.inputs[0].shape()));
    for (size_t i = 2; i < c.inputs.size(); ++i)
      if (c.inputs[i].defined())
        SAMBA_CHECK(
            broadcast_shapes(c.inputs[i].shape(), c.inputs[0].shape(), op.c_str()) ==
                c.inputs[0].shape(),
            Status::ShapeMismatch, "{}: {} of shape {} does not broadcast to the input's shape {}",
            op, c.op.inputs[i].name, dims_str(c.inputs[i].shape()), dims_str(c.inputs[0].shape()));
  } else {
    dt = result_type(c.inputs);
  }
  Dims shape = broadcast_all(c.inputs, op.c_str());
  return {{dt, reduction_of(c.attrs, op) == Reduction::None ? shape : Dims{}}};
}

double mean_scale(const Attrs& a, const Dims& shape, const std::string& op) {
  return reduction_of(a, op) == Reduction::Mean ? 1.0 / static_cast<double>(numel_of(shape)) : 1.0;
}

// Softplus(-x) = log(1 + exp(-x)) without overflow.
template <typename A>
A softplus_neg(A x) {
  return std::log1p(std::exp(-std::abs(x))) + std::max(-x, A(0));
}

// Calls fn(first, count, piece) for [0, n) cut into kRowChunk pieces, on the pool.
template <typename F>
void for_pieces(int64_t n, int64_t cost, F fn) {
  const int64_t pieces = (n + reduce::kRowChunk - 1) / reduce::kRowChunk;
  parallel_for(pieces, std::max<int64_t>(1, kMinGrain / (reduce::kRowChunk * cost)),
               [&](int64_t b, int64_t e) {
                 for (int64_t k = b; k < e; ++k)
                   fn(k * reduce::kRowChunk, std::min(reduce::kRowChunk, n - k * reduce::kRowChunk),
                      k);
               });
}

// binary_cross_entropy_with_logits without weights (the common case), x and
// t contiguous of type A: Eigen vectorizes exp and log1p.
template <typename A>
void bce_plain_forward(const Tensor& x, const Tensor& t, const Tensor& out, Reduction r) {
  const A *px = x.data<A>(), *pt = t.data<A>();
  const int64_t n = x.numel();
  // The loss terms of [c, c + len): (1 - t) x + softplus(-x), handed to `use`.
  auto terms = [&](int64_t c, int64_t len, auto&& use) {
    reduce::ConstRun<A> xs(px + c, len), ts(pt + c, len);
    use((A(1) - ts) * xs + (-xs.abs()).exp().log1p() + (-xs).max(A(0)));
  };
  if (r == Reduction::None) {
    A* po = out.data<A>();
    for_pieces(n, 20, [&](int64_t c, int64_t len, int64_t) {
      terms(c, len, [&](auto&& e) { reduce::Run<A>(po + c, len) = e; });
    });
    return;
  }
  std::vector<A> part((n + reduce::kRowChunk - 1) / reduce::kRowChunk);
  for_pieces(n, 20, [&](int64_t c, int64_t len, int64_t k) {
    terms(c, len, [&](auto&& e) { part[k] = e.sum(); });
  });
  auto add = [](A a, A b) { return a + b; };
  A total = part.empty()
                ? A(0)
                : reduce::tree_fold(part.data(), static_cast<int64_t>(part.size()), 1, add);
  out.data<A>()[0] = r == Reduction::Sum ? total : total / static_cast<A>(n);
}

// Its gradient with respect to input (wrt 0: sigmoid(x) - t) or target
// (wrt 1: -x), times grad and the mean's 1/n; all of type A, contiguous.
template <typename A>
void bce_plain_backward(const Tensor& g, const Tensor& x, const Tensor& t, const Tensor& out,
                        int64_t wrt, double scale) {
  const A *pg = g.data<A>(), *px = x.data<A>(), *pt = t.data<A>();
  A* po = out.data<A>();
  const bool full_grad = g.numel() == out.numel() && g.numel() > 1;
  const A s = static_cast<A>(scale), gs = full_grad ? A(0) : pg[0] * s;
  for_pieces(out.numel(), 10, [&](int64_t c, int64_t len, int64_t) {
    reduce::ConstRun<A> xs(px + c, len), ts(pt + c, len),
        gr(pg + (full_grad ? c : 0), full_grad ? len : 1);
    reduce::Run<A> o(po + c, len);
    if (wrt == 0 && full_grad)
      o = ((A(1) + (-xs).exp()).inverse() - ts) * gr * s;
    else if (wrt == 0)
      o = ((A(1) + (-xs).exp()).inverse() - ts) * gs;
    else if (full_grad)
      o = -xs * gr * s;
    else
      o = -xs * gs;
  });
}

}  // namespace

void register_loss_pointwise(OpRegistry& r) {
  r.def("mse_loss")
      .doc("Squared error (input - target)^2 with broadcasting, reduced by `reduction`.")
      .input("input")
      .input("target")
      .attr("reduction", AttrType::String, std::string("mean"), "'mean', 'sum' or 'none'")
      .fusion(Fusion::Opaque)
      .infer(infer_pointwise_loss)
      .kernel([](KernelContext& c) {
        const Reduction red = reduction_of(c.attrs, "mse_loss");
        reduce::with_compute_output(c.outputs[0], [&]<typename A>(const Tensor& out) {
          pointwise_loss<A, 2>(out, {c.inputs[0], c.inputs[1]}, red,
                               [](A x, A t) { return (x - t) * (x - t); });
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Tensor &x = c.inputs[0], &t = c.inputs[1];
        Dims shape = broadcast_shapes(x.shape(), t.shape(), "mse_loss");
        Tensor coef = call1(
            "mul", {c.grad_outputs[0], wrap_scalar(2.0 * mean_scale(c.attrs, shape, "mse_loss"))});
        Tensor g = call1("mul", {call1("add", {x, t}, {{"alpha", -1.0}}), coef});
        Tensor gx, gt;
        if (c.needs_grad(0)) gx = sum_to(g, x.shape());
        if (c.needs_grad(1)) gt = sum_to(call1("mul", {g, wrap_scalar(-1.0)}), t.shape());
        return {gx, gt};
      });

  r.def("l1_loss")
      .doc("Absolute error |input - target| with broadcasting, reduced by `reduction`.")
      .input("input")
      .input("target")
      .attr("reduction", AttrType::String, std::string("mean"), "'mean', 'sum' or 'none'")
      .fusion(Fusion::Opaque)
      .infer(infer_pointwise_loss)
      .kernel([](KernelContext& c) {
        const Reduction red = reduction_of(c.attrs, "l1_loss");
        reduce::with_compute_output(c.outputs[0], [&]<typename A>(const Tensor& out) {
          pointwise_loss<A, 2>(out, {c.inputs[0], c.inputs[1]}, red,
                               [](A x, A t) { return std::abs(x - t); });
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Tensor &x = c.inputs[0], &t = c.inputs[1];
        Tensor g = call1("l1_loss_backward", {c.grad_outputs[0], x, t}, c.attrs);
        Tensor gx, gt;
        if (c.needs_grad(0)) gx = sum_to(g, x.shape());
        if (c.needs_grad(1)) gt = sum_to(call1("mul", {g, wrap_scalar(-1.0)}), t.shape());
        return {gx, gt};
      });

  r.def("l1_loss_backward")
      .doc(
          "Gradient of l1_loss with respect to `input`, over the broadcast shape: sign(input - "
          "target) * grad, divided by the element count for 'mean'.")
      .input("grad")
      .input("input")
      .input("target")
      .attr("reduction", AttrType::String, std::string("mean"))
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        return {{result_type({c.inputs[1], c.inputs[2]}),
                 broadcast_all(c.inputs.subspan(1), "l1_loss_backward")}};
      })
      .kernel([](KernelContext& c) {
        const Tensor& out = c.outputs[0];
        const double scale = mean_scale(c.attrs, out.shape(), "l1_loss");
        reduce::with_compute_output(out, [&]<typename A>(const Tensor& res) {
          const A s = static_cast<A>(scale);
          reduce::broadcast_map<A, A, 3>(
              res,
              {as_dtype(c.inputs[1], dtype_of<A>()), as_dtype(c.inputs[2], dtype_of<A>()),
               as_dtype(c.inputs[0], dtype_of<A>())},
              [s](A x, A t, A g) {
                const A d = x - t;
                return d > 0 ? g * s : d < 0 ? -g * s : A(0);
              });
        });
      });

  r.def("binary_cross_entropy_with_logits")
      .doc(
          "Binary cross entropy of logits `input` against `target` (same shape), computed "
          "stably: weight * ((1 - t) x + (1 + (pos_weight - 1) t) softplus(-x)).")
      .input("input", "logits")
      .input("target", "probabilities of the positive class, the input's shape")
      .optional_input("weight", "broadcasts to the input's shape")
      .optional_input("pos_weight", "weight of positive examples, broadcasts to the input's shape")
      .attr("reduction", AttrType::String, std::string("mean"), "'mean', 'sum' or 'none'")
      .fusion(Fusion::Opaque)
      .infer(infer_pointwise_loss)
      .kernel([](KernelContext& c) {
        const Reduction red = reduction_of(c.attrs, "binary_cross_entropy_with_logits");
        Tensor w = optional_input(c.inputs, 2), pw = optional_input(c.inputs, 3);
        reduce::with_compute_output(c.outputs[0], [&]<typename A>(const Tensor& out) {
          constexpr DType kA = dtype_of<A>();
          if (!w.defined() && !pw.defined())
            return bce_plain_forward<A>(as_dtype(c.inputs[0], kA), as_dtype(c.inputs[1], kA), out,
                                        red);
          Tensor one = Tensor::scalar(1.0, kA);
          pointwise_loss<A, 4>(
              out, {c.inputs[0], c.inputs[1], w.defined() ? w : one, pw.defined() ? pw : one}, red,
              [](A x, A t, A wt, A p) {
                return wt * ((A(1) - t) * x + (A(1) + (p - A(1)) * t) * softplus_neg(x));
              });
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        std::vector<Tensor> in{c.grad_outputs[0], c.inputs[0], c.inputs[1],
                               optional_input(c.inputs, 2), optional_input(c.inputs, 3)};
        std::vector<Tensor> g(c.inputs.size());
        for (size_t i = 0; i < c.inputs.size(); ++i) {
          if (!c.needs_grad(i)) continue;
          Attrs a = c.attrs;
          a.set("wrt", static_cast<int64_t>(i));
          g[i] = sum_to(call("binary_cross_entropy_with_logits_backward", in, a)[0],
                        c.inputs[i].shape());
        }
        return g;
      });

  r.def("binary_cross_entropy_with_logits_backward")
      .doc(
          "Gradient of binary_cross_entropy_with_logits, over the input's shape, with respect to "
          "input `wrt` (0 input, 1 target, 2 weight, 3 pos_weight).")
      .input("grad")
      .input("input")
      .input("target")
      .optional_input("weight")
      .optional_input("pos_weight")
      .attr("reduction", AttrType::String, std::string("mean"))
      .attr("wrt", AttrType::Int, int64_t{0}, "0 input, 1 target, 2 weight, 3 pos_weight")
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const int64_t wrt = c.attrs.i("wrt");
        SAMBA_CHECK(wrt >= 0 && wrt <= 3 && optional_input(c.inputs, wrt + 1).defined(),
                    Status::InvalidArgument,
                    "binary_cross_entropy_with_logits_backward: wrt {} does not name a given input",
                    wrt);
        return {meta_of(c.inputs[1])};
      })
      .kernel([](KernelContext& c) {
        const Tensor& out = c.outputs[0];
        const int64_t wrt = c.attrs.i("wrt");
        const double scale = mean_scale(c.attrs, out.shape(), "binary_cross_entropy_with_logits");
        Tensor w = optional_input(c.inputs, 3), pw = optional_input(c.inputs, 4);
        reduce::with_compute_output(out, [&]<typename A>(const Tensor& res) {
          constexpr DType kA = dtype_of<A>();
          Tensor g = as_dtype(c.inputs[0], kA), x = as_dtype(c.inputs[1], kA);
          Tensor t = as_dtype(c.inputs[2], kA);
          if (wrt <= 1 && !w.defined() && !pw.defined())
            return bce_plain_backward<A>(g, x, t, res, wrt, scale);
          Tensor one = Tensor::scalar(1.0, kA);
          std::array<Tensor, 5> in{x, t, w.defined() ? as_dtype(w, kA) : one,
                                   pw.defined() ? as_dtype(pw, kA) : one, g};
          const A s = static_cast<A>(scale);
          reduce::broadcast_map<A, A, 5>(res, in, [s, wrt](A xv, A tv, A wv, A pv, A gv) {
            const A lw = A(1) + (pv - A(1)) * tv;
            A d;
            if (wrt == 0)
              d = wv * ((A(1) - tv) - lw / (A(1) + std::exp(xv)));
            else if (wrt == 1)
              d = wv * ((pv - A(1)) * softplus_neg(xv) - xv);
            else if (wrt == 2)
              d = (A(1) - tv) * xv + lw * softplus_neg(xv);
            else
              d = wv * tv * softplus_neg(xv);
            return d * gv * s;
          });
        });
      });
}

}  // namespace samba::ops
