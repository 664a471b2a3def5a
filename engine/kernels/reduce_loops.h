// The loops reductions are built from. One generic kernel runs any
// associative accumulation over a ReduceLayout:
//   result[o] = store(o, step(...step(init, load(x0, o)), load(x1, o))...)
// Rows are accumulated in independent lanes and columns side by side, so the
// compiler vectorizes both without reassociating anything itself. Work is cut
// into pieces whose sizes depend only on the shape, never on the thread
// count, so results are identical however many threads run them.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "engine/core/dispatch.h"
#include "engine/core/scratch.h"
#include "engine/core/strided.h"
#include "engine/kernels/reduce_layout.h"

namespace samba::ops::reduce {

// What a sum of T accumulates in and returns: T itself for floating types
// (accumulating bf16/fp16 in float), int64 for integers and bool.
template <typename T>
using sum_acc_t = std::conditional_t<std::is_floating_point_v<acc_t<T>>, acc_t<T>, int64_t>;
template <typename T>
using sum_out_t = std::conditional_t<std::is_floating_point_v<acc_t<T>>, T, int64_t>;
inline DType natural_sum_dtype(DType t) { return is_integral(t, true) ? DType::Int64 : t; }

template <typename A>
bool is_nan(A v) {
  if constexpr (std::is_floating_point_v<A>) return std::isnan(v);
  return false;
}

// Where float kernels compute: double for double, float for every other floating type.
template <typename T>
using compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Runs fn.template operator()<A>(out_a) with A the compute type of `out`'s
// floating dtype (double for float64, float otherwise) and out_a `out`
// itself when it has that dtype, else a float32 tensor converted into `out`
// afterwards. Kernels written once for float and double serve all four
// floating dtypes this way.
template <typename F>
void with_compute_output(const Tensor& out, F&& fn) {
  if (out.dtype() == DType::Float64) return fn.template operator()<double>(out);
  if (out.dtype() == DType::Float32) return fn.template operator()<float>(out);
  SAMBA_CHECK(is_floating(out.dtype()), Status::Internal, "with_compute_output: dtype {}",
              dtype_name(out.dtype()));
  Tensor tmp = Tensor::empty(out.shape(), DType::Float32);
  fn.template operator()<float>(tmp);
  out.copy_from(tmp);
}

// Largest (smallest) of a and b, NaN if either is, as torch.max (min).
template <typename A>
inline A max_nan(A a, A b) {
  return (is_nan(a) || a > b) ? a : b;
}
template <typename A>
inline A min_nan(A a, A b) {
  return (is_nan(a) || a < b) ? a : b;
}

inline constexpr int kLanes = 32;           // independent accumulators along a row
inline constexpr int kShortRows = 8;        // short rows accumulated side by side
inline constexpr int64_t kRowChunk = 4096;  // elements a lane set covers before folding
inline constexpr int64_t kSplit = 1 << 16;  // elements per piece of a long row
inline constexpr int64_t kTile = 1024;      // columns accumulated side by side
inline constexpr int64_t kColBlock = 64;    // rows per column block before folding
inline constexpr int64_t kMaxPieces = 64;   // pieces a column reduction is split into at most
inline constexpr int64_t kFewResults = 16;  // below this many work units, split the reduce dim

// step over p[0..n) (unit stride) for result o.
template <typename T, typename Acc, typename Load, typename Step>
Acc accumulate_run(const T* p, int64_t n, int64_t o, Acc init, Load& load, Step& step) {
  if (n < 2 * kLanes) {
    Acc acc = init;
    for (int64_t i = 0; i < n; ++i) acc = step(acc, load(p[i], o));
    return acc;
  }
  Acc total = init;
  for (int64_t c = 0; c < n; c += kRowChunk) {
    const int64_t len = std::min(kRowChunk, n - c);
    const T* q = p + c;
    std::array<Acc, kLanes> lanes;
    lanes.fill(init);
    int64_t i = 0;
    for (; i + kLanes <= len; i += kLanes)
      for (int j = 0; j < kLanes; ++j) lanes[j] = step(lanes[j], load(q[i + j], o));
    Acc tail = init;
    for (; i < len; ++i) tail = step(tail, load(q[i], o));
    for (int w = kLanes / 2; w > 0; w /= 2)
      for (int j = 0; j < w; ++j) lanes[j] = step(lanes[j], lanes[j + w]);
    total = step(total, step(lanes[0], tail));
  }
  return total;
}

// Columns [0, w) of rows [r0, r1) (rows row_stride apart) folded into acc.
// Rows are summed in blocks, blocks in groups of blocks, so rounding errors
// grow with the number of groups rather than of rows.
template <typename T, typename Acc, typename Load, typename Step>
void accumulate_columns(const T* p, int64_t row_stride, int64_t r0, int64_t r1, int64_t w,
                        int64_t o, Acc init, Load& load, Step& step, Acc* acc) {
  constexpr int64_t kGroup = kColBlock * kColBlock;
  std::array<Acc, kTile> blk, grp;
  for (int64_t rg = r0; rg < r1; rg += kGroup) {
    const int64_t ge = std::min(r1, rg + kGroup);
    std::fill(grp.begin(), grp.begin() + w, init);
    for (int64_t rb = rg; rb < ge; rb += kColBlock) {
      const int64_t re = std::min(ge, rb + kColBlock);
      std::fill(blk.begin(), blk.begin() + w, init);
      for (int64_t r = rb; r < re; ++r) {
        const T* row = p + r * row_stride;
        for (int64_t b = 0; b < w; ++b) blk[b] = step(blk[b], load(row[b], o + b));
      }
      for (int64_t b = 0; b < w; ++b) grp[b] = step(grp[b], blk[b]);
    }
    for (int64_t b = 0; b < w; ++b) acc[b] = step(acc[b], grp[b]);
  }
}

// Folds v[0], v[stride], ..., v[(n - 1) * stride] pairwise (n >= 1), so
// rounding errors grow with log(n) rather than n.
template <typename Acc, typename Step>
Acc tree_fold(Acc* v, int64_t n, int64_t stride, Step& step) {
  for (int64_t w = 1; w < n; w *= 2)
    for (int64_t i = 0; i + w < n; i += 2 * w)
      v[i * stride] = step(v[i * stride], v[(i + w) * stride]);
  return v[0];
}

// Rows (inner == 1): each result reduces `segments` runs of unit-stride
// elements; runs longer than kSplit are cut into pieces. Piece results are
// folded pairwise, and pieces run in parallel when results are few.
template <typename T, typename Acc, typename Load, typename Step, typename Store>
void run_rows(const ReduceLayout& l, Acc init, Load& load, Step& step, Store& store,
              int64_t grain) {
  const int64_t A = l.outer, len = l.segment_length();
  const T* base = l.base<T>();
  const int64_t chunks = std::max<int64_t>(1, (len + kSplit - 1) / kSplit);
  const int64_t pieces = l.segments * chunks;
  auto piece = [&](int64_t a, int64_t k) {
    const int64_t r0 = (k % chunks) * kSplit;
    const T* p = base + a * l.outer_stride + (k / chunks) * l.segment_stride + r0;
    return accumulate_run(p, std::min(kSplit, len - r0), a, init, load, step);
  };
  if (pieces == 1 && len < 2 * kLanes) {
    // Short rows: kShortRows of them side by side, so their sums do not wait on each other.
    parallel_for((A + kShortRows - 1) / kShortRows,
                 std::max<int64_t>(1, grain / (len * kShortRows + 1)), [&](int64_t b, int64_t e) {
                   for (int64_t g = b; g < e; ++g) {
                     const int64_t a0 = g * kShortRows, n = std::min<int64_t>(kShortRows, A - a0);
                     std::array<Acc, kShortRows> acc;
                     acc.fill(init);
                     const T* p = base + a0 * l.outer_stride;
                     for (int64_t r = 0; r < len; ++r)
                       for (int64_t j = 0; j < n; ++j)
                         acc[j] = step(acc[j], load(p[j * l.outer_stride + r], a0 + j));
                     for (int64_t j = 0; j < n; ++j) store(a0 + j, acc[j]);
                   }
                 });
    return;
  }
  if (A < kFewResults && pieces > 1 && l.reduce > kSplit) {
    ScratchFrame frame;
    Acc* part = frame.get<Acc>(0, static_cast<size_t>(A * pieces));
    parallel_for(A * pieces, std::max<int64_t>(1, grain / std::min(len, kSplit)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t u = b; u < e; ++u) part[u] = piece(u / pieces, u % pieces);
                 });
    for (int64_t a = 0; a < A; ++a) store(a, tree_fold(&part[a * pieces], pieces, 1, step));
    return;
  }
  if (l.segments > 1 && len < kSplit) {
    // Every result's segment k lies in one stretch of the input (the kept
    // dim between reduced ones: a bias gradient over N, H and W of NCHW), so
    // tasks take segments and sweep their stretches in memory order instead
    // of each result striding through the whole input; the pieces are the
    // same and are folded as below. (ConvNet training's bias gradient over
    // 256 x 32 x 8 x 8 took 316 us the other way.)
    ScratchFrame frame;
    Acc* part = frame.get<Acc>(0, static_cast<size_t>(A * pieces));
    parallel_for(pieces, std::max<int64_t>(1, grain / (A * len)), [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k)
        for (int64_t a = 0; a < A; ++a) part[a * pieces + k] = piece(a, k);
    });
    for (int64_t a = 0; a < A; ++a) store(a, tree_fold(&part[a * pieces], pieces, 1, step));
    return;
  }
  parallel_for(A, std::max<int64_t>(1, grain / l.reduce), [&](int64_t b, int64_t e) {
    ScratchFrame frame;
    Acc* part = frame.get<Acc>(0, static_cast<size_t>(pieces));
    for (int64_t a = b; a < e; ++a) {
      for (int64_t k = 0; k < pieces; ++k) part[k] = piece(a, k);
      store(a, tree_fold(part, pieces, 1, step));
    }
  });
}

// Columns (inner > 1): a work unit is one outer slice times one tile of up
// to kTile columns; with few units the rows are cut into pieces whose
// results are folded pairwise.
template <typename T, typename Acc, typename Load, typename Step, typename Store>
void run_columns(const ReduceLayout& l, Acc init, Load& load, Step& step, Store& store,
                 int64_t grain) {
  const int64_t R = l.reduce, B = l.inner;
  const T* base = l.base<T>();
  const int64_t tiles = (B + kTile - 1) / kTile;
  const int64_t units = l.outer * tiles;
  auto width = [&](int64_t u) { return std::min(kTile, B - (u % tiles) * kTile); };
  auto first_result = [&](int64_t u) { return (u / tiles) * B + (u % tiles) * kTile; };
  auto first_elem = [&](int64_t u) {
    return base + (u / tiles) * l.outer_stride + (u % tiles) * kTile;
  };
  int64_t piece_rows =
      std::max<int64_t>(kSplit / std::min(B, kTile), (R + kMaxPieces - 1) / kMaxPieces);
  piece_rows = (piece_rows + kColBlock - 1) / kColBlock * kColBlock;
  const int64_t pieces = (R + piece_rows - 1) / piece_rows;
  if (units < kFewResults && pieces > 1) {
    ScratchFrame frame;
    Acc* part = frame.get<Acc>(0, static_cast<size_t>(units * pieces * kTile));
    parallel_for(units * pieces, 1, [&](int64_t b, int64_t e) {
      for (int64_t v = b; v < e; ++v) {
        const int64_t u = v / pieces, r0 = (v % pieces) * piece_rows;
        Acc* dst = &part[v * kTile];
        std::fill(dst, dst + width(u), init);
        accumulate_columns(first_elem(u), l.reduce_stride, r0, std::min(R, r0 + piece_rows),
                           width(u), first_result(u), init, load, step, dst);
      }
    });
    for (int64_t u = 0; u < units; ++u) {
      Acc* parts = &part[u * pieces * kTile];
      for (int64_t c = 0; c < width(u); ++c)
        store(first_result(u) + c, tree_fold(parts + c, pieces, kTile, step));
    }
    return;
  }
  parallel_for(units, std::max<int64_t>(1, grain / (R * std::min(B, kTile))),
               [&](int64_t b, int64_t e) {
                 std::array<Acc, kTile> acc;
                 for (int64_t u = b; u < e; ++u) {
                   const int64_t w = width(u), o = first_result(u);
                   std::fill(acc.begin(), acc.begin() + w, init);
                   accumulate_columns(first_elem(u), l.reduce_stride, 0, R, w, o, init, load, step,
                                      acc.data());
                   for (int64_t c = 0; c < w; ++c) store(o + c, acc[c]);
                 }
               });
}

// Runs the reduction described at the top of this file over layout `l`
// whose source holds T. load(T, o) -> Acc, step(Acc, Acc) -> Acc,
// store(o, Acc). `cost` is the relative cost of one load+step (1 = an add).
template <typename T, typename Acc, typename Load, typename Step, typename Store>
void run(const ReduceLayout& l, Acc init, Load load, Step step, Store store, int64_t cost = 1) {
  if (l.results() == 0) return;
  if (l.reduce == 0) {
    for (int64_t o = 0; o < l.results(); ++o) store(o, init);
    return;
  }
  const int64_t grain = std::max<int64_t>(1, kMinGrain / std::max<int64_t>(cost, 1));
  if (l.inner == 1) return run_rows<T>(l, init, load, step, store, grain);
  run_columns<T>(l, init, load, step, store, grain);
}

// Sum of f(i) for i in [0, n), vectorizable lanes, fixed pieces.
template <typename Acc, typename F>
Acc sum_indexed(int64_t n, F f, int64_t cost = 1) {
  auto step = [](Acc a, Acc b) { return a + b; };
  auto piece = [&](int64_t i0, int64_t len) {
    std::array<Acc, kLanes> lanes;
    lanes.fill(Acc(0));
    int64_t i = 0;
    for (; i + kLanes <= len; i += kLanes)
      for (int j = 0; j < kLanes; ++j) lanes[j] += f(i0 + i + j);
    Acc tail = 0;
    for (; i < len; ++i) tail += f(i0 + i);
    for (int w = kLanes / 2; w > 0; w /= 2)
      for (int j = 0; j < w; ++j) lanes[j] = step(lanes[j], lanes[j + w]);
    return lanes[0] + tail;
  };
  const int64_t pieces = (n + kRowChunk - 1) / kRowChunk;
  ScratchFrame frame;
  Acc* part = frame.get<Acc>(0, static_cast<size_t>(pieces));
  parallel_for(pieces, std::max<int64_t>(1, kMinGrain / (kRowChunk * std::max<int64_t>(cost, 1))),
               [&](int64_t b, int64_t e) {
                 for (int64_t k = b; k < e; ++k)
                   part[k] = piece(k * kRowChunk, std::min(kRowChunk, n - k * kRowChunk));
               });
  if (pieces == 0) return Acc(0);
  return tree_fold(part, pieces, 1, step);
}

// out[i] = f(in_0[i], in_1[i], ...) over out's shape, each input (element
// type In, any strides) broadcast to it; out is contiguous with type O.
template <typename O, typename In, size_t K, typename F>
void broadcast_map(const Tensor& out, const std::array<Tensor, K>& in, F f) {
  static_assert(K + 1 <= StridedPlan::kMaxOperands);
  if (out.numel() == 0) return;
  StridedPlan::Spec spec{out.shape(), {contiguous_strides(out.shape())}};
  for (const Tensor& t : in)
    spec.strides.push_back(broadcast_strides(t.shape(), t.strides(), out.shape()));
  StridedPlan plan(std::move(spec));
  auto go = [&]<size_t... I>(std::index_sequence<I...>) {
    plan.run(out.numel(),
             {static_cast<char*>(out.raw_data()), static_cast<char*>(in[I].raw_data())...},
             {sizeof(O), ((void)I, sizeof(In))...}, [&](char** p, const int64_t* s, int64_t len) {
               O* o = reinterpret_cast<O*>(p[0]);
               if (s[0] == 1 && ((s[I + 1] == 1) && ...)) {
                 for (int64_t i = 0; i < len; ++i)
                   o[i] = f(reinterpret_cast<const In*>(p[I + 1])[i]...);
                 return;
               }
               for (int64_t i = 0; i < len; ++i)
                 o[i * s[0]] = f(reinterpret_cast<const In*>(p[I + 1])[i * s[I + 1]]...);
             });
  };
  go(std::make_index_sequence<K>{});
}

// Contiguous runs as Eigen arrays: Eigen vectorizes exp and friends, which
// a plain loop over std::exp never is.
template <typename A>
using ConstRun = Eigen::Map<const Eigen::Array<A, Eigen::Dynamic, 1>>;
template <typename A>
using Run = Eigen::Map<Eigen::Array<A, Eigen::Dynamic, 1>>;

// Sum of exp(x[i] - shift) over x[0, n), in chunks folded pairwise.
template <typename A>
A sum_exp(const A* x, int64_t n, A shift) {
  auto chunk = [&](int64_t c) {
    return (ConstRun<A>(x + c, std::min(kRowChunk, n - c)) - shift).exp().sum();
  };
  if (n <= kRowChunk) return n == 0 ? A(0) : chunk(0);
  std::vector<A> part;
  for (int64_t c = 0; c < n; c += kRowChunk) part.push_back(chunk(c));
  auto add = [](A a, A b) { return a + b; };
  return tree_fold(part.data(), static_cast<int64_t>(part.size()), 1, add);
}

// log(sum(exp(x[0, n)))) with the max subtracted first: -inf when every
// element is -inf (or n == 0), +inf when one is +inf, NaN when one is NaN.
template <typename A>
A logsumexp_run(const A* x, int64_t n) {
  if (n == 0) return -std::numeric_limits<A>::infinity();
  const A m = ConstRun<A>(x, n).template maxCoeff<Eigen::PropagateNaN>();
  if (m == -std::numeric_limits<A>::infinity() || m == std::numeric_limits<A>::infinity()) return m;
  return std::log(sum_exp(x, n, m)) + m;
}

}  // namespace samba::ops::reduce
