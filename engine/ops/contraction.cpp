// Contractions: matmul, linear, addmm, baddbmm, bmm, and the transposed products
// matmul_nt / matmul_tn their gradients are made of. All read strided
// operands in place: a transposed layout becomes a GEMM transpose flag; other
// layouts are copied once (see engine/kernels/gemm.h).
#include <cmath>

#include "engine/kernels/gemm.h"
#include "engine/ops/operands.h"

namespace samba::ops {
namespace {

Dims leading(const Dims& d, size_t drop) {
  return Dims(d.begin(), d.end() - static_cast<int64_t>(drop));
}

Dims concat(Dims a, const Dims& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void check_same_dtype(const char* op, const char* an, const Tensor& a, const char* bn,
                      const Tensor& b) {
  SAMBA_CHECK(a.dtype() == b.dtype(), Status::DTypeMismatch,
              "{}: expected {} and {} to have the same dtype, got {} and {}", op, an, bn,
              dtype_name(a.dtype()), dtype_name(b.dtype()));
  SAMBA_CHECK(a.dtype() != DType::Bool, Status::DTypeMismatch, "{}: dtype bool is not supported",
              op);
}

// Flops of a product: one multiply and one add per output element and
// contracted index; `k` gives the contracted size from the inputs.
template <typename K>
FlopsFn contraction_flops(K k) {
  return [k](const InferContext& c, std::span<const TensorMeta> out) {
    return 2.0 * static_cast<double>(numel_of(out[0].shape)) * static_cast<double>(k(c.inputs));
  };
}

// Broadcast batch dims of two operands; the error names both full shapes.
Dims batch_of(const char* op, const Dims& a_batch, const Dims& b_batch, const Tensor& a,
              const Tensor& b) {
  try {
    return broadcast_shapes(a_batch, b_batch, op);
  } catch (const Error&) {
    fail(Status::ShapeMismatch, "{}: batch dims of a {} and b {} do not broadcast", op,
         dims_str(a.shape()), dims_str(b.shape()));
  }
}

// matmul's shapes: 1-D operands take part as a row (a) or a column (b) whose
// extra dim is dropped from the result.
struct MatmulShapes {
  Dims a2, b2;     // operands with the 1-D case made 2-D
  Dims out2, out;  // result with and without those dims
};

MatmulShapes matmul_shapes(const Tensor& a, const Tensor& b) {
  SAMBA_CHECK(a.dim() >= 1 && b.dim() >= 1, Status::ShapeMismatch,
              "matmul: both operands need at least one dim, got shapes {} and {}",
              dims_str(a.shape()), dims_str(b.shape()));
  MatmulShapes s;
  s.a2 = a.dim() == 1 ? Dims{1, a.shape()[0]} : a.shape();
  s.b2 = b.dim() == 1 ? Dims{b.shape()[0], 1} : b.shape();
  const int64_t k = s.a2.back(), kb = s.b2[s.b2.size() - 2];
  SAMBA_CHECK(k == kb, Status::ShapeMismatch,
              "matmul: shapes {} and {} cannot be multiplied (inner sizes {} and {} differ)",
              dims_str(a.shape()), dims_str(b.shape()), k, kb);
  const Dims batch = batch_of("matmul", leading(s.a2, 2), leading(s.b2, 2), a, b);
  const int64_t m = s.a2[s.a2.size() - 2], n = s.b2.back();
  s.out2 = concat(batch, {m, n});
  s.out = batch;
  if (a.dim() > 1) s.out.push_back(m);
  if (b.dim() > 1) s.out.push_back(n);
  return s;
}

// A view of `t` (contiguous or not) with the 1-D case made 2-D: as a row
// (1, k) or as a column (k, 1). No copy.
Tensor as_row(const Tensor& t) {
  return t.dim() != 1 ? t : t.as_strided({1, t.shape()[0]}, {0, t.strides()[0]}, t.offset());
}
Tensor as_column(const Tensor& t) {
  return t.dim() != 1 ? t : t.as_strided({t.shape()[0], 1}, {t.strides()[0], 1}, t.offset());
}
// The contiguous output seen with another shape of the same element count.
Tensor reshaped_out(const Tensor& out, const Dims& shape) {
  return out.shape() == shape ? out
                              : out.as_strided(shape, contiguous_strides(shape), out.offset());
}

Tensor reshape(const Tensor& t, const Dims& shape) {
  if (t.shape() == shape) return t;
  return call1("reshape", {t}, {{"shape", std::vector<int64_t>(shape.begin(), shape.end())}});
}

Tensor scaled(const Tensor& t, double s) {
  return s == 1.0 ? t : call1("mul", {t, wrap_scalar(s)});
}

// Shapes of the transposed products: a (..., ra, ca), b (..., rb, cb) with the
// contracted dims chosen by trans_a / trans_b.
TensorMeta transposed_product_meta(const char* op, const Tensor& a, bool trans_a, const Tensor& b,
                                   bool trans_b) {
  check_same_dtype(op, "a", a, "b", b);
  SAMBA_CHECK(a.dim() >= 2 && b.dim() >= 2, Status::ShapeMismatch,
              "{}: both operands need at least 2 dims, got shapes {} and {}", op,
              dims_str(a.shape()), dims_str(b.shape()));
  const int64_t ra = a.shape()[a.dim() - 2], ca = a.shape()[a.dim() - 1];
  const int64_t rb = b.shape()[b.dim() - 2], cb = b.shape()[b.dim() - 1];
  const int64_t ka = trans_a ? ra : ca, kb = trans_b ? cb : rb;
  SAMBA_CHECK(ka == kb, Status::ShapeMismatch,
              "{}: shapes {} and {} cannot be multiplied (inner sizes {} and {} differ)", op,
              dims_str(a.shape()), dims_str(b.shape()), ka, kb);
  const Dims batch = batch_of(op, leading(a.shape(), 2), leading(b.shape(), 2), a, b);
  return {a.dtype(), concat(batch, {trans_a ? ca : ra, trans_b ? rb : cb})};
}

void register_transposed_products(OpRegistry& r) {
  r.def("matmul_nt")
      .doc(
          "a @ bᵀ over the last two dims: a (..., m, k), b (..., n, k) -> (..., m, n), batch dims "
          "broadcast. b is read in place; used by the gradients of the contractions.")
      .input("a")
      .input("b")
      .fusion(Fusion::Contraction)
      .strided_inputs()
      .flops(contraction_flops([](std::span<const Tensor> in) { return in[0].shape().back(); }))
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        return {transposed_product_meta("matmul_nt", c.inputs[0], false, c.inputs[1], true)};
      })
      .kernel([](KernelContext& c) {
        batched_product(c.outputs[0], c.inputs[0], false, c.inputs[1], true);
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        // C = A Bᵀ: dA = dC B, dB = dCᵀ A.
        const Tensor& g = c.grad_outputs[0];
        Tensor ga, gb;
        if (c.needs_grad(0)) ga = sum_to(call1("matmul", {g, c.inputs[1]}), c.inputs[0].shape());
        if (c.needs_grad(1)) gb = sum_to(call1("matmul_tn", {g, c.inputs[0]}), c.inputs[1].shape());
        return {ga, gb};
      });

  r.def("matmul_tn")
      .doc(
          "aᵀ @ b over the last two dims: a (..., k, m), b (..., k, n) -> (..., m, n), batch dims "
          "broadcast. a is read in place; used by the gradients of the contractions.")
      .input("a")
      .input("b")
      .fusion(Fusion::Contraction)
      .strided_inputs()
      .flops(contraction_flops([](std::span<const Tensor> in) { return in[0].shape().end()[-2]; }))
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        return {transposed_product_meta("matmul_tn", c.inputs[0], true, c.inputs[1], false)};
      })
      .kernel([](KernelContext& c) {
        batched_product(c.outputs[0], c.inputs[0], true, c.inputs[1], false);
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        // C = Aᵀ B: dA = B dCᵀ, dB = A dC.
        const Tensor& g = c.grad_outputs[0];
        Tensor ga, gb;
        if (c.needs_grad(0)) ga = sum_to(call1("matmul_nt", {c.inputs[1], g}), c.inputs[0].shape());
        if (c.needs_grad(1)) gb = sum_to(call1("matmul", {c.inputs[0], g}), c.inputs[1].shape());
        return {ga, gb};
      });
}

void register_matmul(OpRegistry& r) {
  r.def("matmul")
      .doc(
          "Matrix product with PyTorch's rules: 1-D x 1-D is a dot product, a 1-D operand acts as "
          "a "
          "row (first) or column (second) whose dim is dropped, and dims before the last two are "
          "batch dims that broadcast.")
      .input("a")
      .input("b")
      .fusion(Fusion::Contraction)
      .strided_inputs()
      .flops(contraction_flops([](std::span<const Tensor> in) {
        return in[0].dim() == 0 ? int64_t{1} : in[0].shape().back();
      }))
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        check_same_dtype("matmul", "a", c.inputs[0], "b", c.inputs[1]);
        return {{c.inputs[0].dtype(), matmul_shapes(c.inputs[0], c.inputs[1]).out}};
      })
      .kernel([](KernelContext& c) {
        // Two matrices need none of the shape work below (it builds several
        // dim vectors), which costs as much as the product of small ones.
        ProductEpilogue ep;
        ep.packed_b = c.packed_b;
        ep.tail = c.tail;
        if (c.inputs[0].dim() == 2 && c.inputs[1].dim() == 2) {
          batched_product(c.outputs[0], c.inputs[0], false, c.inputs[1], false, ep);
          return;
        }
        const MatmulShapes s = matmul_shapes(c.inputs[0], c.inputs[1]);
        batched_product(reshaped_out(c.outputs[0], s.out2), as_row(c.inputs[0]), false,
                        as_column(c.inputs[1]), false, ep);
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Tensor &a = c.inputs[0], &b = c.inputs[1];
        const MatmulShapes s = matmul_shapes(a, b);
        const Tensor g = reshape(c.grad_outputs[0], s.out2);
        const Tensor a2 = reshape(a, s.a2), b2 = reshape(b, s.b2);
        Tensor ga, gb;
        if (c.needs_grad(0)) ga = reshape(sum_to(call1("matmul_nt", {g, b2}), s.a2), a.shape());
        if (c.needs_grad(1)) {
          Tensor prod;
          if (b2.dim() == 2 && g.dim() > 2) {
            // One B shared by the whole batch: fold the batch into the contracted dim
            // instead of forming a per-batch gradient and summing it.
            const int64_t k = s.a2.back(), n = s.b2.back();
            const int64_t rows = numel_of(leading(s.out2, 1));
            prod = call1("matmul_tn", {reshape(a2, {rows, k}), reshape(g, {rows, n})});
          } else {
            prod = call1("matmul_tn", {a2, g});
          }
          gb = reshape(sum_to(prod, s.b2), b.shape());
        }
        return {ga, gb};
      });
}

// ---- linear ----------------------------------------------------------------------

Activation linear_activation(const Attrs& attrs) {
  const std::string& name = attrs.s("activation");
  auto act = activation_from_name(name);
  SAMBA_CHECK(act.has_value(), Status::InvalidArgument,
              "linear: unknown activation '{}'; expected one of: {}", name, epilogue_activation_names());
  return *act;
}

// The gradient of linear's pre-activation result, given dL/dy.
Tensor activation_grad(const GradContext& c) {
  const Tensor& g = c.grad_outputs[0];
  const Tensor& y = c.outputs[0];
  switch (linear_activation(c.attrs)) {
    case Activation::None: return g;
    case Activation::Relu: return call1("relu_backward", {g, y});
    case Activation::Tanh: return call1("tanh_backward", {g, y});
    case Activation::Sigmoid: return call1("sigmoid_backward", {g, y});
    case Activation::GeluErf:
    case Activation::GeluTanh: {
      std::vector<Tensor> in(c.inputs.begin(), c.inputs.end());
      const Tensor pre = call("linear", in, {})[0];
      const bool tanh = linear_activation(c.attrs) == Activation::GeluTanh;
      return call1("gelu_backward", {g, pre},
                   {{"approximate", std::string(tanh ? "tanh" : "none")}});
    }
  }
  return g;
}

TensorMeta linear_meta(const Tensor& x, const Tensor& w, const Tensor& bias) {
  check_same_dtype("linear", "x", x, "weight", w);
  SAMBA_CHECK(
      w.dim() == 2, Status::ShapeMismatch,
      "linear: weight must be 2-D (out_features, in_features), got shape {} (x has shape {})",
      dims_str(w.shape()), dims_str(x.shape()));
  SAMBA_CHECK(
      x.dim() >= 1 && x.shape().back() == w.shape()[1], Status::ShapeMismatch,
      "linear: x of shape {} does not match weight of shape {} (expected x's last dim to be {})",
      dims_str(x.shape()), dims_str(w.shape()), w.shape()[1]);
  if (bias.defined()) {
    check_same_dtype("linear", "x", x, "bias", bias);
    SAMBA_CHECK(bias.dim() == 1 && bias.shape()[0] == w.shape()[0], Status::ShapeMismatch,
                "linear: bias must have shape [{}] to match weight of shape {}, got {}",
                w.shape()[0], dims_str(w.shape()), dims_str(bias.shape()));
  }
  Dims out = leading(x.shape(), 1);
  out.push_back(w.shape()[0]);
  return {x.dtype(), out};
}

void register_linear(OpRegistry& r) {
  r.def("linear")
      .doc(
          "x @ weightᵀ + bias for x of shape (..., in_features), weight (out_features, "
          "in_features) "
          "and bias (out_features). The weight is read transposed in place and the bias is added "
          "by the GEMM epilogue.")
      .input("x")
      .input("weight")
      .optional_input("bias")
      .attr("activation", AttrType::String, std::string("none"),
            fmt::format("applied to the result by the GEMM epilogue: one of {} (the compiler fuses a "
                        "following activation op into it)",
                        epilogue_activation_names()))
      .fusion(Fusion::Contraction)
      .strided_inputs()
      .flops(contraction_flops([](std::span<const Tensor> in) { return in[0].shape().back(); }))
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        linear_activation(c.attrs);
        return {
            linear_meta(c.inputs[0], c.inputs[1], c.inputs.size() > 2 ? c.inputs[2] : Tensor())};
      })
      .kernel([](KernelContext& c) {
        const Tensor& x = c.inputs[0];
        const Tensor& out = c.outputs[0];
        ProductEpilogue ep;
        if (c.inputs.size() > 2) ep.bias = c.inputs[2];
        ep.act = linear_activation(c.attrs);
        ep.packed_b = c.packed_b;
        ep.tail = c.tail;
        ep.rows = c.rows;
        const Tensor out2 = x.dim() == 1 ? reshaped_out(out, {1, out.shape()[0]}) : out;
        batched_product(out2, as_row(x), false, c.inputs[1], true, ep);
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        // y = act(x Wᵀ + b): the activation's gradient first (from y where the
        // activation allows, else from the recomputed pre-activation), then
        // dx = dy W, dW = dyᵀ x (batch folded into the contraction), db = dy
        // summed over every dim but the last.
        const Tensor &x = c.inputs[0], &w = c.inputs[1];
        const Tensor g = activation_grad(c);
        const int64_t in = w.shape()[1], outf = w.shape()[0];
        Tensor gx, gw, gb;
        if (c.needs_grad(0)) gx = call1("matmul", {g, w});
        if (c.needs_grad(1)) {
          const int64_t rows = numel_of(leading(x.shape(), 1));
          gw = call1("matmul_tn", {reshape(g, {rows, outf}), reshape(x, {rows, in})});
        }
        if (c.needs_grad(2)) gb = sum_to(g, {outf});
        return {gx, gw, gb};
      });
}

// ---- addmm, baddbmm, bmm --------------------------------------------------------------------

// The product a @ b of addmm (2-D operands) or baddbmm (3-D, same batch) with
// the shape `input` must broadcast to.
Dims added_product_shape(const char* op, int64_t rank, const Tensor& in, const Tensor& a,
                         const Tensor& b) {
  check_same_dtype(op, "a", a, "b", b);
  check_same_dtype(op, "input", in, "a", a);
  SAMBA_CHECK(a.dim() == rank && b.dim() == rank, Status::ShapeMismatch,
              "{}: a and b must be {}-D, got shapes {} and {}", op, rank, dims_str(a.shape()),
              dims_str(b.shape()));
  SAMBA_CHECK(rank == 2 || a.shape()[0] == b.shape()[0], Status::ShapeMismatch,
              "{}: batch sizes differ: a has shape {} and b has shape {}", op,
              dims_str(a.shape()), dims_str(b.shape()));
  const int64_t k = a.shape()[rank - 1], kb = b.shape()[rank - 2];
  SAMBA_CHECK(k == kb, Status::ShapeMismatch,
              "{}: shapes {} and {} cannot be multiplied (inner sizes {} and {} differ)", op,
              dims_str(a.shape()), dims_str(b.shape()), k, kb);
  Dims out = leading(a.shape(), 1);
  out.push_back(b.shape().back());
  bool fits = in.dim() <= rank;
  for (int64_t d = 0; fits && d < in.dim(); ++d) {
    const int64_t have = in.shape()[in.dim() - 1 - d], want = out[rank - 1 - d];
    fits = have == want || have == 1;
  }
  SAMBA_CHECK(fits, Status::ShapeMismatch,
              "{}: input of shape {} does not broadcast to the product's shape {}", op,
              dims_str(in.shape()), dims_str(out));
  return out;
}

// addmm and baddbmm: beta * input + alpha * (a @ b) on operands of `rank` dims.
void register_added_product(OpRegistry& r, const char* op, int64_t rank, std::string doc) {
  r.def(op)
      .doc(std::move(doc))
      .input("input")
      .input("a")
      .input("b")
      .attr("beta", AttrType::Float, 1.0, "multiplier of input")
      .attr("alpha", AttrType::Float, 1.0, "multiplier of a @ b")
      .fusion(Fusion::Contraction)
      .strided_inputs()
      .flops(contraction_flops([](std::span<const Tensor> in) { return in[1].shape().back(); }))
      .infer([op, rank](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor &in = c.inputs[0], &a = c.inputs[1], &b = c.inputs[2];
        const Dims out = added_product_shape(op, rank, in, a, b);
        const double alpha = c.attrs.f("alpha"), beta = c.attrs.f("beta");
        SAMBA_CHECK(
            is_floating(a.dtype()) || (alpha == std::trunc(alpha) && beta == std::trunc(beta)),
            Status::InvalidArgument, "{}: alpha {} and beta {} must be integers for {} tensors",
            op, alpha, beta, dtype_name(a.dtype()));
        return {{a.dtype(), out}};
      })
      .kernel([](KernelContext& c) {
        const Tensor& in = c.inputs[0];
        const Tensor& out = c.outputs[0];
        ProductEpilogue ep;
        ep.alpha = c.attrs.f("alpha");
        const double beta = c.attrs.f("beta");
        const int64_t p = out.shape().back();
        const bool row_vector = in.numel() == p && in.dim() >= 1 && in.shape().back() == p;
        if (beta == 1.0 && row_vector) {
          // The common "bias" form: added by the GEMM epilogue, no pass over out.
          ep.bias = in.as_strided({p}, {in.strides().back()}, in.offset());
        } else if (beta != 0.0) {
          out.copy_from(in);
          ep.beta = beta;
        }
        batched_product(out, c.inputs[1], false, c.inputs[2], false, ep);
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Tensor& g = c.grad_outputs[0];
        const double alpha = c.attrs.f("alpha"), beta = c.attrs.f("beta");
        Tensor gi, ga, gb;
        if (c.needs_grad(0)) gi = sum_to(scaled(g, beta), c.inputs[0].shape());
        if (c.needs_grad(1)) ga = scaled(call1("matmul_nt", {g, c.inputs[2]}), alpha);
        if (c.needs_grad(2)) gb = scaled(call1("matmul_tn", {c.inputs[1], g}), alpha);
        return {gi, ga, gb};
      });
}

void register_addmm(OpRegistry& r) {
  register_added_product(
      r, "addmm", 2,
      "beta * input + alpha * (a @ b) for 2-D a (n, m) and b (m, p); input broadcasts to (n, p). "
      "With beta = 0 input is ignored (its NaNs do not propagate).");
  register_added_product(
      r, "baddbmm", 3,
      "beta * input + alpha * (a @ b) for 3-D a (batch, n, m) and b (batch, m, p); input "
      "broadcasts to (batch, n, p). With beta = 0 input is ignored (its NaNs do not "
      "propagate).");

  r.def("bmm")
      .doc(
          "Batched matrix product of 3-D tensors: a (batch, n, m) @ b (batch, m, p) -> (batch, n, "
          "p); "
          "no broadcasting.")
      .input("a")
      .input("b")
      .fusion(Fusion::Contraction)
      .strided_inputs()
      .flops(contraction_flops([](std::span<const Tensor> in) { return in[0].shape().back(); }))
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor &a = c.inputs[0], &b = c.inputs[1];
        check_same_dtype("bmm", "a", a, "b", b);
        SAMBA_CHECK(a.dim() == 3 && b.dim() == 3, Status::ShapeMismatch,
                    "bmm: a and b must be 3-D (batch, rows, cols), got shapes {} and {}",
                    dims_str(a.shape()), dims_str(b.shape()));
        SAMBA_CHECK(a.shape()[0] == b.shape()[0], Status::ShapeMismatch,
                    "bmm: batch sizes differ: a has shape {} and b has shape {}",
                    dims_str(a.shape()), dims_str(b.shape()));
        SAMBA_CHECK(a.shape()[2] == b.shape()[1], Status::ShapeMismatch,
                    "bmm: shapes {} and {} cannot be multiplied (inner sizes {} and {} differ)",
                    dims_str(a.shape()), dims_str(b.shape()), a.shape()[2], b.shape()[1]);
        return {{a.dtype(), {a.shape()[0], a.shape()[1], b.shape()[2]}}};
      })
      .kernel([](KernelContext& c) {
        batched_product(c.outputs[0], c.inputs[0], false, c.inputs[1], false);
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Tensor& g = c.grad_outputs[0];
        Tensor ga, gb;
        if (c.needs_grad(0)) ga = call1("matmul_nt", {g, c.inputs[1]});
        if (c.needs_grad(1)) gb = call1("matmul_tn", {c.inputs[0], g});
        return {ga, gb};
      });
}

}  // namespace

void register_contraction(OpRegistry& r) {
  register_matmul(r);
  register_transposed_products(r);
  register_linear(r);
  register_addmm(r);
}

}  // namespace samba::ops
