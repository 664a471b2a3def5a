// Classification losses with PyTorch's semantics: cross_entropy (a fused,
// stable log-softmax + NLL per row) and nll_loss, with the fused backward
// ops their gradients use. The pointwise losses are in loss_pointwise.cpp.
#include <cmath>
#include <limits>

#include "engine/kernels/loss_rows.h"
#include "engine/ops/operands.h"

namespace samba::ops {
namespace {

using namespace loss;

// What cross_entropy needs to know besides the tensors.
struct CrossEntropyArgs {
  int64_t ignore_index;
  double smoothing;
  Reduction reduction;
  CrossEntropyArgs(const Attrs& a, const std::string& op)
      : ignore_index(a.i("ignore_index")),
        smoothing(a.f("label_smoothing")),
        reduction(reduction_of(a, op)) {
    SAMBA_CHECK(smoothing >= 0.0 && smoothing <= 1.0, Status::InvalidArgument,
                "{}: label_smoothing {} is outside [0, 1]", op, smoothing);
  }
};

// Per-row cross entropy of input (compute type A): loss[row] and, for the
// mean, the row's share of the divisor (its target's weight, or 1).
template <typename A>
void cross_entropy_rows(const Tensor& x, const Tensor& target, std::span<const A> w,
                        const ClassLayout& l, const CrossEntropyArgs& args, std::span<A> loss,
                        std::span<A> denom) {
  const A* px = x.data<A>();
  const A eps = static_cast<A>(args.smoothing), C = static_cast<A>(l.c);
  A wsum = 0;
  for (A v : w) wsum += v;
  const bool index = is_index_target(target);
  const int64_t* pt = index ? target.data<int64_t>() : nullptr;
  const A* pq = index ? nullptr : target.data<A>();
  parallel_for(l.rows(), std::max<int64_t>(1, kMinGrain / (8 * l.c)), [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      const int64_t off = l.row_offset(row);
      const A* xr = px + off;
      if (index) {
        const int64_t t = pt[row];
        if (t == args.ignore_index) {
          loss[row] = denom[row] = 0;
          continue;
        }
        const A lse = row_logsumexp(xr, l.c, l.s);
        A li = -(xr[t * l.s] - lse) * w[t] * (A(1) - eps);
        if (eps > 0) {
          A wx = 0;
          if (l.s == 1)
            wx = (reduce::ConstRun<A>(w.data(), l.c) * reduce::ConstRun<A>(xr, l.c)).sum();
          else
            for (int64_t k = 0; k < l.c; ++k) wx += w[k] * xr[k * l.s];
          li += eps / C * (wsum * lse - wx);
        }
        loss[row] = li;
        denom[row] = w[t];
      } else {
        const A lse = row_logsumexp(xr, l.c, l.s);
        const A* qr = pq + off;
        A wqx = 0, wq = 0;
        if (l.s == 1) {
          auto q = reduce::ConstRun<A>(w.data(), l.c) *
                   (reduce::ConstRun<A>(qr, l.c) * (A(1) - eps) + eps / C);
          wq = q.sum();
          wqx = (q * reduce::ConstRun<A>(xr, l.c)).sum();
        } else {
          for (int64_t k = 0; k < l.c; ++k) {
            const A q = w[k] * (qr[k * l.s] * (A(1) - eps) + eps / C);
            wqx += q * xr[k * l.s];
            wq += q;
          }
        }
        loss[row] = lse * wq - wqx;
        denom[row] = 1;
      }
    }
  });
}

std::vector<TensorMeta> infer_class_loss(const InferContext& c, bool probs_allowed) {
  const std::string& op = c.op.name;
  ClassLayout l = class_layout(c.inputs[0], op);
  SAMBA_CHECK(probs_allowed || is_index_target(c.inputs[1]), Status::DTypeMismatch,
              "{}: target has dtype {}; expected int64 or int32 class indices", op,
              dtype_name(c.inputs[1].dtype()));
  check_class_inputs(c.inputs, l, op);
  if (is_index_target(c.inputs[1])) check_index_target(c.inputs[1], l, op);
  Reduction r = reduction_of(c.attrs, op);
  return {{c.inputs[0].dtype(), r == Reduction::None ? l.row_shape : Dims{}}};
}

// The backward ops take the forward's operands after `grad`. They are checked
// as the forward checks them, and `grad` must have the loss's shape: the
// kernels index all of them by the class layout.
void check_class_loss_backward(const InferContext& c, bool probs_allowed) {
  const InferContext forward{c.op, c.inputs.subspan(1), c.attrs};
  const Dims loss_shape = infer_class_loss(forward, probs_allowed).front().shape;
  SAMBA_CHECK(c.inputs[0].shape() == loss_shape, Status::ShapeMismatch,
              "{}: grad has shape {}; expected {}, the shape of the loss", c.op.name,
              dims_str(c.inputs[0].shape()), dims_str(loss_shape));
}

void register_cross_entropy(OpRegistry& r) {
  r.def("cross_entropy")
      .doc(
          "Cross entropy of unnormalized scores `input` (C), (N, C) or (N, C, d1, ...) against "
          "class indices (int64/int32, the input's shape without the class dim) or class "
          "probabilities (the input's shape), as torch.nn.functional.cross_entropy.")
      .input("input", "unnormalized class scores, floating")
      .input("target", "class indices or class probabilities")
      .optional_input("weight", "per-class weights, shape (C)")
      .attr("ignore_index", AttrType::Int, int64_t{-100}, "index targets equal to it add nothing")
      .attr("label_smoothing", AttrType::Float, 0.0,
            "share of the target mass spread evenly, in [0, 1]")
      .attr("reduction", AttrType::String, std::string("mean"), "'mean', 'sum' or 'none'")
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) { return infer_class_loss(c, true); })
      .kernel([](KernelContext& c) {
        const Tensor& input = c.inputs[0];
        ClassLayout l = class_layout(input, "cross_entropy");
        CrossEntropyArgs args(c.attrs, "cross_entropy");
        const Tensor& target = c.inputs[1];
        auto go = [&]<typename A>() {
          Tensor x = as_dtype(input, dtype_of<A>());
          Tensor t = is_index_target(target)
                         ? class_indices(target, l, args.ignore_index, "cross_entropy")
                         : as_dtype(target, dtype_of<A>()).contiguous();
          ScratchFrame frame;
          const std::span<A> w = class_weights<A>(frame, 0, optional_input(c.inputs, 2), l);
          const std::span<A> loss = scratch_span<A>(frame, 1, l.rows());
          const std::span<A> denom = scratch_span<A>(frame, 2, l.rows());
          cross_entropy_rows<A>(x, t, w, l, args, loss, denom);
          reduce_rows_into<A>(c.outputs[0], loss, denom, args.reduction);
        };
        if (input.dtype() == DType::Float64)
          go.template operator()<double>();
        else
          go.template operator()<float>();
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        Attrs a = c.attrs;
        std::vector<Tensor> in{c.grad_outputs[0], c.inputs[0], c.inputs[1],
                               optional_input(c.inputs, 2)};
        std::vector<Tensor> g(c.inputs.size());
        if (c.needs_grad(0))
          g[0] = call("cross_entropy_backward", in, a.set("wrt", std::string("input")))[0];
        if (c.needs_grad(1) && !is_index_target(c.inputs[1]))
          g[1] = call("cross_entropy_backward", in, a.set("wrt", std::string("target")))[0];
        return g;
      });

  r.def("cross_entropy_backward")
      .doc(
          "Gradient of cross_entropy with respect to `input` (softmax minus the smoothed, "
          "weighted one-hot target, scaled by the reduction) or, for probability targets, to "
          "`target` (wrt = 'target').")
      .input("grad", "gradient of the loss")
      .input("input")
      .input("target")
      .optional_input("weight")
      .attr("ignore_index", AttrType::Int, int64_t{-100})
      .attr("label_smoothing", AttrType::Float, 0.0)
      .attr("reduction", AttrType::String, std::string("mean"))
      .attr("wrt", AttrType::String, std::string("input"), "'input' or 'target'")
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const std::string& wrt = c.attrs.s("wrt");
        SAMBA_CHECK(
            wrt == "input" || (wrt == "target" && !is_index_target(c.inputs[2])),
            Status::InvalidArgument,
            "cross_entropy_backward: wrt '{}' must be 'input', or 'target' for probability targets",
            wrt);
        check_class_loss_backward(c, true);
        return {meta_of(c.inputs[wrt == "input" ? 1 : 2])};
      })
      .kernel([](KernelContext& c) {
        const Tensor& input = c.inputs[1];
        const Tensor& target = c.inputs[2];
        const std::string op = "cross_entropy_backward";
        ClassLayout l = class_layout(input, op);
        CrossEntropyArgs args(c.attrs, op);
        const bool wrt_input = c.attrs.s("wrt") == "input";
        const bool index = is_index_target(target);
        auto go = [&]<typename A>() {
          Tensor x = as_dtype(input, dtype_of<A>());
          Tensor t = index ? class_indices(target, l, args.ignore_index, op)
                           : as_dtype(target, dtype_of<A>()).contiguous();
          ScratchFrame frame;
          const std::span<A> w = class_weights<A>(frame, 0, optional_input(c.inputs, 3), l);
          const std::span<A> denom = scratch_span<A>(frame, 1, l.rows());
          std::fill(denom.begin(), denom.end(), A(1));
          if (index) {
            const int64_t* pt = t.data<int64_t>();
            for (int64_t i = 0; i < l.rows(); ++i)
              denom[i] = pt[i] == args.ignore_index ? A(0) : w[pt[i]];
          }
          const std::span<const A> scale =
              row_scales<A>(frame, 2, c.inputs[0], l.rows(), denom, args.reduction);
          const A eps = static_cast<A>(args.smoothing), C = static_cast<A>(l.c);
          A wsum = 0;
          for (A v : w) wsum += v;
          const bool direct = c.outputs[0].dtype() == dtype_of<A>();
          Tensor ga = direct ? c.outputs[0] : Tensor::empty(c.outputs[0].shape(), dtype_of<A>());
          const A* px = x.data<A>();
          A* pg = ga.data<A>();
          parallel_for(
              l.rows(), std::max<int64_t>(1, kMinGrain / (10 * l.c)), [&](int64_t b, int64_t e) {
                for (int64_t row = b; row < e; ++row) {
                  const int64_t off = l.row_offset(row), cs = l.s;
                  const A* xr = px + off;
                  A* gr = pg + off;
                  const A s = scale[row];
                  if (index && t.data<int64_t>()[row] == args.ignore_index) {
                    for (int64_t k = 0; k < l.c; ++k) gr[k * cs] = 0;
                    continue;
                  }
                  const A lse = row_logsumexp(xr, l.c, cs);
                  if (index) {
                    const int64_t tr = t.data<int64_t>()[row];
                    const A on_p = s * ((A(1) - eps) * w[tr] + eps * wsum / C), off_w = s * eps / C;
                    if (cs == 1)
                      reduce::Run<A>(gr, l.c) = on_p * (reduce::ConstRun<A>(xr, l.c) - lse).exp() -
                                                off_w * reduce::ConstRun<A>(w.data(), l.c);
                    else
                      for (int64_t k = 0; k < l.c; ++k)
                        gr[k * cs] = on_p * std::exp(xr[k * cs] - lse) - off_w * w[k];
                    gr[tr * cs] -= s * (A(1) - eps) * w[tr];
                    continue;
                  }
                  const A* qr = t.data<A>() + off;
                  if (!wrt_input) {
                    for (int64_t k = 0; k < l.c; ++k)
                      gr[k * cs] = -s * (A(1) - eps) * w[k] * (xr[k * cs] - lse);
                    continue;
                  }
                  A wq = 0;
                  for (int64_t k = 0; k < l.c; ++k)
                    wq += w[k] * (qr[k * cs] * (A(1) - eps) + eps / C);
                  for (int64_t k = 0; k < l.c; ++k)
                    gr[k * cs] = s * (std::exp(xr[k * cs] - lse) * wq -
                                      w[k] * (qr[k * cs] * (A(1) - eps) + eps / C));
                }
              });
          if (!direct) c.outputs[0].copy_from(ga);
        };
        if (input.dtype() == DType::Float64)
          go.template operator()<double>();
        else
          go.template operator()<float>();
      });
}

void register_nll_loss(OpRegistry& r) {
  r.def("nll_loss")
      .doc(
          "Negative log likelihood of log-probabilities `input` (C), (N, C) or (N, C, d1, ...) "
          "at class indices `target`, as torch.nn.functional.nll_loss.")
      .input("input", "log-probabilities, floating")
      .input("target", "class indices, int64 or int32")
      .optional_input("weight", "per-class weights, shape (C)")
      .attr("ignore_index", AttrType::Int, int64_t{-100}, "targets equal to it add nothing")
      .attr("reduction", AttrType::String, std::string("mean"), "'mean', 'sum' or 'none'")
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) { return infer_class_loss(c, false); })
      .kernel([](KernelContext& c) {
        const Tensor& input = c.inputs[0];
        ClassLayout l = class_layout(input, "nll_loss");
        const int64_t ignore = c.attrs.i("ignore_index");
        Tensor t = class_indices(c.inputs[1], l, ignore, "nll_loss");
        const int64_t* pt = t.data<int64_t>();
        auto go = [&]<typename A>() {
          Tensor x = as_dtype(input, dtype_of<A>());
          const A* px = x.data<A>();
          ScratchFrame frame;
          const std::span<A> w = class_weights<A>(frame, 0, optional_input(c.inputs, 2), l);
          const std::span<A> loss = scratch_span<A>(frame, 1, l.rows());
          const std::span<A> denom = scratch_span<A>(frame, 2, l.rows());
          for (int64_t row = 0; row < l.rows(); ++row) {
            const bool skip = pt[row] == ignore;
            denom[row] = skip ? A(0) : w[pt[row]];
            loss[row] = skip ? A(0) : -denom[row] * px[l.row_offset(row) + pt[row] * l.s];
          }
          reduce_rows_into<A>(c.outputs[0], loss, denom, reduction_of(c.attrs, "nll_loss"));
        };
        if (input.dtype() == DType::Float64)
          go.template operator()<double>();
        else
          go.template operator()<float>();
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        if (!c.needs_grad(0)) return {};
        std::vector<Tensor> in{c.grad_outputs[0], c.inputs[0], c.inputs[1],
                               optional_input(c.inputs, 2)};
        return {call("nll_loss_backward", in, c.attrs)[0]};
      });

  r.def("nll_loss_backward")
      .doc(
          "Gradient of nll_loss with respect to `input`: -weight[target] scaled by the reduction "
          "at each target, zero elsewhere.")
      .input("grad", "gradient of the loss")
      .input("input")
      .input("target")
      .optional_input("weight")
      .attr("ignore_index", AttrType::Int, int64_t{-100})
      .attr("reduction", AttrType::String, std::string("mean"))
      .fusion(Fusion::Opaque)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        check_class_loss_backward(c, false);
        return {meta_of(c.inputs[1])};
      })
      .kernel([](KernelContext& c) {
        const Tensor& input = c.inputs[1];
        ClassLayout l = class_layout(input, "nll_loss_backward");
        const int64_t ignore = c.attrs.i("ignore_index");
        Tensor t = class_indices(c.inputs[2], l, ignore, "nll_loss_backward");
        const int64_t* pt = t.data<int64_t>();
        auto go = [&]<typename A>() {
          ScratchFrame frame;
          const std::span<A> w = class_weights<A>(frame, 0, optional_input(c.inputs, 3), l);
          const std::span<A> denom = scratch_span<A>(frame, 1, l.rows());
          for (int64_t i = 0; i < l.rows(); ++i) denom[i] = pt[i] == ignore ? A(0) : w[pt[i]];
          const std::span<const A> scale = row_scales<A>(frame, 2, c.inputs[0], l.rows(), denom,
                                                         reduction_of(c.attrs, "nll_loss"));
          const bool direct = c.outputs[0].dtype() == dtype_of<A>();
          Tensor ga = direct ? c.outputs[0] : Tensor::empty(input.shape(), dtype_of<A>());
          A* pg = ga.data<A>();
          std::fill_n(pg, ga.numel(), A(0));
          for (int64_t row = 0; row < l.rows(); ++row)
            if (pt[row] != ignore) pg[l.row_offset(row) + pt[row] * l.s] = -scale[row] * denom[row];
          if (!direct) c.outputs[0].copy_from(ga);
        };
        if (input.dtype() == DType::Float64)
          go.template operator()<double>();
        else
          go.template operator()<float>();
      });
}

}  // namespace

void register_loss(OpRegistry& r) {
  register_cross_entropy(r);
  register_nll_loss(r);
}

}  // namespace samba::ops
