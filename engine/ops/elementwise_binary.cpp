// Elementwise binary ops with NumPy broadcasting and PyTorch type promotion.
#include "engine/ops/op_util.h"

namespace samba::ops {
namespace {

std::vector<TensorMeta> infer_promoted(const InferContext& c) {
  return {{result_type(c.inputs), broadcast_all(c.inputs, c.op.name.c_str())}};
}

// Runs f over (a, b) converted to the output's dtype.
template <typename F>
void arith_kernel(KernelContext& c, const char* what, F f) {
  const Tensor& out = c.outputs[0];
  Tensor a = as_dtype(c.inputs[0], out.dtype());
  Tensor b = as_dtype(c.inputs[1], out.dtype());
  SAMBA_DISPATCH_NUMERIC(out.dtype(), what, [&] { binary_loop<scalar_t, scalar_t>(out, a, b, f); });
}

}  // namespace

void register_elementwise_binary(OpRegistry& r) {
  r.def("add")
      .doc("a + alpha * b, broadcasting a and b.")
      .input("a").input("b")
      .attr("alpha", AttrType::Float, 1.0, "multiplier of b")
      .fusion(Fusion::Elementwise)
      .strided_inputs()
      .infer(infer_promoted)
      .kernel([](KernelContext& c) {
        const Tensor& out = c.outputs[0];
        const double alpha = c.attrs.f("alpha");
        if (out.dtype() == DType::Bool) {
          Tensor a = as_dtype(c.inputs[0], DType::Bool), b = as_dtype(c.inputs[1], DType::Bool);
          binary_loop<bool, bool>(out, a, b, [](bool x, bool y) { return x || y; });
          return;
        }
        SAMBA_CHECK(is_floating(out.dtype()) || alpha == static_cast<double>(static_cast<int64_t>(alpha)),
                    Status::InvalidArgument, "add: alpha {} must be an integer for {} tensors", alpha,
                    dtype_name(out.dtype()));
        if (alpha == 1.0) return arith_kernel(c, "add", [](auto x, auto y) { return x + y; });
        arith_kernel(c, "add", [alpha](auto x, auto y) { return x + static_cast<decltype(y)>(alpha) * y; });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Tensor& g = c.grad_outputs[0];
        const double alpha = c.attrs.f("alpha");
        Tensor ga, gb;
        if (c.needs_grad(0)) ga = sum_to(g, c.inputs[0].shape());
        if (c.needs_grad(1))
          gb = sum_to(alpha == 1.0 ? g : call1("mul", {g, wrap_scalar(alpha)}), c.inputs[1].shape());
        return {ga, gb};
      });

  r.def("mul")
      .doc("a * b, broadcasting a and b.")
      .input("a").input("b")
      .fusion(Fusion::Elementwise)
      .strided_inputs()
      .infer(infer_promoted)
      .kernel([](KernelContext& c) {
        if (c.outputs[0].dtype() == DType::Bool) {
          Tensor a = as_dtype(c.inputs[0], DType::Bool), b = as_dtype(c.inputs[1], DType::Bool);
          binary_loop<bool, bool>(c.outputs[0], a, b, [](bool x, bool y) { return x && y; });
          return;
        }
        arith_kernel(c, "mul", [](auto x, auto y) { return x * y; });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Tensor& g = c.grad_outputs[0];
        Tensor ga, gb;
        if (c.needs_grad(0)) ga = sum_to(call1("mul", {g, c.inputs[1]}), c.inputs[0].shape());
        if (c.needs_grad(1)) gb = sum_to(call1("mul", {g, c.inputs[0]}), c.inputs[1].shape());
        return {ga, gb};
      });
}

}  // namespace samba::ops
