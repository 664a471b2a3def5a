// In-place updates the compiler emits around gradients: zero_ (ZEROGRAD),
// add_ (gradient accumulation) and copy_ (writing a computed gradient into
// the parameter's gradient tensor). They return nothing and have no
// gradient: they change model state, they are not part of the math.
#include <cmath>
#include <cstring>

#include "engine/ops/operands.h"

namespace samba::ops {
namespace {

void check_into(const char* op, const Tensor& dst, const Tensor& src) {
  const Dims b = broadcast_shapes(dst.shape(), src.shape(), op);
  SAMBA_CHECK(b == dst.shape(), Status::ShapeMismatch,
              "{}: a source of shape {} does not broadcast to the destination's shape {}", op,
              dims_str(src.shape()), dims_str(dst.shape()));
}

}  // namespace

void register_inplace(OpRegistry& r) {
  r.def("zero_")
      .doc("Sets every element of x to zero, in place.")
      .mutated_input("x")
      .no_outputs()
      .fusion(Fusion::Elementwise)
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        SAMBA_CHECK(c.inputs.size() == 1 && c.inputs[0].defined(), Status::NullPointer, "zero_: x is missing");
        return {};
      })
      .kernel([](KernelContext& c) {
        const Tensor& x = c.inputs[0];
        std::byte* p = static_cast<std::byte*>(x.raw_data());
        const size_t n = x.nbytes();
        parallel_for(static_cast<int64_t>(n), kMinGrain * 4,
                     [&](int64_t b, int64_t e) { std::memset(p + b, 0, static_cast<size_t>(e - b)); });
      });

  r.def("add_")
      .doc(
          "x += alpha * y in place; y broadcasts to x's shape and is converted to x's dtype (an "
          "integer x needs a whole alpha).")
      .mutated_input("x")
      .input("y")
      .attr("alpha", AttrType::Float, 1.0, "multiplier of y")
      .no_outputs()
      .fusion(Fusion::Elementwise)
      .strided_inputs()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        SAMBA_CHECK(c.inputs[0].defined(), Status::NullPointer, "add_: x is missing");
        check_into("add_", c.inputs[0], c.inputs[1]);
        const DType dt = c.inputs[0].dtype();
        SAMBA_CHECK(dt != DType::Bool, Status::DTypeMismatch,
                    "add_: x must have a numeric dtype, got bool");
        // Integer buffers (a batch counter) step by whole numbers, as in torch.
        const double alpha = c.attrs.f("alpha");
        SAMBA_CHECK(is_floating(dt) || alpha == std::trunc(alpha), Status::InvalidArgument,
                    "add_: x has dtype {}, so alpha must be a whole number, got {}",
                    dtype_name(dt), alpha);
        return {};
      })
      .kernel([](KernelContext& c) {
        const Tensor& x = c.inputs[0];
        const Tensor y = as_dtype(c.inputs[1], x.dtype());
        const double alpha = c.attrs.f("alpha");
        SAMBA_DISPATCH_NUMERIC(x.dtype(), "add_", [&] {
          using A = acc_t<scalar_t>;
          const A a = static_cast<A>(alpha);
          binary_loop<scalar_t, scalar_t>(x, x, y, [a](A u, A v) { return u + a * v; });
        });
      });

  r.def("copy_")
      .doc("dst = src in place; src broadcasts to dst's shape and is converted to dst's dtype.")
      .mutated_input("dst")
      .input("src")
      .no_outputs()
      .fusion(Fusion::Elementwise)
      .strided_inputs()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        SAMBA_CHECK(c.inputs[0].defined(), Status::NullPointer, "copy_: dst is missing");
        check_into("copy_", c.inputs[0], c.inputs[1]);
        return {};
      })
      .kernel([](KernelContext& c) { c.inputs[0].copy_from(c.inputs[1]); });
}

}  // namespace samba::ops
