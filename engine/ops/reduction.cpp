// Reductions over dims with keepdim.
#include <numeric>

#include "engine/ops/op_util.h"

namespace samba::ops {
namespace {

// The dims a reduction covers: all when the `dim` attribute is absent or empty.
std::vector<bool> reduced_mask(const Tensor& x, const Attrs& a, const char* what) {
  std::vector<bool> mask(x.dim(), !a.has("dim") || a.ints("dim").empty());
  if (a.has("dim"))
    for (int64_t d : a.ints("dim")) {
      int64_t w = wrap_dim(d, x.dim(), what);
      SAMBA_CHECK(x.dim() == 0 || !mask[w] || a.ints("dim").empty(), Status::InvalidArgument,
                  "{}: dim {} appears more than once", what, d);
      if (x.dim() > 0) mask[w] = true;
    }
  return mask;
}

Dims reduced_shape(const Tensor& x, const std::vector<bool>& mask, bool keepdim) {
  Dims out;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (!mask[d]) out.push_back(x.shape()[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

// Moves reduced dims last and makes the tensor contiguous, so every output
// element reduces one contiguous row.
Tensor reduced_last(const Tensor& x, const std::vector<bool>& mask, int64_t* rows, int64_t* len) {
  Dims shape, strides;
  int64_t r = 1, l = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!mask[d]) shape.push_back(x.shape()[d]), strides.push_back(x.strides()[d]), r *= x.shape()[d];
  for (int64_t d = 0; d < x.dim(); ++d)
    if (mask[d]) shape.push_back(x.shape()[d]), strides.push_back(x.strides()[d]), l *= x.shape()[d];
  *rows = r;
  *len = l;
  return x.as_strided(shape, strides, x.offset()).contiguous();
}

DType sum_dtype(const Tensor& x, const Attrs& a) {
  if (a.has("dtype")) return a.dtype("dtype");
  return is_integral(x.dtype(), true) ? DType::Int64 : x.dtype();
}

}  // namespace

void register_reduction(OpRegistry& r) {
  r.def("sum")
      .doc("Sum over `dim` (all dims when absent), keeping reduced dims as size 1 when keepdim.")
      .input("x")
      .optional_attr("dim", AttrType::Ints, "dims to reduce; none or [] reduces all")
      .attr("keepdim", AttrType::Bool, false)
      .optional_attr("dtype", AttrType::DType, "accumulate and return in this dtype")
      .fusion(Fusion::Reduction)
      .strided_inputs()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        auto mask = reduced_mask(x, c.attrs, "sum");
        return {{sum_dtype(x, c.attrs), reduced_shape(x, mask, c.attrs.b("keepdim"))}};
      })
      .kernel([](KernelContext& c) {
        const Tensor& out = c.outputs[0];
        Tensor x = as_dtype(c.inputs[0], out.dtype());
        int64_t rows, len;
        Tensor xr = reduced_last(x, reduced_mask(c.inputs[0], c.attrs, "sum"), &rows, &len);
        SAMBA_DISPATCH_NUMERIC(out.dtype(), "sum", [&] {
          using A = std::conditional_t<std::is_floating_point_v<acc_t<scalar_t>>, double, acc_t<scalar_t>>;
          const scalar_t* px = xr.data<scalar_t>();
          scalar_t* po = out.data<scalar_t>();
          parallel_for(rows, std::max<int64_t>(1, kMinGrain / std::max<int64_t>(len, 1)), [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) {
              A acc = 0;
              const scalar_t* row = px + i * len;
              for (int64_t j = 0; j < len; ++j) acc += static_cast<A>(row[j]);
              po[i] = convert_value<scalar_t>(acc);
            }
          });
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        const Tensor& x = c.inputs[0];
        auto mask = reduced_mask(x, c.attrs, "sum");
        Dims kept = reduced_shape(x, mask, true);
        Tensor g = call1("reshape", {c.grad_outputs[0]}, {{"shape", kept}});
        return {call1("expand", {g}, {{"shape", x.shape()}})};
      });
}

}  // namespace samba::ops
