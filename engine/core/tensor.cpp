#include "engine/core/tensor.h"

#include <cstring>
#include <mutex>

#include "engine/core/dispatch.h"
#include "engine/core/parallel.h"
#include "engine/core/strided.h"

namespace samba {

Tensor Tensor::empty(const Dims& shape, DType dtype, bool zero) {
  check_shape(shape);
  size_t nbytes = checked_nbytes(shape, dtype);
  auto impl = make_ref<TensorImpl>();
  impl->dtype = dtype;
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->storage = Storage::allocate(nbytes, zero);
  return Tensor(std::move(impl));
}

Tensor Tensor::symbolic(const Dims& shape, DType dtype) {
  check_shape(shape);
  checked_nbytes(shape, dtype);
  auto impl = make_ref<TensorImpl>();
  impl->dtype = dtype;
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->symbolic = true;
  return Tensor(std::move(impl));
}

Tensor Tensor::view_of(Ref<Storage> storage, DType dtype, Dims shape, Dims strides, int64_t offset) {
  auto impl = make_ref<TensorImpl>();
  impl->dtype = dtype;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->storage = std::move(storage);
  return Tensor(std::move(impl));
}

Tensor Tensor::scalar(double v, DType dtype, bool wrapped) {
  Tensor t = empty({}, dtype);
  SAMBA_DISPATCH_ALL(dtype, "scalar", [&] { *t.data<scalar_t>() = convert_value<scalar_t>(v); });
  t.impl()->wrapped_scalar = wrapped;
  return t;
}

int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim(d, dim(), "size")]; }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = shape().size(); i-- > 0;) {
    if (shape()[i] == 1) continue;
    if (strides()[i] != expected) return false;
    expected *= shape()[i];
  }
  return true;
}

void Tensor::materialize() const {
  SAMBA_CHECK(defined(), Status::NullPointer, "materialize_: the tensor is undefined");
  if (!is_lazy()) return;
  // One lock for all tensors: materialization is rare and parallel inside.
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (!is_lazy()) return;
  const std::shared_ptr<const Initializer> init = impl_->init;
  init->materialize(*impl_);
  SAMBA_CHECK(impl_->storage && impl_->storage->nbytes() >= nbytes(), Status::Internal,
              "materialize_: the initializer of '{}' left it without {} bytes of data", name(), nbytes());
}

void* Tensor::raw_data() const {
  SAMBA_CHECK(defined(), Status::NullPointer, "tensor is undefined");
  if (!has_data() && is_lazy()) materialize();
  SAMBA_CHECK(has_data(), Status::InvalidState,
              "tensor '{}' of shape {} has no data ({})", name(), dims_str(shape()),
              is_symbolic() ? "it is symbolic: it only exists while tracing" : "its data was cleared");
  return static_cast<char*>(impl_->storage->data()) + offset() * static_cast<int64_t>(element_size(dtype()));
}

double Tensor::item_double() const {
  SAMBA_CHECK(numel() == 1, Status::InvalidArgument,
              "item(): tensor of shape {} has {} elements; expected exactly one", dims_str(shape()), numel());
  return SAMBA_DISPATCH_ALL(dtype(), "item", [&] { return convert_value<double>(*data<scalar_t>()); });
}

int64_t Tensor::item_int() const {
  SAMBA_CHECK(numel() == 1, Status::InvalidArgument,
              "item(): tensor of shape {} has {} elements; expected exactly one", dims_str(shape()), numel());
  return SAMBA_DISPATCH_ALL(dtype(), "item", [&] { return convert_value<int64_t>(*data<scalar_t>()); });
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return to(dtype());
}

Tensor Tensor::to(DType target) const {
  Tensor out = empty(shape(), target);
  out.copy_from(*this);
  return out;
}

Tensor Tensor::detach() const {
  // A view of a placeholder would never see its data: materialize first.
  if (defined() && is_lazy()) materialize();
  auto impl = make_ref<TensorImpl>();
  impl->dtype = impl_->dtype;
  impl->shape = impl_->shape;
  impl->strides = impl_->strides;
  impl->offset = impl_->offset;
  impl->storage = impl_->storage;
  impl->symbolic = impl_->symbolic;
  impl->wrapped_scalar = impl_->wrapped_scalar;
  return Tensor(std::move(impl));
}

Tensor Tensor::as_strided(Dims shape, Dims strides, int64_t offset) const {
  Tensor t = detach();
  t.impl()->shape = std::move(shape);
  t.impl()->strides = std::move(strides);
  t.impl()->offset = offset;
  t.impl()->wrapped_scalar = false;
  return t;
}

namespace {

template <typename To, typename From>
void convert_run(char* dst, int64_t ds, const char* src, int64_t ss, int64_t n) {
  if (ds == 1 && ss == 1) {
    auto* d = reinterpret_cast<To*>(dst);
    auto* s = reinterpret_cast<const From*>(src);
    for (int64_t i = 0; i < n; ++i) d[i] = convert_value<To>(s[i]);
  } else {
    for (int64_t i = 0; i < n; ++i)
      reinterpret_cast<To*>(dst)[i * ds] = convert_value<To>(reinterpret_cast<const From*>(src)[i * ss]);
  }
}

}  // namespace

void Tensor::copy_from(const Tensor& src) const {
  SAMBA_CHECK(src.defined() && defined(), Status::NullPointer, "copy: tensor is undefined");
  // Equal shapes need no broadcast shape: a copy between them allocates
  // nothing, which a run returning its outputs and a checkpoint load filling
  // its targets rely on to fail before they change anything.
  if (src.shape() != shape()) {
    Dims bshape = broadcast_shapes(shape(), src.shape(), "copy");
    SAMBA_CHECK(bshape == shape(), Status::ShapeMismatch,
                "copy: source of shape {} cannot be broadcast to destination shape {}",
                dims_str(src.shape()), dims_str(shape()));
  }
  const int64_t n = numel();
  if (n == 0) return;
  char* dst = static_cast<char*>(raw_data());
  const char* sp = static_cast<const char*>(src.raw_data());
  if (dtype() == src.dtype() && is_contiguous() && src.is_contiguous() && src.shape() == shape()) {
    const size_t es = element_size(dtype());
    const size_t bytes = static_cast<size_t>(n) * es;
    if (dst == sp) return;
    // As torch's copy_, a source and destination that share only part of
    // their bytes are refused: no order of copying gives both tensors'
    // values (a PEF whose tensors overlap so reaches here).
    SAMBA_CHECK(dst + bytes <= sp || sp + bytes <= dst, Status::InvalidArgument,
                "copy: the source and destination overlap in part ({} bytes at distance {}); "
                "expected the same memory or none in common",
                bytes, sp > dst ? sp - dst : dst - sp);
    parallel_for(n, kMinGrain * 4, [&](int64_t b, int64_t e) {
      std::memcpy(dst + b * es, sp + b * es, static_cast<size_t>(e - b) * es);
    });
    return;
  }
  StridedPlan plan({shape(), {strides(), broadcast_strides(src.shape(), src.strides(), shape())}});
  SAMBA_DISPATCH_ALL(dtype(), "copy", [&] {
    using To = scalar_t;
    SAMBA_DISPATCH_ALL(src.dtype(), "copy", [&] {
      using From = scalar_t;
      plan.run(n, {dst, const_cast<char*>(sp)}, {sizeof(To), sizeof(From)},
               [](char** p, const int64_t* s, int64_t len) {
                 convert_run<To, From>(p[0], s[0], p[1], s[1], len);
               });
    });
  });
}

}  // namespace samba
