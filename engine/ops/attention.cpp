// scaled_dot_product_attention as one op: softmax(q kᵀ · scale + mask) v,
// computed by the blocked kernel of engine/kernels/attention.h, which never
// holds the whole score matrix. Its second output, the log of each row's
// softmax denominator, is what the backward op recomputes the probabilities
// from. Dropout is not part of the op: front ends compose the unfused form
// with the dropout op when they need it.
#include <cmath>

#include "engine/kernels/attention.h"
#include "engine/kernels/row_stats.h"
#include "engine/ops/operands.h"

namespace samba::ops {
namespace {

Tensor input_or_none(std::span<const Tensor> in, size_t i) {
  return in.size() > i ? in[i] : Tensor();
}

Dims leading(const Dims& d, size_t drop) {
  return Dims(d.begin(), d.end() - static_cast<int64_t>(drop));
}

// The (batch..., rows, keys) shape scores have; checks q, k, v and the mask.
Dims score_shape(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                 const Tensor& mask, bool causal) {
  nn::require_floating(q, op, "query");
  SAMBA_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(), Status::DTypeMismatch,
              "{}: query, key and value must have one dtype, got {}, {} and {}", op,
              dtype_name(q.dtype()), dtype_name(k.dtype()), dtype_name(v.dtype()));
  SAMBA_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim(), Status::ShapeMismatch,
              "{}: query, key and value must have one rank of at least 2 (batch..., sequence, "
              "features), got shapes {}, {} and {}",
              op, dims_str(q.shape()), dims_str(k.shape()), dims_str(v.shape()));
  const Dims batch = leading(q.shape(), 2);
  const int64_t keys = k.shape()[k.dim() - 2];
  SAMBA_CHECK(leading(k.shape(), 2) == batch && leading(v.shape(), 2) == batch &&
                  k.shape().back() == q.shape().back() && v.shape()[v.dim() - 2] == keys,
              Status::ShapeMismatch,
              "{}: query {}, key {} and value {} do not fit: expected (batch..., L, E), "
              "(batch..., S, E) and (batch..., S, Ev) with the same batch dims",
              op, dims_str(q.shape()), dims_str(k.shape()), dims_str(v.shape()));
  Dims scores = batch;
  scores.push_back(q.shape()[q.dim() - 2]);
  scores.push_back(keys);
  if (!mask.defined()) return scores;
  SAMBA_CHECK(!causal, Status::InvalidArgument,
              "{}: give either attn_mask or is_causal, not both", op);
  SAMBA_CHECK(mask.dtype() == DType::Bool || is_floating(mask.dtype()), Status::DTypeMismatch,
              "{}: attn_mask must be bool (true: attend) or floating (added to the scores), got {}",
              op, dtype_name(mask.dtype()));
  bool fits = mask.dim() <= static_cast<int64_t>(scores.size());
  try {
    fits = fits && broadcast_shapes(mask.shape(), scores, op) == scores;
  } catch (const Error&) {
    fits = false;
  }
  SAMBA_CHECK(fits, Status::ShapeMismatch,
              "{}: attn_mask of shape {} does not broadcast to the scores' shape {}", op,
              dims_str(mask.shape()), dims_str(scores));
  return scores;
}

double attention_scale(const Attrs& a, const Tensor& q) {
  return a.has("scale") ? a.f("scale") : 1.0 / std::sqrt(static_cast<double>(q.shape().back()));
}

attention::Geometry geometry(const Tensor& q, const Tensor& k, const Tensor& v, const Attrs& a) {
  attention::Geometry g;
  g.batch = numel_of(leading(q.shape(), 2));
  g.rows = q.shape()[q.dim() - 2];
  g.keys = k.shape()[k.dim() - 2];
  g.dim = q.shape().back();
  g.vdim = v.shape().back();
  g.scale = attention_scale(a, q);
  g.causal = a.b("is_causal");
  return g;
}

// The mask as the kernel reads it: bool masks in place, float ones in the
// compute dtype; broadcast dims get stride 0 and each batch entry an offset.
template <typename C>
attention::Mask<C> kernel_mask(const Tensor& mask, const Dims& scores, const Tensor& held) {
  attention::Mask<C> m;
  if (!mask.defined()) return m;
  if (mask.dtype() == DType::Bool)
    m.keep = held.data<bool>();
  else
    m.bias = held.data<C>();
  const Dims st = broadcast_strides(held.shape(), held.strides(), scores);
  const size_t nb = scores.size() - 2;
  m.row_stride = st[nb];
  m.col_stride = st[nb + 1];
  const int64_t batch = numel_of(leading(scores, 2));
  m.batch_offset.resize(batch);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t rem = b, off = 0;
    for (size_t d = nb; d-- > 0;) {
      off += (rem % scores[d]) * st[d];
      rem /= scores[d];
    }
    m.batch_offset[b] = off;
  }
  return m;
}

Tensor held_mask(const Tensor& mask, DType cdt) {
  if (!mask.defined()) return mask;
  return mask.dtype() == DType::Bool ? mask.contiguous() : nn::compute_input(mask, cdt);
}

double attention_flops(const InferContext& c) {
  const Tensor &q = c.inputs[0], &v = c.inputs[2];
  const double scores = static_cast<double>(numel_of(leading(q.shape(), 1))) *
                        static_cast<double>(c.inputs[1].shape()[c.inputs[1].dim() - 2]);
  return 2.0 * scores * static_cast<double>(q.shape().back() + v.shape().back());
}

// The gradient of a float mask: dS = P ∘ (dout vᵀ - delta), summed to the
// mask's shape. Built from registry ops (and only when asked for), since the
// fused kernel keeps no (rows x keys) matrix.
Tensor mask_grad(const GradContext& c, const Tensor& gout, const Tensor& glse) {
  const Tensor &q = c.inputs[0], &k = c.inputs[1], &v = c.inputs[2], &mask = c.inputs[3];
  const Tensor &out = c.outputs[0], &lse = c.outputs[1];
  Tensor s = call1("mul", {call1("matmul_nt", {q, k}), wrap_scalar(attention_scale(c.attrs, q))});
  s = call1("add", {s, mask});
  auto column = [](const Tensor& t) { return call1("unsqueeze", {t}, {{"dim", int64_t{-1}}}); };
  const Tensor p = call1("exp", {call1("sub", {s, column(lse)})});
  Tensor delta = call1("sum", {call1("mul", {gout, out})},
                       {{"dim", std::vector<int64_t>{-1}}, {"keepdim", true}});
  if (glse.defined()) delta = call1("sub", {delta, column(glse)});
  const Tensor ds = call1("mul", {p, call1("sub", {call1("matmul_nt", {gout, v}), delta})});
  return sum_to(ds, mask.shape());
}

}  // namespace

void register_attention(OpRegistry& r) {
  r.def("scaled_dot_product_attention")
      .doc(
          "softmax(query keyᵀ · scale + mask) value over the last two dims, fused: the scores "
          "are never stored whole. query (batch..., L, E), key (batch..., S, E), value "
          "(batch..., S, Ev) -> out (batch..., L, Ev), and lse (batch..., L), the log of each "
          "row's softmax denominator. attn_mask broadcasts to (batch..., L, S): bool (true: "
          "attend) or floating (added to the scaled scores). is_causal lets query i attend keys "
          "j <= i. A row that attends nothing gives NaN, as the unfused softmax does.")
      .input("query")
      .input("key")
      .input("value")
      .optional_input("attn_mask", "bool or floating, broadcast to (batch..., L, S)")
      .output("out")
      .output("lse", "log-sum-exp of each row's scaled scores (kept for the backward op)")
      .attr("is_causal", AttrType::Bool, false, "mask keys after each query (no attn_mask then)")
      .optional_attr("scale", AttrType::Float, "multiplier of q kᵀ; absent: 1 / sqrt(E)")
      .fusion(Fusion::Opaque)
      .flops([](const InferContext& c, std::span<const TensorMeta>) { return attention_flops(c); })
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor &q = c.inputs[0], &v = c.inputs[2];
        score_shape("scaled_dot_product_attention", q, c.inputs[1], v, input_or_none(c.inputs, 3),
                    c.attrs.b("is_causal"));
        Dims out = leading(q.shape(), 1);
        out.push_back(v.shape().back());
        return {{q.dtype(), out}, {q.dtype(), leading(q.shape(), 1)}};
      })
      .kernel([](KernelContext& c) {
        const Tensor &q = c.inputs[0], &k = c.inputs[1], &v = c.inputs[2];
        const Tensor mask = input_or_none(c.inputs, 3);
        const DType cdt = nn::compute_dtype(q.dtype());
        const Dims scores = score_shape("scaled_dot_product_attention", q, k, v, mask, false);
        const auto g = geometry(q, k, v, c.attrs);
        nn::ComputeOutput out(c.outputs[0], cdt), lse(c.outputs[1], cdt);
        const Tensor held = held_mask(mask, cdt);
        nn::with_compute_type(cdt, [&]<typename C>() {
          attention::forward<C>(g, nn::compute_input(q, cdt).data<C>(),
                                nn::compute_input(k, cdt).data<C>(),
                                nn::compute_input(v, cdt).data<C>(),
                                kernel_mask<C>(mask, scores, held), out.data<C>(), lse.data<C>());
        });
        out.commit();
        lse.commit();
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Tensor& out = c.outputs[0];
        Tensor gout = c.grad_outputs[0], glse = c.grad_outputs[1];
        if (!gout.defined())
          gout = call1("zeros", {},
                       {{"shape", std::vector<int64_t>(out.shape().begin(), out.shape().end())},
                        {"dtype", out.dtype()}});
        const Tensor mask = input_or_none(c.inputs, 3);
        std::vector<Tensor> in{gout, c.inputs[0], c.inputs[1], c.inputs[2], out, c.outputs[1],
                               mask, glse};
        auto d = call("scaled_dot_product_attention_backward", in, c.attrs);
        Tensor gmask;
        if (c.needs_grad(3) && mask.defined() && is_floating(mask.dtype()))
          gmask = mask_grad(c, gout, glse);
        return {nn::undefined_if_not(c.needs_grad(0), d[0]),
                nn::undefined_if_not(c.needs_grad(1), d[1]),
                nn::undefined_if_not(c.needs_grad(2), d[2]), gmask};
      });

  r.def("scaled_dot_product_attention_backward")
      .doc(
          "Gradients (dquery, dkey, dvalue) of scaled_dot_product_attention from the gradient "
          "of its out (and optionally of its lse), recomputing the probabilities block by block "
          "from the forward op's lse.")
      .input("grad_out")
      .input("query")
      .input("key")
      .input("value")
      .input("out", "the forward op's out")
      .input("lse", "the forward op's lse")
      .optional_input("attn_mask")
      .optional_input("grad_lse")
      .output("dquery")
      .output("dkey")
      .output("dvalue")
      .attr("is_causal", AttrType::Bool, false)
      .optional_attr("scale", AttrType::Float, "absent: 1 / sqrt(E)")
      .fusion(Fusion::Opaque)
      .flops([](const InferContext& c, std::span<const TensorMeta>) {
        std::vector<Tensor> fwd(c.inputs.begin() + 1, c.inputs.begin() + 4);
        return 2.5 * attention_flops({c.op, fwd, c.attrs});
      })
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor &gout = c.inputs[0], &q = c.inputs[1], &k = c.inputs[2], &v = c.inputs[3];
        const char* op = "scaled_dot_product_attention_backward";
        score_shape(op, q, k, v, input_or_none(c.inputs, 6), c.attrs.b("is_causal"));
        Dims out = leading(q.shape(), 1);
        out.push_back(v.shape().back());
        const Dims rows = leading(q.shape(), 1);
        const Tensor glse = input_or_none(c.inputs, 7);
        SAMBA_CHECK(gout.shape() == out && c.inputs[4].shape() == out &&
                        c.inputs[5].shape() == rows && (!glse.defined() || glse.shape() == rows),
                    Status::ShapeMismatch,
                    "{}: grad_out and out must have shape {}, lse and grad_lse shape {}; got {}, "
                    "{}, {} and {}",
                    op, dims_str(out), dims_str(rows), dims_str(gout.shape()),
                    dims_str(c.inputs[4].shape()), dims_str(c.inputs[5].shape()),
                    glse.defined() ? dims_str(glse.shape()) : std::string("none"));
        return {meta_of(q), meta_of(k), meta_of(v)};
      })
      .kernel([](KernelContext& c) {
        const Tensor &q = c.inputs[1], &k = c.inputs[2], &v = c.inputs[3];
        const Tensor mask = input_or_none(c.inputs, 6), glse = input_or_none(c.inputs, 7);
        const DType cdt = nn::compute_dtype(q.dtype());
        const Dims scores =
            score_shape("scaled_dot_product_attention_backward", q, k, v, mask, false);
        const auto g = geometry(q, k, v, c.attrs);
        nn::ComputeOutput dq(c.outputs[0], cdt), dk(c.outputs[1], cdt), dv(c.outputs[2], cdt);
        const Tensor held = held_mask(mask, cdt);
        auto in = [&](const Tensor& t) { return nn::compute_input(t, cdt); };
        nn::with_compute_type(cdt, [&]<typename C>() {
          const Tensor dlse = in(glse);
          attention::backward<C>(g, in(q).data<C>(), in(k).data<C>(), in(v).data<C>(),
                                 kernel_mask<C>(mask, scores, held), in(c.inputs[4]).data<C>(),
                                 in(c.inputs[5]).data<C>(), in(c.inputs[0]).data<C>(),
                                 dlse.defined() ? dlse.data<C>() : nullptr, dq.data<C>(),
                                 dk.data<C>(), dv.data<C>());
        });
        dq.commit();
        dk.commit();
        dv.commit();
      });
}

}  // namespace samba::ops
