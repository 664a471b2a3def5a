#include "engine/ops/gemm_dot_util.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define SAMBA_DOT_SGEMM 1
#endif

namespace samba::ops::detail {

#ifndef SAMBA_DOT_SGEMM

bool prefer_dot_sgemm(const GemmArgs<float>&, int64_t) { return false; }
void dot_sgemm_tile(const GemmArgs<float>&, const float*, const float*, float*, int64_t, int64_t, int64_t,
                    int64_t) {}

#else

namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// out[i][j] = dot(a_i, b_j) for R rows of A and 4 rows of B, k elements.
template <int R>
void block(const float* const* a, const float* const* b, int64_t k, float out[R][4]) {
  __m256 acc[R][4];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) {
    const __m256 b0 = _mm256_loadu_ps(b[0] + p), b1 = _mm256_loadu_ps(b[1] + p);
    const __m256 b2 = _mm256_loadu_ps(b[2] + p), b3 = _mm256_loadu_ps(b[3] + p);
    for (int i = 0; i < R; ++i) {
      const __m256 av = _mm256_loadu_ps(a[i] + p);
      acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
      acc[i][2] = _mm256_fmadd_ps(av, b2, acc[i][2]);
      acc[i][3] = _mm256_fmadd_ps(av, b3, acc[i][3]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < 4; ++j) {
      float s = hsum(acc[i][j]);
      for (int64_t q = p; q < k; ++q) s += a[i][q] * b[j][q];
      out[i][j] = s;
    }
}

}  // namespace

bool prefer_dot_sgemm(const GemmArgs<float>& g, int64_t rows) {
  return rows <= kDotMaxRows && !g.a.trans && g.b.trans && g.k >= 16;
}

void dot_sgemm_tile(const GemmArgs<float>& g, const float* a, const float* b, float* c, int64_t r0,
                    int64_t rows, int64_t c0, int64_t cols) {
  const int64_t k = g.k;
  auto store = [&](int64_t i, int64_t j, float v) {
    float& dst = c[(r0 + i) * g.ldc + c0 + j];
    dst = g.beta == 0.0f ? g.alpha * v : g.alpha * v + g.beta * dst;
  };
  // op(B) column j is row (c0 + j) of the stored matrix: contiguous in k.
  auto brow = [&](int64_t j) { return b + (c0 + j) * g.b.ld; };
  auto arow = [&](int64_t i) { return a + (r0 + i) * g.a.ld; };
  int64_t j = 0;
  for (; j + 4 <= cols; j += 4) {
    const float* bp[4] = {brow(j), brow(j + 1), brow(j + 2), brow(j + 3)};
    int64_t i = 0;
    // Three rows of A against four of B: 12 accumulators, 7 loads per 12 FMAs.
    for (; i + 3 <= rows; i += 3) {
      const float* ap[3] = {arow(i), arow(i + 1), arow(i + 2)};
      float out[3][4];
      block<3>(ap, bp, k, out);
      for (int r = 0; r < 3; ++r)
        for (int q = 0; q < 4; ++q) store(i + r, j + q, out[r][q]);
    }
    for (; i < rows; ++i) {
      const float* ap[1] = {arow(i)};
      float out[1][4];
      block<1>(ap, bp, k, out);
      for (int q = 0; q < 4; ++q) store(i, j + q, out[0][q]);
    }
  }
  for (; j < cols; ++j) {
    const float* bj = brow(j);
    for (int64_t i = 0; i < rows; ++i) {
      const float* ai = arow(i);
      float s = 0;
      for (int64_t p = 0; p < k; ++p) s += ai[p] * bj[p];
      store(i, j, s);
    }
  }
}

#endif

}  // namespace samba::ops::detail
