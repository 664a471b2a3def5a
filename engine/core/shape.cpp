#include "engine/core/shape.h"

#include "engine/core/error.h"

namespace samba {

std::string dims_str(const Dims& d) { return fmt::format("[{}]", fmt::join(d, ", ")); }

int64_t checked_numel(const Dims& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    SAMBA_CHECK(d >= 0, Status::InvalidArgument, "shape {} has a negative dimension", dims_str(shape));
    if (d != 0 && n > INT64_MAX / d)
      fail(Status::OutOfRange, "shape {} has more elements than fit in 64 bits", dims_str(shape));
    n *= d;
  }
  return n;
}

size_t checked_nbytes(const Dims& shape, DType dtype) {
  int64_t n = checked_numel(shape);
  size_t es = element_size(dtype);
  if (static_cast<uint64_t>(n) > SIZE_MAX / es || static_cast<uint64_t>(n) * es > (uint64_t{1} << 62))
    fail(Status::OutOfRange, "shape {} of {} needs {} elements of {} bytes: the byte count overflows",
         dims_str(shape), dtype_name(dtype), n, es);
  return static_cast<size_t>(n) * es;
}

void check_shape(const Dims& shape) {
  SAMBA_CHECK(shape.size() <= kMaxRank, Status::InvalidArgument,
              "shape {} has rank {}; at most {} dimensions are supported", dims_str(shape),
              shape.size(), kMaxRank);
  checked_numel(shape);
}

Dims contiguous_strides(const Dims& shape) {
  Dims s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    // A shape with a zero dim has numel 0 whatever its other dims, so their
    // product (the strides) is bounded here, not by checked_numel.
    SAMBA_CHECK(!__builtin_mul_overflow(acc, shape[i] > 0 ? shape[i] : 1, &acc), Status::OutOfRange,
                "shape {}: the strides of its contiguous layout exceed int64", dims_str(shape));
  }
  return s;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* what) {
  int64_t lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;
  SAMBA_CHECK(dim >= lo && dim <= hi, Status::OutOfRange,
              "{}: dim {} is out of range for a tensor of rank {} (expected {} to {})", what, dim,
              ndim, lo, hi);
  return dim < 0 ? dim + (ndim == 0 ? 1 : ndim) : dim;
}

Dims broadcast_shapes(const Dims& a, const Dims& b, const char* what) {
  size_t n = std::max(a.size(), b.size());
  Dims out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    SAMBA_CHECK(da == db || da == 1 || db == 1, Status::ShapeMismatch,
                "{}: shapes {} and {} do not broadcast (dimension {}: {} vs {})", what,
                dims_str(a), dims_str(b), i, da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Dims broadcast_strides(const Dims& shape, const Dims& strides, const Dims& target) {
  Dims out(target.size(), 0);
  size_t off = target.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i)
    out[off + i] = (shape[i] == 1 && target[off + i] != 1) ? 0 : strides[i];
  return out;
}

}  // namespace samba
