// Loops behind the index ops (index_select, index_put, gather, scatter, scatter_add):
// index checking, and walks over a tensor split at one dim that never let two
// threads write the same element.
#pragma once

#include <cstring>
#include <vector>

#include "engine/core/dispatch.h"
#include "engine/core/error.h"
#include "engine/core/parallel.h"
#include "engine/core/strided.h"
#include "engine/core/tensor.h"

namespace samba::ops::index_detail {

// The index tensor's values as int64, checked against `size`; negative values
// count from the end. Reads an int64 index in place when no value needs
// wrapping, so large indices are not copied.
class IndexValues {
 public:
  IndexValues(const Tensor& index, int64_t size, const char* what, int64_t dim) {
    held_ = as_dtype(index, DType::Int64).contiguous();
    n_ = held_.numel();
    if (n_ == 0) return;
    data_ = held_.data<int64_t>();
    bool negative = false;
    for (int64_t i = 0; i < n_; ++i) {
      const int64_t v = data_[i];
      SAMBA_CHECK(v >= -size && v < size, Status::OutOfRange,
                  "{}: index {} (element {} of the index) is out of range for dim {} of size {}",
                  what, v, i, dim, size);
      negative |= v < 0;
    }
    if (!negative) return;
    owned_.assign(data_, data_ + n_);
    for (auto& v : owned_) v = v < 0 ? v + size : v;
    data_ = owned_.data();
  }
  const int64_t* data() const { return data_; }
  int64_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t operator[](int64_t i) const { return data_[i]; }

 private:
  Tensor held_;
  std::vector<int64_t> owned_;
  const int64_t* data_ = nullptr;
  int64_t n_ = 0;
};

inline void check_index_dtype(const Tensor& index, const char* what) {
  SAMBA_CHECK(is_integral(index.dtype(), false), Status::DTypeMismatch,
              "{}: index must have an integer dtype, got {}", what, dtype_name(index.dtype()));
}

// Splits [0, outer * inner) into chunks and calls fn(o, i0, i1) for the runs of
// one outer row inside each chunk; fn loops over the indexed dim itself, so
// writes along that dim stay in one thread and keep their order.
template <typename F>
void for_outer_inner(int64_t outer, int64_t inner, int64_t cost_per_item, F&& fn) {
  const int64_t grain = std::max<int64_t>(1, kMinGrain / std::max<int64_t>(cost_per_item, 1));
  parallel_for(outer * inner, grain, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e;) {
      const int64_t o = p / inner, i0 = p % inner;
      const int64_t i1 = std::min(inner, i0 + (e - p));
      fn(o, i0, i1);
      p += i1 - i0;
    }
  });
}

// An unsigned integer as wide as an element: moves any dtype's bits.
template <size_t N>
struct Bits;
template <>
struct Bits<1> {
  using type = uint8_t;
};
template <>
struct Bits<2> {
  using type = uint16_t;
};
template <>
struct Bits<4> {
  using type = uint32_t;
};
template <>
struct Bits<8> {
  using type = uint64_t;
};

template <typename F>
void dispatch_by_size(DType dt, F&& f) {
  switch (element_size(dt)) {
    case 1:
      return f(typename Bits<1>::type{});
    case 2:
      return f(typename Bits<2>::type{});
    case 4:
      return f(typename Bits<4>::type{});
    case 8:
      return f(typename Bits<8>::type{});
  }
  fail(Status::Internal, "index ops: unexpected element size of {}", dtype_name(dt));
}

// The geometry of gather and scatter_add: the walk covers the index tensor;
// `data` is the tensor indexed along `dim` (gather's x, scatter's output) and
// `dense` the tensor at the index's own coordinates (gather's output,
// scatter's src). All three are contiguous, possibly of different shapes.
struct DimWalk {
  int64_t dim = 0, last = 0;
  int64_t k_size = 1, j_size = 1;           // index sizes along dim and along the last dim
  int64_t data_dim_stride = 0, data_j = 0;  // data strides along dim, along last (0 if last == dim)
  int64_t dense_k = 0, dense_j = 0, index_k = 0, index_j = 0;
  // The other dims: sizes and strides of each tensor.
  Dims group_sizes, group_data, group_dense, group_index;
  int64_t groups = 1;

  DimWalk(const Dims& index_shape, const Dims& data_shape, const Dims& dense_shape, int64_t d) {
    const int64_t rank = static_cast<int64_t>(index_shape.size());
    const Dims is = contiguous_strides(index_shape), ds = contiguous_strides(data_shape),
               ns = contiguous_strides(dense_shape);
    dim = d;
    last = rank - 1;
    if (last == dim) {
      k_size = 1;
      j_size = index_shape[dim];
      data_dim_stride = ds[dim];
      dense_j = ns[dim];
      index_j = is[dim];
    } else {
      k_size = index_shape[dim];
      j_size = index_shape[last];
      data_dim_stride = ds[dim];
      data_j = ds[last];
      dense_k = ns[dim];
      dense_j = ns[last];
      index_k = is[dim];
      index_j = is[last];
    }
    for (int64_t g = 0; g < rank; ++g) {
      if (g == dim || g == last) continue;
      group_sizes.push_back(index_shape[g]);
      group_data.push_back(ds[g]);
      group_dense.push_back(ns[g]);
      group_index.push_back(is[g]);
      groups *= index_shape[g];
    }
  }

  // fn(data_offset, dense_offset, index_offset) for each group in [b, e).
  template <typename F>
  void for_groups(int64_t b, int64_t e, F&& fn) const {
    for (int64_t g = b; g < e; ++g) {
      int64_t rem = g, od = 0, on = 0, oi = 0;
      for (size_t q = group_sizes.size(); q-- > 0;) {
        const int64_t c = rem % group_sizes[q];
        rem /= group_sizes[q];
        od += c * group_data[q];
        on += c * group_dense[q];
        oi += c * group_index[q];
      }
      fn(od, on, oi);
    }
  }

  int64_t grain() const {
    return std::max<int64_t>(1, kMinGrain / std::max<int64_t>(k_size * j_size, 1));
  }
};

// out[coords] = x[coords with dim replaced by index[coords]].
template <typename T>
void gather_loop(const DimWalk& w, const T* x, const int64_t* idx, T* out) {
  parallel_for(w.groups, w.grain(), [&](int64_t b, int64_t e) {
    w.for_groups(b, e, [&](int64_t od, int64_t on, int64_t oi) {
      for (int64_t k = 0; k < w.k_size; ++k) {
        const int64_t* ir = idx + oi + k * w.index_k;
        T* orow = out + on + k * w.dense_k;
        for (int64_t j = 0; j < w.j_size; ++j)
          orow[j * w.dense_j] = x[od + ir[j * w.index_j] * w.data_dim_stride + j * w.data_j];
      }
    });
  });
}

// combine(out[coords with dim replaced by index[coords]], src[coords]) for
// every coordinate of the index: scatter assigns (of indices repeated along
// dim the last one written wins), scatter_add adds. Groups differ in a
// coordinate other than dim, so their writes never meet, and each group
// writes in order.
template <typename T, typename F>
void scatter_loop(const DimWalk& w, const T* src, const int64_t* idx, T* out, F combine) {
  parallel_for(w.groups, w.grain(), [&](int64_t b, int64_t e) {
    w.for_groups(b, e, [&](int64_t od, int64_t on, int64_t oi) {
      for (int64_t k = 0; k < w.k_size; ++k) {
        const int64_t* ir = idx + oi + k * w.index_k;
        const T* srow = src + on + k * w.dense_k;
        for (int64_t j = 0; j < w.j_size; ++j)
          combine(out[od + ir[j * w.index_j] * w.data_dim_stride + j * w.data_j],
                  srow[j * w.dense_j]);
      }
    });
  });
}

}  // namespace samba::ops::index_detail
