// Tensor creation, metadata, data access and autograd.
#include <cstring>

#include "bindings/c/capi.h"
#include "engine/ops/autograd.h"

using namespace samba;
using namespace samba::capi;

namespace samba::capi {

Tensor external_tensor(DType dt, const Dims& dims, const int64_t* strides, void* data,
                       const std::function<Ref<Storage>(size_t)>& make_storage) {
  check_shape(dims);
  size_t nbytes = checked_nbytes(dims, dt);
  const size_t ndim = dims.size();
  Dims st = strides ? Dims(strides, strides + ndim) : contiguous_strides(dims);
  if (strides) {
    // Span of elements the view touches, checked for overflow.
    int64_t extent = numel_of(dims) == 0 ? 0 : 1;
    for (size_t i = 0; i < ndim; ++i) {
      SAMBA_CHECK(st[i] >= 0, Status::InvalidArgument,
                  "stride {} of dim {} is negative (strides {})", st[i], i, dims_str(st));
      if (extent && dims[i] > 1 && st[i] > (INT64_MAX - extent) / (dims[i] - 1))
        fail(Status::OutOfRange, "strides {} with shape {} address beyond 64 bits", dims_str(st),
             dims_str(dims));
      if (extent) extent += (dims[i] - 1) * st[i];
    }
    const size_t es = element_size(dt);
    SAMBA_CHECK(static_cast<uint64_t>(extent) <= (uint64_t{1} << 62) / es, Status::OutOfRange,
                "strides {} with shape {} span more bytes than fit in 62 bits", dims_str(st),
                dims_str(dims));
    nbytes = static_cast<size_t>(extent) * es;
  }
  if (nbytes) require(data, "data");
  Tensor t = Tensor::view_of(Ref<Storage>(), dt, dims, std::move(st), 0);
  t.impl()->storage = make_storage(nbytes);
  return t;
}

}  // namespace samba::capi

extern "C" {

samba_status samba_tensor_retain(samba_tensor* t) {
  return SAMBA_GUARDED({
    require(t, "t");
    impl(t)->retain();
  });
}

void samba_tensor_release(samba_tensor* t) {
  if (t) impl(t)->release();
}

samba_status samba_tensor_create(samba_dtype dtype, const int64_t* shape, size_t ndim,
                                 samba_tensor** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    DType dt = checked_dtype(dtype, "dtype");
    *out = to_handle(Tensor::zeros(checked_dims(shape, ndim, "shape"), dt));
  });
}

samba_status samba_tensor_wrap(void* data, samba_dtype dtype, const int64_t* shape, size_t ndim,
                               const int64_t* strides, samba_tensor** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    DType dt = checked_dtype(dtype, "dtype");
    Dims dims = checked_dims(shape, ndim, "shape");
    *out = to_handle(external_tensor(dt, dims, strides, data,
                                     [data](size_t n) { return Storage::borrow(data, n); }));
  });
}

samba_status samba_tensor_adopt(void* data, samba_dtype dtype, const int64_t* shape, size_t ndim,
                                const int64_t* strides, samba_deleter deleter, void* user_data,
                                samba_tensor** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    DType dt = checked_dtype(dtype, "dtype");
    Dims dims = checked_dims(shape, ndim, "shape");
    *out = to_handle(external_tensor(dt, dims, strides, data, [=](size_t n) {
      return Storage::adopt(data, n, [=] {
        if (deleter) deleter(data, user_data);
      });
    }));
  });
}

samba_status samba_scalar_float(double value, samba_tensor** out) {
  return SAMBA_GUARDED({
    // out is checked first: the handle must not be made when it has nowhere to go.
    out_param(out, "out");
    *out = to_handle(Tensor::scalar(value, DType::Float64, true));
  });
}

samba_status samba_scalar_int(int64_t value, samba_tensor** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    Tensor t = Tensor::empty({}, DType::Int64);
    *t.data<int64_t>() = value;
    t.impl()->wrapped_scalar = true;
    *out = to_handle(t);
  });
}

samba_status samba_tensor_ndim(const samba_tensor* t, size_t* out) {
  return SAMBA_GUARDED({
    require(t, "t");
    require(out, "out");
    *out = impl(t)->shape.size();
  });
}

samba_status samba_tensor_shape(const samba_tensor* t, const int64_t** dims, size_t* ndim) {
  return SAMBA_GUARDED({
    out_param(dims, "dims");
    require(ndim, "ndim");
    require(t, "t");
    *dims = impl(t)->shape.data();
    *ndim = impl(t)->shape.size();
  });
}

samba_status samba_tensor_strides(const samba_tensor* t, const int64_t** strides, size_t* ndim) {
  return SAMBA_GUARDED({
    out_param(strides, "strides");
    require(ndim, "ndim");
    require(t, "t");
    *strides = impl(t)->strides.data();
    *ndim = impl(t)->strides.size();
  });
}

samba_status samba_tensor_dtype(const samba_tensor* t, samba_dtype* out) {
  return SAMBA_GUARDED({
    require(t, "t");
    require(out, "out");
    *out = static_cast<samba_dtype>(impl(t)->dtype);
  });
}

samba_status samba_tensor_numel(const samba_tensor* t, int64_t* out) {
  return SAMBA_GUARDED({
    require(t, "t");
    require(out, "out");
    *out = numel_of(impl(t)->shape);
  });
}

samba_status samba_tensor_element_size(const samba_tensor* t, size_t* out) {
  return SAMBA_GUARDED({
    require(t, "t");
    require(out, "out");
    *out = element_size(impl(t)->dtype);
  });
}

samba_status samba_tensor_is_contiguous(const samba_tensor* t, int32_t* out) {
  return SAMBA_GUARDED({
    require(t, "t");
    require(out, "out");
    *out = tensor(t).is_contiguous() ? 1 : 0;
  });
}

samba_status samba_tensor_data(const samba_tensor* t, void** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    require(t, "t");
    *out = tensor(t).raw_data();
  });
}

samba_status samba_tensor_copy_from(samba_tensor* t, const void* src, size_t nbytes) {
  return SAMBA_GUARDED({
    require(t, "t");
    Tensor dst = tensor(t);
    SAMBA_CHECK(nbytes == dst.nbytes(), Status::InvalidArgument,
                "nbytes = {} but the tensor of shape {} and dtype {} holds {} bytes", nbytes,
                dims_str(dst.shape()), dtype_name(dst.dtype()), dst.nbytes());
    if (nbytes) require(src, "src");
    dst.raw_data();  // fails before anything is written when there is no data
    Tensor s = Tensor::view_of(Storage::borrow(const_cast<void*>(src), nbytes), dst.dtype(),
                               dst.shape(), contiguous_strides(dst.shape()), 0);
    dst.copy_from(s);
  });
}

samba_status samba_tensor_copy_to(const samba_tensor* t, void* dst, size_t nbytes) {
  return SAMBA_GUARDED({
    require(t, "t");
    Tensor src = tensor(t);
    SAMBA_CHECK(nbytes == src.nbytes(), Status::InvalidArgument,
                "nbytes = {} but the tensor of shape {} and dtype {} holds {} bytes", nbytes,
                dims_str(src.shape()), dtype_name(src.dtype()), src.nbytes());
    if (nbytes) require(dst, "dst");
    src.raw_data();
    Tensor d = Tensor::view_of(Storage::borrow(dst, nbytes), src.dtype(), src.shape(),
                               contiguous_strides(src.shape()), 0);
    d.copy_from(src);
  });
}

samba_status samba_tensor_item(const samba_tensor* t, double* out) {
  return SAMBA_GUARDED({
    require(t, "t");
    require(out, "out");
    *out = tensor(t).item_double();
  });
}

samba_status samba_tensor_item_int(const samba_tensor* t, int64_t* out) {
  return SAMBA_GUARDED({
    require(t, "t");
    require(out, "out");
    *out = tensor(t).item_int();
  });
}

samba_status samba_tensor_name(const samba_tensor* t, const char** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    require(t, "t");
    *out = impl(t)->name.c_str();
  });
}

samba_status samba_tensor_set_name(samba_tensor* t, const char* name) {
  return SAMBA_GUARDED({
    require(t, "t");
    require(name, "name");
    impl(t)->name = name;
  });
}

samba_status samba_tensor_region_name(const samba_tensor* t, const char** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    require(t, "t");
    *out = impl(t)->region_name.empty() ? impl(t)->name.c_str() : impl(t)->region_name.c_str();
  });
}

samba_status samba_tensor_set_region_name(samba_tensor* t, const char* name) {
  return SAMBA_GUARDED({
    require(t, "t");
    require(name, "name");
    impl(t)->region_name = name;
  });
}

samba_status samba_tensor_set_parameter(samba_tensor* t, int32_t is_parameter) {
  return SAMBA_GUARDED({
    require(t, "t");
    impl(t)->is_parameter = is_parameter != 0;
  });
}

samba_status samba_tensor_is_parameter(const samba_tensor* t, int32_t* out) {
  return SAMBA_GUARDED({
    require(t, "t");
    require(out, "out");
    *out = impl(t)->is_parameter ? 1 : 0;
  });
}

samba_status samba_tensor_set_mem_type(samba_tensor* t, int32_t mem_type) {
  return SAMBA_GUARDED({
    require(t, "t");
    SAMBA_CHECK(mem_type >= SAMBA_MEM_AUTO && mem_type <= SAMBA_MEM_HOST, Status::InvalidArgument,
                "memory type {} is unknown; expected SAMBA_MEM_AUTO (-1), _DDR (0), _HBM (1) or _HOST (2)",
                mem_type);
    impl(t)->mem_type = static_cast<int8_t>(mem_type);
  });
}

samba_status samba_tensor_mem_type(const samba_tensor* t, int32_t* out) {
  return SAMBA_GUARDED({
    require(t, "t");
    require(out, "out");
    *out = impl(t)->mem_type;
  });
}

samba_status samba_tensor_requires_grad(const samba_tensor* t, int32_t* out) {
  return SAMBA_GUARDED({
    require(t, "t");
    require(out, "out");
    *out = impl(t)->requires_grad ? 1 : 0;
  });
}

samba_status samba_tensor_set_requires_grad(samba_tensor* t, int32_t requires_grad) {
  return SAMBA_GUARDED({
    require(t, "t");
    TensorImpl* ti = impl(t);
    if (requires_grad)
      SAMBA_CHECK(is_floating(ti->dtype), Status::DTypeMismatch,
                  "only floating-point tensors can require grad; this one is {}",
                  dtype_name(ti->dtype));
    SAMBA_CHECK(!ti->grad_fn || requires_grad, Status::InvalidState,
                "requires_grad can only be cleared on leaf tensors; this one was computed by op "
                "'{}' (detach it first)",
                ti->grad_fn->op ? ti->grad_fn->op->name : std::string("?"));
    ti->requires_grad = requires_grad != 0;
  });
}

samba_status samba_tensor_grad(const samba_tensor* t, samba_tensor** out) {
  return SAMBA_GUARDED({
    out_param(out, "out");
    require(t, "t");
    *out = reinterpret_cast<samba_tensor*>(impl(t)->grad.get());
  });
}

samba_status samba_tensor_set_grad(samba_tensor* t, samba_tensor* grad) {
  return SAMBA_GUARDED({
    require(t, "t");
    TensorImpl* ti = impl(t);
    if (grad) {
      SAMBA_CHECK(impl(grad)->shape == ti->shape, Status::ShapeMismatch,
                  "grad of shape {} does not match tensor of shape {}", dims_str(impl(grad)->shape),
                  dims_str(ti->shape));
      SAMBA_CHECK(impl(grad)->dtype == ti->dtype, Status::DTypeMismatch,
                  "grad of dtype {} does not match tensor of dtype {}",
                  dtype_name(impl(grad)->dtype), dtype_name(ti->dtype));
      SAMBA_CHECK(impl(grad) != ti, Status::InvalidArgument, "a tensor cannot be its own grad");
    }
    ti->grad = Ref<TensorImpl>(grad ? impl(grad) : nullptr);
  });
}

samba_status samba_tensor_backward(samba_tensor* t, samba_tensor* grad, int32_t retain_graph) {
  return SAMBA_GUARDED({
    require(t, "t");
    autograd::backward({tensor(t)}, {grad ? tensor(grad) : Tensor()}, retain_graph != 0);
  });
}

}  // extern "C"
