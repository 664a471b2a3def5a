// Shapes, strides and the arithmetic on them (broadcasting, dim wrapping,
// overflow-checked sizes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/dtype.h"

namespace samba {

using Dims = std::vector<int64_t>;

inline constexpr int kMaxRank = 16;

std::string dims_str(const Dims& d);  // "[2, 3]"

// Element count of a shape; throws InvalidArgument for negative dims and
// OutOfRange when the count or its byte size (with `dtype`) overflows.
int64_t checked_numel(const Dims& shape);
size_t checked_nbytes(const Dims& shape, DType dtype);
void check_shape(const Dims& shape);  // rank, non-negative, no overflow

inline int64_t numel_of(const Dims& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Dims contiguous_strides(const Dims& shape);

// Wraps a possibly negative dim into [0, ndim); `what` names the op in errors.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* what);

// NumPy broadcasting of two shapes; throws ShapeMismatch naming both.
Dims broadcast_shapes(const Dims& a, const Dims& b, const char* what);

// Strides that make `shape` read as broadcast to `target` (0 where expanded).
Dims broadcast_strides(const Dims& shape, const Dims& strides, const Dims& target);

}  // namespace samba
