#include "engine/kernels/max_pool_2x2.h"

#include <algorithm>
#include <cmath>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "engine/core/parallel.h"

namespace samba::ops {
namespace {

// The general kernel's rule, tap after tap in window order: a later element
// replaces the running maximum when it is larger or NaN. Applying it to the
// two columns of each row and then to the two rows gives the same element as
// the four taps in window order (ties keep the earlier one, NaN the later).
inline float pick(float earlier, float later) {
  return later > earlier || std::isnan(later) ? later : earlier;
}

#if defined(__AVX2__)
// All ones in the lanes where `later` replaces `earlier`.
inline __m256 pick_mask(__m256 earlier, __m256 later) {
  return _mm256_or_ps(_mm256_cmp_ps(later, earlier, _CMP_GT_OQ),
                      _mm256_cmp_ps(later, later, _CMP_UNORD_Q));
}
inline __m256 pick8(__m256 earlier, __m256 later) {
  return _mm256_blendv_ps(earlier, later, pick_mask(earlier, later));
}

inline __m256 evens(__m256 lo, __m256 hi) { return _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)); }
inline __m256 odds(__m256 lo, __m256 hi) { return _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)); }

// The maxima of the column pairs of 16 adjacent elements, in the order
// (0, 2, 4, 6 | 8, 10, 12, 14) within 128-bit halves interleaved; the caller
// fixes the order once after combining rows.
inline __m256 column_pairs(const float* row) {
  const __m256 lo = _mm256_loadu_ps(row), hi = _mm256_loadu_ps(row + 8);
  return pick8(evens(lo, hi), odds(lo, hi));
}

// Undoes the shuffles' interleaving of 64-bit pairs: (a0 a1 b0 b1 | a2 a3 b2 b3)
// becomes (a0 a1 a2 a3 b0 b1 b2 b3).
inline __m256 in_order(__m256 v) {
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v), _MM_SHUFFLE(3, 1, 2, 0)));
}

// The maxima of the column pairs of 8 adjacent elements, in lanes 0..3.
inline __m128 column_pairs4(const float* row) {
  const __m256 v = _mm256_loadu_ps(row);
  const __m256 r = pick8(evens(v, v), odds(v, v));
  // (r0 r1 r0 r1 | r2 r3 r2 r3): the low pair of each half.
  return _mm256_castps256_ps128(in_order(r));
}

// Routes the gradients g of 8 windows (interleaved as column_pairs leaves
// them) to the tap where the general kernel's tap-by-tap rule ends, given
// the taps a = (0,0), b = (0,1), c = (1,0), d = (1,1) of each window, and
// writes both window rows' gradients, zeros included, in column order (16
// columns each; the 4-window case passes the same 8 columns twice and keeps
// the low half).
inline void route8(__m256 a, __m256 b, __m256 c, __m256 d, __m256 g, __m256 out0[2],
                   __m256 out1[2]) {
  const __m256 tb = pick_mask(a, b);
  const __m256 ab = _mm256_blendv_ps(a, b, tb);
  const __m256 tc = pick_mask(ab, c);
  const __m256 td = pick_mask(_mm256_blendv_ps(ab, c, tc), d);
  // The last tap taken wins: d where taken, else c, else b, else a.
  const __m256 gd = _mm256_and_ps(td, g);
  const __m256 gc = _mm256_andnot_ps(td, _mm256_and_ps(tc, g));
  const __m256 gb = _mm256_andnot_ps(_mm256_or_ps(tc, td), _mm256_and_ps(tb, g));
  const __m256 ga = _mm256_andnot_ps(_mm256_or_ps(tb, _mm256_or_ps(tc, td)), g);
  out0[0] = _mm256_unpacklo_ps(ga, gb), out0[1] = _mm256_unpackhi_ps(ga, gb);
  out1[0] = _mm256_unpacklo_ps(gc, gd), out1[1] = _mm256_unpackhi_ps(gc, gd);
}

#endif

// One output row from input rows r0 and r1 (out_w windows).
void forward_row(const float* r0, const float* r1, float* out, int64_t out_w) {
  int64_t ow = 0;
#if defined(__AVX2__)
  for (; ow + 8 <= out_w; ow += 8)
    _mm256_storeu_ps(out + ow, in_order(pick8(column_pairs(r0 + 2 * ow), column_pairs(r1 + 2 * ow))));
  for (; ow + 4 <= out_w; ow += 4) {
    const __m128 a = column_pairs4(r0 + 2 * ow), b = column_pairs4(r1 + 2 * ow);
    const __m128 take = _mm_or_ps(_mm_cmpgt_ps(b, a), _mm_cmpunord_ps(b, b));
    _mm_storeu_ps(out + ow, _mm_blendv_ps(a, b, take));
  }
#endif
  for (; ow < out_w; ++ow)
    out[ow] = pick(pick(r0[2 * ow], r0[2 * ow + 1]), pick(r1[2 * ow], r1[2 * ow + 1]));
}

#if defined(__AVX2__)
// A plane 8 wide (output rows of 4): its rows are contiguous, so 16 floats
// are a window row pair and column_pairs takes both rows in one pass; two
// such passes give two output rows, which are contiguous too, in one store.
// The taps are taken in the same order as forward_row's (each row's pairs,
// then the upper row before the lower), so the picks are the same.
void forward_plane_8_wide(const float* xp, float* op, int64_t out_h) {
  int64_t oh = 0;
  for (; oh + 2 <= out_h; oh += 2) {
    const float* rows = xp + 2 * oh * 8;
    // (a0 a1 b0 b1 | a2 a3 b2 b3): a, b the pair maxima of rows 2oh, 2oh + 1;
    // (c0 c1 d0 d1 | c2 c3 d2 d3) for rows 2oh + 2, 2oh + 3.
    const __m256 h0 = column_pairs(rows), h1 = column_pairs(rows + 16);
    const __m256 upper = _mm256_shuffle_ps(h0, h1, _MM_SHUFFLE(1, 0, 1, 0));  // a, c
    const __m256 lower = _mm256_shuffle_ps(h0, h1, _MM_SHUFFLE(3, 2, 3, 2));  // b, d
    _mm256_storeu_ps(op + oh * 4, in_order(pick8(upper, lower)));
  }
  if (oh < out_h) forward_row(xp + 2 * oh * 8, xp + 2 * oh * 8 + 8, op + oh * 4, 4);
}
#endif

template <typename F>
void for_each_plane(const Pool2x2Shape& s, F&& fn) {
  const int64_t work = std::max<int64_t>(1, s.in_h * s.in_w);
  parallel_for(s.planes, std::max<int64_t>(1, kMinGrain / work), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) fn(p);
  });
}

// Plane p of the forward.
void forward_plane(const Pool2x2Shape& s, const float* x, float* out, int64_t p) {
  const float* xp = x + p * s.in_h * s.in_w;
  float* op = out + p * s.out_h * s.out_w;
#if defined(__AVX2__)
  if (s.in_w == 8 && s.out_w == 4) return forward_plane_8_wide(xp, op, s.out_h);
#endif
  for (int64_t oh = 0; oh < s.out_h; ++oh) {
    const float* r0 = xp + 2 * oh * s.in_w;
    forward_row(r0, r0 + s.in_w, op + oh * s.out_w, s.out_w);
  }
}

}  // namespace

void max_pool_2x2_forward(const Pool2x2Shape& s, const float* x, float* out) {
  for_each_plane(s, [&](int64_t p) { forward_plane(s, x, out, p); });
}

void max_pool_2x2_planes(const Pool2x2Shape& s, const float* x, float* out) {
  for (int64_t p = 0; p < s.planes; ++p) forward_plane(s, x, out, p);
}

void max_pool_2x2_backward(const Pool2x2Shape& s, const float* grad, const float* x, float* dx) {
  const int64_t in_plane = s.in_h * s.in_w, out_plane = s.out_h * s.out_w;
  const bool covered = s.in_h == 2 * s.out_h && s.in_w == 2 * s.out_w;
  for_each_plane(s, [&](int64_t p) {
    const float* xp = x + p * in_plane;
    const float* gp = grad + p * out_plane;
    float* dp = dx + p * in_plane;
    // A trailing row or column no window covers gets no gradient.
    if (!covered) std::fill_n(dp, in_plane, 0.0f);
    for (int64_t oh = 0; oh < s.out_h; ++oh) {
      const float* r0 = xp + 2 * oh * s.in_w;
      const float* r1 = r0 + s.in_w;
      float* d0 = dp + 2 * oh * s.in_w;
      float* d1 = d0 + s.in_w;
      const float* g = gp + oh * s.out_w;
      int64_t ow = 0;
#if defined(__AVX2__)
      __m256 o0[2], o1[2];
      for (; ow + 8 <= s.out_w; ow += 8) {
        const int64_t c = 2 * ow;
        const __m256 lo0 = _mm256_loadu_ps(r0 + c), hi0 = _mm256_loadu_ps(r0 + c + 8);
        const __m256 lo1 = _mm256_loadu_ps(r1 + c), hi1 = _mm256_loadu_ps(r1 + c + 8);
        route8(evens(lo0, hi0), odds(lo0, hi0), evens(lo1, hi1), odds(lo1, hi1),
               in_order(_mm256_loadu_ps(g + ow)), o0, o1);
        _mm256_storeu_ps(d0 + c, o0[0]), _mm256_storeu_ps(d0 + c + 8, o0[1]);
        _mm256_storeu_ps(d1 + c, o1[0]), _mm256_storeu_ps(d1 + c + 8, o1[1]);
      }
      for (; ow + 4 <= s.out_w; ow += 4) {
        const int64_t c = 2 * ow;
        const __m256 v0 = _mm256_loadu_ps(r0 + c), v1 = _mm256_loadu_ps(r1 + c);
        // Windows (0 1 | 2 3) in the low pair of each half, as unpacklo reads them.
        const __m256 g4 = _mm256_castpd_ps(_mm256_permute4x64_pd(
            _mm256_castps_pd(_mm256_castps128_ps256(_mm_loadu_ps(g + ow))), _MM_SHUFFLE(1, 1, 0, 0)));
        route8(evens(v0, v0), odds(v0, v0), evens(v1, v1), odds(v1, v1), g4, o0, o1);
        _mm256_storeu_ps(d0 + c, o0[0]), _mm256_storeu_ps(d1 + c, o1[0]);
      }
#endif
      for (; ow < s.out_w; ++ow) {
        const int64_t c = 2 * ow;
        // Taps in window order: (0,0), (0,1), (1,0), (1,1).
        int tap = 0;
        float best = r0[c];
        const float v[3] = {r0[c + 1], r1[c], r1[c + 1]};
        for (int t = 0; t < 3; ++t)
          if (v[t] > best || std::isnan(v[t])) best = v[t], tap = t + 1;
        d0[c] = tap == 0 ? g[ow] : 0.0f;
        d0[c + 1] = tap == 1 ? g[ow] : 0.0f;
        d1[c] = tap == 2 ? g[ow] : 0.0f;
        d1[c + 1] = tap == 3 ? g[ow] : 0.0f;
      }
    }
  });
}

}  // namespace samba::ops
