// Helpers shared by the nn op families (softmax, normalizations, dropout,
// embedding): the dtype a kernel computes in, row statistics, and column sums
// that give the same bits for any thread count.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/core/dispatch.h"
#include "engine/core/error.h"
#include "engine/core/parallel.h"
#include "engine/core/scratch.h"
#include "engine/core/strided.h"
#include "engine/core/tensor.h"

namespace samba::ops::nn {

template <typename C>
using ArrayMap = Eigen::Map<Eigen::Array<C, Eigen::Dynamic, 1>>;
template <typename C>
using ConstArrayMap = Eigen::Map<const Eigen::Array<C, Eigen::Dynamic, 1>>;

// bf16/fp16 are computed in float32 (converted once per tensor): that is the
// fp32 accumulation the dtype rules ask for, and keeps one kernel per family.
inline DType compute_dtype(DType t) {
  return t == DType::Float64 ? DType::Float64 : DType::Float32;
}

// Calls f.template operator()<C>() with C = double or float for `cdt`.
template <typename F>
void with_compute_type(DType cdt, F&& f) {
  if (cdt == DType::Float64)
    f.template operator()<double>();
  else
    f.template operator()<float>();
}

// The output buffer a kernel writes in the compute dtype: the output itself
// when the dtypes agree, else a temporary that commit() converts back.
class ComputeOutput {
 public:
  ComputeOutput(const Tensor& out, DType cdt)
      : out_(out), buf_(out.dtype() == cdt ? out : Tensor::empty(out.shape(), cdt)) {}
  template <typename C>
  C* data() const {
    return buf_.data<C>();
  }
  void commit() const {
    if (buf_.impl() != out_.impl()) out_.copy_from(buf_);
  }

 private:
  Tensor out_;
  Tensor buf_;
};

// Input `t` as a contiguous tensor of dtype `cdt` (no copy when it already is).
inline Tensor compute_input(const Tensor& t, DType cdt) {
  if (!t.defined()) return t;
  return as_dtype(t, cdt).contiguous();
}

inline void require_floating(const Tensor& t, const char* op, const char* arg) {
  SAMBA_CHECK(is_floating(t.dtype()), Status::DTypeMismatch,
              "{}: {} must have a floating dtype, got {}", op, arg, dtype_name(t.dtype()));
}

// Checks an optional per-feature parameter (weight, bias, running stats).
inline void check_param(const Tensor& t, const Dims& want, const char* op, const char* arg) {
  if (!t.defined()) return;
  require_floating(t, op, arg);
  SAMBA_CHECK(t.shape() == want, Status::ShapeMismatch, "{}: {} has shape {}, expected {}", op, arg,
              dims_str(t.shape()), dims_str(want));
}

// Count, mean and sum of squared deviations of a set of values; merging two
// sets uses Chan's formula, which stays accurate when |mean| >> std.
struct Moments {
  double count = 0;
  double mean = 0;
  double m2 = 0;

  void merge(const Moments& o) {
    if (o.count == 0) return;
    if (count == 0) {
      *this = o;
      return;
    }
    const double n = count + o.count;
    const double delta = o.mean - mean;
    mean += delta * (o.count / n);
    m2 += o.m2 + delta * delta * (count * o.count / n);
    count = n;
  }
  double biased_var() const { return m2 / count; }
};

// Values summed per block: small enough to stay in L1, so the second sweep of
// a block (squared deviations) does not touch memory again.
inline constexpr int64_t kMomentBlock = 512;

// Partial sums kept while summing: independent additions pipeline, where one
// running sum waits on the latency of every add before it.
inline constexpr int kSumLanes = 32;

// The sum of term(v) over n contiguous values v, term mapping an Eigen array
// to an array expression of the same size.
template <typename C, typename Term>
C lane_sum(const C* x, int64_t n, Term term) {
  using Lanes = Eigen::Array<C, kSumLanes, 1>;
  Lanes acc = Lanes::Zero();
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) acc += term(Eigen::Map<const Lanes>(x + i));
  C s = acc.sum();
  if (i < n) s += term(ConstArrayMap<C>(x + i, n - i)).sum();
  return s;
}

// Moments of n contiguous values in one pass over memory.
template <typename C>
Moments row_moments(const C* x, int64_t n) {
  Moments m;
  for (int64_t b = 0; b < n; b += kMomentBlock) {
    const int64_t len = std::min(kMomentBlock, n - b);
    const C mean = lane_sum(x + b, len, [](const auto& v) { return v; }) / static_cast<C>(len);
    const C m2 = lane_sum(x + b, len, [mean](const auto& v) { return (v - mean).square(); });
    m.merge({static_cast<double>(len), static_cast<double>(mean), static_cast<double>(m2)});
  }
  return m;
}

// Rows per parallel task for a loop doing about `cost` cycles per element
// over rows of `len` elements.
inline int64_t rows_grain(int64_t len, int64_t cost = 1) {
  return std::max<int64_t>(1, kMinGrain / std::max<int64_t>(len * cost, 1));
}

// Sums per-row terms down the rows of a (rows x cols) layout into out[k][col]
// for k < nacc (double accumulators; out holds nacc * cols). add_row(r, c0,
// c1, acc) adds row r's terms of columns [c0, c1) to acc[k * cols + c]. Rows are cut into chunks
// fixed by the sizes alone and partial sums are added in chunk order, so the
// result does not depend on the number of threads.
template <typename F>
void column_sums(int64_t rows, int64_t cols, int nacc, F&& add_row, double* out) {
  std::fill_n(out, nacc * cols, 0.0);
  if (rows == 0 || cols == 0) return;
  // Column tiles keep a task's accumulators in cache; row chunks give
  // parallelism when there are few columns.
  constexpr int64_t kTile = 1024;
  constexpr int64_t kMaxChunks = 16;
  constexpr int64_t kPartialBudget = int64_t{1} << 22;  // doubles of partial sums
  const int64_t tiles = (cols + kTile - 1) / kTile;
  int64_t chunks = std::clamp<int64_t>(rows * cols / kMinGrain, 1, kMaxChunks);
  chunks =
      std::max<int64_t>(1, std::min(chunks, kPartialBudget / std::max<int64_t>(nacc * cols, 1)));
  chunks = std::min(chunks, rows);
  const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
  ScratchFrame frame;
  const int64_t partials = chunks == 1 ? 0 : chunks * nacc * cols;
  double* partial = frame.get<double>(0, static_cast<size_t>(partials));
  std::fill_n(partial, partials, 0.0);
  parallel_for(chunks * tiles, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t chunk = t / tiles, tile = t % tiles;
      const int64_t c0 = tile * kTile, c1 = std::min(cols, c0 + kTile);
      double* acc = chunks == 1 ? out : partial + chunk * nacc * cols;
      const int64_t r1 = std::min(rows, (chunk + 1) * rows_per_chunk);
      for (int64_t r = chunk * rows_per_chunk; r < r1; ++r) add_row(r, c0, c1, acc);
    }
  });
  if (chunks == 1) return;
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const double* p = partial + ch * nacc * cols;
    for (int64_t i = 0; i < nacc * cols; ++i) out[i] += p[i];
  }
}

// Splits `shape` around `dim` into (outer, len, inner) element counts.
inline void split_at_dim(const Dims& shape, int64_t dim, int64_t* outer, int64_t* len,
                         int64_t* inner) {
  *outer = 1, *len = 1, *inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < dim)
      *outer *= shape[d];
    else if (d == dim)
      *len = shape[d];
    else
      *inner *= shape[d];
  }
}

inline Tensor undefined_if_not(bool needed, Tensor t) { return needed ? std::move(t) : Tensor(); }

}  // namespace samba::ops::nn
