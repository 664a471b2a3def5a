#include "engine/kernels/attention.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/core/parallel.h"
#include "engine/core/scratch.h"
#include "engine/kernels/gemm.h"

namespace samba::ops::attention {
namespace {

// Queries and keys per block: a block's q, k, v rows, scores and accumulator
// (64 x 64 each for 64 features) fit together in L2.
constexpr int64_t kQueryBlock = 64;
constexpr int64_t kKeyBlock = 64;

template <typename T>
constexpr T kMinusInf = -std::numeric_limits<T>::infinity();

// A run of n values as an Eigen array: its exp and sums are vectorized.
template <typename T>
Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> row(T* p, int64_t n) {
  return {p, n};
}

// c (m x n, rows ldc apart) = alpha * op(a) op(b) + beta * c.
template <typename T>
void product(int64_t m, int64_t n, int64_t k, GemmOperand<T> a, GemmOperand<T> b, T* c,
             int64_t ldc, T alpha, T beta) {
  GemmArgs<T> args;
  args.m = m, args.n = n, args.k = k;
  args.a = a, args.b = b;
  args.c = c, args.ldc = ldc;
  args.alpha = alpha, args.beta = beta;
  gemm(args);
}

// The keys the queries of [i0, i0 + rows) attend: [0, end).
int64_t attended_keys(const Geometry& g, int64_t i0, int64_t rows) {
  return g.causal ? std::min(g.keys, i0 + rows) : g.keys;
}

// s (rows x cols, rows kKeyBlock apart) = the masked, scaled scores of
// queries [i0, i0 + rows) of batch entry b against keys [j0, j0 + cols).
template <typename T>
void scores(const Geometry& g, const T* q, const T* k, const Mask<T>& mask, int64_t b, int64_t i0,
            int64_t rows, int64_t j0, int64_t cols, T* s) {
  product<T>(rows, cols, g.dim, {q + (b * g.rows + i0) * g.dim, g.dim, false},
             {k + (b * g.keys + j0) * g.dim, g.dim, true}, s, kKeyBlock, static_cast<T>(g.scale),
             T(0));
  const int64_t base = mask.batch_offset.empty() ? 0 : mask.batch_offset[b];
  for (int64_t r = 0; r < rows; ++r) {
    T* sr = s + r * kKeyBlock;
    const int64_t i = i0 + r;
    const int64_t row = base + i * mask.row_stride + j0 * mask.col_stride;
    if (mask.keep) {
      for (int64_t c = 0; c < cols; ++c)
        if (!mask.keep[row + c * mask.col_stride]) sr[c] = kMinusInf<T>;
    } else if (mask.bias) {
      for (int64_t c = 0; c < cols; ++c) sr[c] += mask.bias[row + c * mask.col_stride];
    }
    if (g.causal)
      for (int64_t c = std::max<int64_t>(0, i + 1 - j0); c < cols; ++c) sr[c] = kMinusInf<T>;
  }
}

}  // namespace

template <typename T>
void forward(const Geometry& g, const T* q, const T* k, const T* v, const Mask<T>& mask, T* out,
             T* lse) {
  if (g.keys == 0) {  // an empty sum of values, as softmax over no keys @ v gives
    std::fill(out, out + g.batch * g.rows * g.vdim, T(0));
    std::fill(lse, lse + g.batch * g.rows, kMinusInf<T>);
    return;
  }
  const int64_t blocks = (g.rows + kQueryBlock - 1) / kQueryBlock;
  parallel_for(g.batch * blocks, 1, [&](int64_t t0, int64_t t1) {
    ScratchFrame frame;
    const auto acc_size = static_cast<size_t>(kQueryBlock * g.vdim);
    T* s = frame.get<T>(0, kQueryBlock * kKeyBlock);
    T* acc = frame.get<T>(1, acc_size);
    T* row_max = frame.get<T>(2, kQueryBlock);
    T* row_sum = frame.get<T>(3, kQueryBlock);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / blocks, i0 = (t % blocks) * kQueryBlock;
      const int64_t rows = std::min(kQueryBlock, g.rows - i0);
      std::fill_n(acc, acc_size, T(0));
      std::fill_n(row_max, kQueryBlock, kMinusInf<T>);
      std::fill_n(row_sum, kQueryBlock, T(0));
      const int64_t end = attended_keys(g, i0, rows);
      for (int64_t j0 = 0; j0 < end; j0 += kKeyBlock) {
        const int64_t cols = std::min(kKeyBlock, end - j0);
        scores(g, q, k, mask, b, i0, rows, j0, cols, s);
        for (int64_t r = 0; r < rows; ++r) {
          auto sr = row(s + r * kKeyBlock, cols);
          const T new_max = std::max(row_max[r], sr.maxCoeff());
          if (new_max == kMinusInf<T>) {  // no key of this row attended so far
            sr.setZero();
            continue;
          }
          sr = (sr - new_max).exp();
          // Earlier blocks were weighted against the old maximum.
          const T correction = std::exp(row_max[r] - new_max);
          row_sum[r] = row_sum[r] * correction + sr.sum();
          row_max[r] = new_max;
          if (correction != T(1)) row(acc + r * g.vdim, g.vdim) *= correction;
        }
        product<T>(rows, g.vdim, cols, {s, kKeyBlock, false},
                   {v + (b * g.keys + j0) * g.vdim, g.vdim, false}, acc, g.vdim, T(1),
                   T(1));
      }
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = b * g.rows + i0 + r;
        const T inv = T(1) / row_sum[r];  // a row with nothing attended: 0 * inf = NaN
        for (int64_t e = 0; e < g.vdim; ++e) out[i * g.vdim + e] = acc[r * g.vdim + e] * inv;
        lse[i] = row_max[r] + std::log(row_sum[r]);
      }
    }
  });
}

template <typename T>
void backward(const Geometry& g, const T* q, const T* k, const T* v, const Mask<T>& mask,
              const T* out, const T* lse, const T* dout, const T* dlse, T* dq, T* dk, T* dv) {
  parallel_for(g.batch, 1, [&](int64_t b0, int64_t b1) {
    ScratchFrame frame;
    T* p = frame.get<T>(0, kQueryBlock * kKeyBlock);
    T* dp = frame.get<T>(1, kQueryBlock * kKeyBlock);
    T* delta = frame.get<T>(2, static_cast<size_t>(g.rows));
    for (int64_t b = b0; b < b1; ++b) {
      // delta_i = dout_i · out_i - dlse_i: the row term of the softmax gradient.
      for (int64_t i = 0; i < g.rows; ++i) {
        const int64_t row = (b * g.rows + i) * g.vdim;
        T d = 0;
        for (int64_t e = 0; e < g.vdim; ++e) d += dout[row + e] * out[row + e];
        delta[i] = d - (dlse ? dlse[b * g.rows + i] : T(0));
      }
      std::fill(dq + b * g.rows * g.dim, dq + (b + 1) * g.rows * g.dim, T(0));
      std::fill(dk + b * g.keys * g.dim, dk + (b + 1) * g.keys * g.dim, T(0));
      std::fill(dv + b * g.keys * g.vdim, dv + (b + 1) * g.keys * g.vdim, T(0));
      const T scale = static_cast<T>(g.scale);
      for (int64_t i0 = 0; i0 < g.rows; i0 += kQueryBlock) {
        const int64_t rows = std::min(kQueryBlock, g.rows - i0);
        const int64_t qi = (b * g.rows + i0);
        const int64_t end = attended_keys(g, i0, rows);
        for (int64_t j0 = 0; j0 < end; j0 += kKeyBlock) {
          const int64_t cols = std::min(kKeyBlock, end - j0), kj = b * g.keys + j0;
          scores(g, q, k, mask, b, i0, rows, j0, cols, p);
          for (int64_t r = 0; r < rows; ++r) {
            auto pr = row(p + r * kKeyBlock, cols);
            pr = (pr - lse[qi + r]).exp();
          }
          product<T>(cols, g.vdim, rows, {p, kKeyBlock, true},
                     {dout + qi * g.vdim, g.vdim, false}, dv + kj * g.vdim, g.vdim, T(1), T(1));
          product<T>(rows, cols, g.vdim, {dout + qi * g.vdim, g.vdim, false},
                     {v + kj * g.vdim, g.vdim, true}, dp, kKeyBlock, T(1), T(0));
          for (int64_t r = 0; r < rows; ++r) {
            auto dr = row(dp + r * kKeyBlock, cols);
            dr = row(p + r * kKeyBlock, cols) * (dr - delta[i0 + r]);
          }
          product<T>(rows, g.dim, cols, {dp, kKeyBlock, false},
                     {k + kj * g.dim, g.dim, false}, dq + qi * g.dim, g.dim, scale, T(1));
          product<T>(cols, g.dim, rows, {dp, kKeyBlock, true},
                     {q + qi * g.dim, g.dim, false}, dk + kj * g.dim, g.dim, scale, T(1));
        }
      }
    }
  });
}

#define SAMBA_ATTENTION_INSTANTIATE(T)                                                          \
  template void forward<T>(const Geometry&, const T*, const T*, const T*, const Mask<T>&, T*,   \
                           T*);                                                                 \
  template void backward<T>(const Geometry&, const T*, const T*, const T*, const Mask<T>&,      \
                            const T*, const T*, const T*, const T*, T*, T*, T*);
SAMBA_ATTENTION_INSTANTIATE(float)
SAMBA_ATTENTION_INSTANTIATE(double)
#undef SAMBA_ATTENTION_INSTANTIATE

}  // namespace samba::ops::attention
