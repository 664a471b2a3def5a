// SambaTensor's conversion, layout and new-tensor methods. Everything that
// has autograd meaning runs as an op through samba::call, so gradients flow
// through it and a tracer records it.
#include <cmath>
#include <limits>
#include <numeric>

#include "bindings/c/capi.h"
#include "engine/core/dispatch.h"

using namespace samba;
using namespace samba::capi;

namespace samba::capi {

void check_representable(double v, DType dt, const char* what) {
  if (is_floating(dt) || dt == DType::Bool) return;
  const auto [lo, hi] = SAMBA_DISPATCH_INTEGRAL(dt, what, [] {
    return std::pair<double, double>(static_cast<double>(std::numeric_limits<scalar_t>::min()),
                                     static_cast<double>(std::numeric_limits<scalar_t>::max()));
  });
  // The int64 maximum rounds up to 2^63 as a double, which is itself out of range.
  SAMBA_CHECK(std::isfinite(v) && v >= lo && (dt == DType::Int64 ? v < hi : v <= hi),
              Status::OutOfRange, "{} {} does not fit dtype {} (range {} to {})", what, v,
              dtype_name(dt), lo, hi);
}

}  // namespace samba::capi

namespace {

// A contiguous copy of t in `dtype` (a copy even when the dtype matches),
// through the registry's cast op so autograd and tracing see it.
Tensor convert(const Tensor& t, DType dtype) {
  return run_op1(nullptr, "cast", std::span<const Tensor>(&t, 1), Attrs{{"dtype", dtype}});
}

samba_status to_dtype(const char* fn, samba_tensor* t, samba_dtype dtype, samba_tensor** out) {
  return guarded(fn, [&] {
    out_param(out, "out");
    Tensor x = tensor_arg(t, "t");
    DType dt = checked_dtype(dtype, "dtype");
    if (x.dtype() == dt) {
      // PyTorch returns the tensor itself when no conversion is needed.
      *out = to_handle(x);
      return;
    }
    *out = to_handle(convert(x, dt));
  });
}

enum class Fill { Empty, Zeros, Ones, Value };

samba_status new_tensor(const char* fn, const samba_tensor* t, const int64_t* shape, size_t ndim,
                        Fill fill, double value, samba_dtype dtype, int32_t requires_grad,
                        samba_tensor** out) {
  return guarded(fn, [&] {
    out_param(out, "out");
    Tensor like = tensor_arg(t, "t");
    DType dt = dtype == SAMBA_DTYPE_SAME ? like.dtype() : checked_dtype(dtype, "dtype");
    Dims dims = checked_dims(shape, ndim, "shape");
    checked_nbytes(dims, dt);
    SAMBA_CHECK(!requires_grad || is_floating(dt), Status::DTypeMismatch,
                "requires_grad needs a floating-point dtype; {} is not one", dtype_name(dt));
    Attrs attrs{{"shape", dims}, {"dtype", dt}};
    const char* op = "empty";
    if (fill == Fill::Zeros) op = "zeros";
    if (fill == Fill::Ones) op = "ones";
    if (fill == Fill::Value) {
      check_representable(value, dt, "fill_value");
      op = "full";
      attrs.set("value", value);
    }
    Tensor r = run_op1(nullptr, op, {}, attrs);
    r.impl()->requires_grad = requires_grad != 0;
    *out = to_handle(std::move(r));
  });
}

std::vector<int64_t> checked_ints(const int64_t* values, size_t n, const char* what) {
  SAMBA_CHECK(n <= static_cast<size_t>(kMaxRank), Status::InvalidArgument,
              "{} has {} entries; at most {} dimensions are supported", what, n, kMaxRank);
  if (n) require(values, what);
  return std::vector<int64_t>(values, values + n);
}

Tensor one_input_op(std::string_view op, const Tensor& x, const Attrs& attrs = {}) {
  return run_op1(nullptr, op, std::span<const Tensor>(&x, 1), attrs);
}

}  // namespace

extern "C" {

samba_status samba_tensor_dim(const samba_tensor* t, int64_t* out) {
  return SAMBA_GUARDED({
    require(out, "out");
    *out = tensor_arg(t, "t").dim();
  });
}

samba_status samba_tensor_nbytes(const samba_tensor* t, size_t* out) {
  return SAMBA_GUARDED({
    require(out, "out");
    *out = tensor_arg(t, "t").nbytes();
  });
}

samba_status samba_tensor_is_floating_point(const samba_tensor* t, int32_t* out) {
  return SAMBA_GUARDED({
    require(out, "out");
    *out = is_floating(tensor_arg(t, "t").dtype()) ? 1 : 0;
  });
}

samba_status samba_tensor_to(samba_tensor* t, samba_dtype dtype, samba_tensor** out) {
  return to_dtype(__func__, t, dtype, out);
}

samba_status samba_tensor_type_as(samba_tensor* t, const samba_tensor* other, samba_tensor** out) {
  if (!other) {
    if (out) *out = nullptr;
    return set_error(__func__, SAMBA_ERR_NULL_POINTER, "argument 'other' is NULL");
  }
  return to_dtype(__func__, t, static_cast<samba_dtype>(impl(other)->dtype), out);
}

samba_status samba_tensor_bfloat16(samba_tensor* t, samba_tensor** out) {
  return to_dtype(__func__, t, SAMBA_BFLOAT16, out);
}
samba_status samba_tensor_float(samba_tensor* t, samba_tensor** out) {
  return to_dtype(__func__, t, SAMBA_FLOAT32, out);
}
samba_status samba_tensor_int(samba_tensor* t, samba_tensor** out) {
  return to_dtype(__func__, t, SAMBA_INT32, out);
}
samba_status samba_tensor_long(samba_tensor* t, samba_tensor** out) {
  return to_dtype(__func__, t, SAMBA_INT64, out);
}
samba_status samba_tensor_short(samba_tensor* t, samba_tensor** out) {
  return to_dtype(__func__, t, SAMBA_INT16, out);
}
samba_status samba_tensor_bool(samba_tensor* t, samba_tensor** out) {
  return to_dtype(__func__, t, SAMBA_BOOL, out);
}

samba_status samba_tensor_new_empty(const samba_tensor* t, const int64_t* shape, size_t ndim,
                                    samba_dtype dtype, int32_t requires_grad, samba_tensor** out) {
  return new_tensor(__func__, t, shape, ndim, Fill::Empty, 0, dtype, requires_grad, out);
}
samba_status samba_tensor_new_zeros(const samba_tensor* t, const int64_t* shape, size_t ndim,
                                    samba_dtype dtype, int32_t requires_grad, samba_tensor** out) {
  return new_tensor(__func__, t, shape, ndim, Fill::Zeros, 0, dtype, requires_grad, out);
}
samba_status samba_tensor_new_ones(const samba_tensor* t, const int64_t* shape, size_t ndim,
                                   samba_dtype dtype, int32_t requires_grad, samba_tensor** out) {
  return new_tensor(__func__, t, shape, ndim, Fill::Ones, 0, dtype, requires_grad, out);
}
samba_status samba_tensor_new_full(const samba_tensor* t, const int64_t* shape, size_t ndim,
                                   double fill_value, samba_dtype dtype, int32_t requires_grad,
                                   samba_tensor** out) {
  return new_tensor(__func__, t, shape, ndim, Fill::Value, fill_value, dtype, requires_grad, out);
}

samba_status samba_tensor_reshape(samba_tensor* t, const int64_t* shape, size_t ndim,
                                  samba_tensor** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    Tensor x = tensor_arg(t, "t");
    *out = to_handle(one_input_op("reshape", x, {{"shape", checked_ints(shape, ndim, "shape")}}));
  });
}

samba_status samba_tensor_view_as(samba_tensor* t, const samba_tensor* other, samba_tensor** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    Tensor x = tensor_arg(t, "t");
    Tensor like = tensor_arg(other, "other");
    SAMBA_CHECK(
        x.numel() == like.numel(), Status::ShapeMismatch,
        "view_as: tensor of shape {} ({} elements) cannot be viewed as shape {} ({} elements)",
        dims_str(x.shape()), x.numel(), dims_str(like.shape()), like.numel());
    Tensor r = one_input_op("reshape", x, {{"shape", like.shape()}});
    // reshape copies when the strides do not allow a view; view_as must not.
    SAMBA_CHECK(
        x.numel() == 0 || r.impl()->storage == x.impl()->storage, Status::InvalidArgument,
        "view_as: tensor of shape {} with strides {} cannot be viewed as shape {} without a "
        "copy; call samba_tensor_contiguous first or use samba_tensor_reshape",
        dims_str(x.shape()), dims_str(x.strides()), dims_str(like.shape()));
    *out = to_handle(std::move(r));
  });
}

samba_status samba_tensor_permute(samba_tensor* t, const int64_t* dims, size_t ndim,
                                  samba_tensor** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    Tensor x = tensor_arg(t, "t");
    *out = to_handle(one_input_op("permute", x, {{"dims", checked_ints(dims, ndim, "dims")}}));
  });
}

samba_status samba_tensor_reverse_dims(samba_tensor* t, samba_tensor** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    Tensor x = tensor_arg(t, "t");
    std::vector<int64_t> reversed(x.dim());
    std::iota(reversed.rbegin(), reversed.rend(), int64_t{0});
    *out = to_handle(one_input_op("permute", x, {{"dims", reversed}}));
  });
}

samba_status samba_tensor_t(samba_tensor* t, samba_tensor** out) {
  return samba_tensor_reverse_dims(t, out);
}

samba_status samba_tensor_contiguous(samba_tensor* t, samba_tensor** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    Tensor x = tensor_arg(t, "t");
    *out = to_handle(x.is_contiguous() ? x : convert(x, x.dtype()));
  });
}

samba_status samba_tensor_clone(samba_tensor* t, samba_tensor** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    Tensor x = tensor_arg(t, "t");
    *out = to_handle(convert(x, x.dtype()));
  });
}

samba_status samba_tensor_detach(samba_tensor* t, samba_tensor** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    *out = to_handle(tensor_arg(t, "t").detach());
  });
}

samba_status samba_tensor_clear_data(samba_tensor* t) {
  return SAMBA_GUARDED({
    require(t, "t");
    impl(t)->storage = Ref<Storage>();
  });
}

}  // extern "C"
