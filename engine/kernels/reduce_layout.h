// How a reduction sees its input: which dims are reduced, the shapes that
// result, and the input read as a 3-D [outer, reduce, inner] array so every
// reduction kernel handles exactly two cases: contiguous rows (inner == 1)
// and contiguous columns accumulated side by side (inner > 1).
#pragma once

#include <vector>

#include "engine/core/attrs.h"
#include "engine/core/tensor.h"

namespace samba::ops {

struct ReduceDims {
  std::vector<bool> mask;  // per input dim: reduced or not
  Dims out_shape;          // the result's shape (reduced dims dropped unless keepdim)
  Dims kept_shape;         // reduced dims as size 1, whatever keepdim says
  int64_t count = 1;       // input elements reduced into each result element
};

// From an explicit list of dims (`all` ignores `dims` and reduces every dim).
// Repeated dims are an InvalidArgument, dims out of range an OutOfRange error.
ReduceDims reduce_dims(const Dims& shape, const std::vector<int64_t>& dims, bool all, bool keepdim,
                       const char* op);
// From the attributes "dim" (optional ints; absent or [] reduces all) and "keepdim".
ReduceDims reduce_dims(const Dims& shape, const Attrs& a, const char* op);
// One optional int attribute "dim" (absent: all dims, as for argmax) and "keepdim".
ReduceDims reduce_one_dim(const Dims& shape, const Attrs& a, const char* op);

// The input as a 3-D array: element (a, r, b) is at
// base + a * outer_stride + r * reduce_stride + b, and feeds result element
// a * inner + b. When inner > 1 the inner stride is 1. When inner == 1 the
// reduced elements of a result are `segments` runs of reduce / segments
// contiguous elements, segment_stride apart (one run unless the reduced
// dims sit on both sides of the kept ones, as when reducing N, H, W of
// NCHW). Layouts the input's strides cannot express this way are made so by
// one permuted copy (kept dims first, reduced dims last).
struct ReduceLayout {
  Tensor source;  // the tensor read: the input itself or its permuted copy
  int64_t outer = 1, reduce = 1, inner = 1;
  int64_t outer_stride = 0, reduce_stride = 1;
  int64_t segments = 1, segment_stride = 0;

  template <typename T>
  const T* base() const {
    return source.data<T>();
  }
  int64_t results() const { return outer * inner; }
  int64_t segment_length() const { return segments == 1 ? reduce : reduce / segments; }
};

// `segmented`: whether the caller handles segments > 1 (else they are copied away).
ReduceLayout reduce_layout(const Tensor& x, const std::vector<bool>& mask, bool segmented = true);

// A contiguous tensor's storage seen with another shape of the same size
// (the reduced shape with and without keepdim, for instance).
Tensor reshaped(const Tensor& t, const Dims& shape);

}  // namespace samba::ops
