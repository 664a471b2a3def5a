// Tensor = refcounted storage + a view (dtype, shape, strides, offset) +
// identity (sn_name, region name, flags). A symbolic tensor has a shape and a
// dtype but no storage; tracing produces them.
#pragma once

#include <memory>
#include <string>

#include "engine/core/dtype.h"
#include "engine/core/refcount.h"
#include "engine/core/shape.h"
#include "engine/core/storage.h"

namespace samba {

namespace autograd {
struct Node;
}

class Tensor;
class TensorImpl;

// What gives a tensor its initial values (SambaTensor's materializer). A
// lazily created parameter has one and no storage until first needed; the
// core only calls it, engine/rng implements it.
class Initializer {
 public:
  virtual ~Initializer() = default;
  // Allocates t's storage (contiguous) and fills it. Called with the
  // materialization lock held, at most once per lazy tensor.
  virtual void materialize(TensorImpl& t) const = 0;
};

class TensorImpl : public RefCounted {
 public:
  DType dtype = DType::Float32;
  Dims shape;
  Dims strides;         // in elements
  int64_t offset = 0;   // in elements, into storage
  Ref<Storage> storage; // null: symbolic (shape and dtype only) or cleared data

  // Identity.
  std::string name;         // sn_name; "" until named
  std::string region_name;  // "" means "same as name"
  bool requires_grad = false;
  bool is_parameter = false;
  bool fast_access = false;
  int8_t mem_type = -1;  // requested device memory (pef::MemType); -1: the compiler decides
  bool wrapped_scalar = false;  // a number promoted like a Python scalar
  bool symbolic = false;        // created by tracing: never has data

  // Autograd.
  Ref<TensorImpl> grad;
  std::shared_ptr<autograd::Node> grad_fn;
  int32_t output_nr = 0;

  // Where the initial values come from; with no storage the tensor is a
  // lazy placeholder, materialized on first use.
  std::shared_ptr<const Initializer> init;

  // Opaque per-tensor state owned by higher layers (session bookkeeping).
  std::shared_ptr<void> extension;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Ref<TensorImpl> impl) : impl_(std::move(impl)) {}

  // New contiguous host tensor; zero-filled when `zero` is set.
  static Tensor empty(const Dims& shape, DType dtype, bool zero = false);
  static Tensor zeros(const Dims& shape, DType dtype) { return empty(shape, dtype, true); }
  // A symbolic tensor: shape and dtype, no storage.
  static Tensor symbolic(const Dims& shape, DType dtype);
  // A view over existing storage.
  static Tensor view_of(Ref<Storage> storage, DType dtype, Dims shape, Dims strides, int64_t offset);
  // A 0-dim tensor holding a number; `wrapped` marks it as a scalar operand.
  static Tensor scalar(double v, DType dtype, bool wrapped = false);

  bool defined() const { return static_cast<bool>(impl_); }
  TensorImpl* impl() const { return impl_.get(); }
  const Ref<TensorImpl>& ref() const { return impl_; }

  DType dtype() const { return impl_->dtype; }
  const Dims& shape() const { return impl_->shape; }
  const Dims& strides() const { return impl_->strides; }
  int64_t dim() const { return static_cast<int64_t>(impl_->shape.size()); }
  int64_t size(int64_t d) const;  // wraps negative d
  int64_t numel() const { return numel_of(impl_->shape); }
  int64_t offset() const { return impl_->offset; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(dtype()); }
  bool is_contiguous() const;
  bool has_data() const { return static_cast<bool>(impl_->storage); }
  bool is_symbolic() const { return impl_->symbolic; }
  // A placeholder whose values come from its initializer on first use.
  bool is_lazy() const { return !impl_->storage && impl_->init && !impl_->symbolic; }
  // Gives a lazy tensor its data (materialize_()); does nothing otherwise.
  // Thread-safe: concurrent callers materialize once.
  void materialize() const;
  bool requires_grad() const { return impl_->requires_grad; }
  const std::string& name() const { return impl_->name; }
  const std::string& region_name() const {
    return impl_->region_name.empty() ? impl_->name : impl_->region_name;
  }
  Tensor grad() const { return Tensor(impl_->grad); }

  // Pointer to the first element (storage + offset); materializes a lazy
  // tensor first; throws when there is no data.
  void* raw_data() const;
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw_data());
  }

  // Value of a one-element tensor, converted to double / int64.
  double item_double() const;
  int64_t item_int() const;

  // A contiguous tensor with the same values (self when already contiguous).
  Tensor contiguous() const;
  // A new contiguous copy in `dtype` (a copy even when dtypes match).
  Tensor to(DType dtype) const;
  Tensor clone() const { return to(dtype()); }
  // Same storage and view, no autograd history.
  Tensor detach() const;
  // New view of the same storage with another shape/stride/offset (no copy).
  Tensor as_strided(Dims shape, Dims strides, int64_t offset) const;
  // Copies `src` (broadcast to this shape, converted to this dtype) into this tensor.
  void copy_from(const Tensor& src) const;

 private:
  Ref<TensorImpl> impl_;
};

// `t` converted to `dtype`, without a copy when it already has it.
inline Tensor as_dtype(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : t.to(dtype); }

}  // namespace samba
