// StridedPlan: walks N operands that share a shape, each with its own element
// strides, as a sequence of 1-D runs along the innermost dimension. Dimensions
// that are contiguous for every operand are merged first, so a contiguous
// tensor is one long run. Runs are split across the thread pool.
#pragma once

#include <array>
#include <vector>

#include "engine/core/parallel.h"
#include "engine/core/shape.h"

namespace samba {

class StridedPlan {
 public:
  static constexpr int kMaxOperands = 8;

  struct Spec {
    Dims shape;
    std::vector<Dims> strides;  // one per operand, in elements, shape's rank
  };

  explicit StridedPlan(Spec spec);

  int64_t inner_size() const { return shape_.empty() ? 1 : shape_.back(); }
  int64_t outer_count() const;
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  // Merged shape and per-operand strides (elements).
  const Dims& shape() const { return shape_; }
  const Dims& strides(int op) const { return strides_[op]; }

  // body(char** ptrs, const int64_t* inner_strides_in_elements, int64_t len)
  // is called for each run with pointers to the run's first elements.
  // `base` are the operands' first-element pointers, `esize` their element sizes.
  // `numel` is only a hint for the parallel grain.
  template <typename F>
  void run(int64_t numel, std::initializer_list<char*> base, std::initializer_list<size_t> esize,
           F&& body, int64_t grain_elems = kMinGrain) const {
    const int nops = static_cast<int>(strides_.size());
    std::array<char*, kMaxOperands> b{};
    std::array<int64_t, kMaxOperands> es{};
    std::copy(base.begin(), base.end(), b.begin());
    std::copy(esize.begin(), esize.end(), es.begin());
    std::array<int64_t, kMaxOperands> inner{};
    for (int k = 0; k < nops; ++k) inner[k] = shape_.empty() ? 1 : strides_[k].back();
    const int64_t len = inner_size();
    const int64_t outer = outer_count();
    if (len == 0 || outer == 0) return;
    const int64_t rows_grain = std::max<int64_t>(1, grain_elems / std::max<int64_t>(len, 1));
    (void)numel;
    parallel_for(outer, rows_grain, [&](int64_t r0, int64_t r1) {
      std::array<char*, kMaxOperands> p{};
      for (int64_t r = r0; r < r1; ++r) {
        // Decompose the outer row index into coordinates of dims [0, rank-1).
        int64_t rem = r;
        for (int k = 0; k < nops; ++k) p[k] = b[k];
        for (int64_t d = rank() - 2; d >= 0; --d) {
          int64_t c = rem % shape_[d];
          rem /= shape_[d];
          for (int k = 0; k < nops; ++k) p[k] += c * strides_[k][d] * es[k];
        }
        body(p.data(), inner.data(), len);
      }
    });
  }

 private:
  Dims shape_;
  std::vector<Dims> strides_;
};

}  // namespace samba
