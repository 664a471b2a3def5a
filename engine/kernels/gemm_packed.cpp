#include "engine/kernels/gemm_packed.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "engine/core/error.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define SAMBA_PACKED_SGEMM 1
#endif

namespace samba::ops::detail {

#ifndef SAMBA_PACKED_SGEMM

bool has_packed_sgemm() { return false; }
bool prefer_packed_sgemm(int64_t, int64_t, int64_t) { return false; }
void packed_sgemm_tile(const GemmArgs<float>&, const float*, const float*, float*, int64_t, int64_t,
                       int64_t, int64_t) {}

#else

namespace {

// Register block: 6 rows x 16 columns (two AVX registers) = 12 accumulators,
// leaving registers for two B vectors and one broadcast A value.
constexpr int64_t kMr = 6;
constexpr int64_t kNr = 16;
// Cache blocks: a kc x kNr panel of B (at most kKc deep: 20 KB) stays in L1
// while the kMc x kc block of A (180 KB) streams from L2; the kc x kNc block
// of B (2.5 MB) lives in L3. The depth is split into equal blocks so no block
// is a short remainder (each depth block costs a pass over C).
constexpr int64_t kKc = 320;
constexpr int64_t kMc = 144;
constexpr int64_t kNc = 2048;

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};

// Packing buffers, one pair per thread: tasks never nest inside a tile, so a
// thread uses them for one tile at a time.
float* scratch(int which, size_t floats) {
  thread_local std::unique_ptr<float[], FreeDeleter> buf[2];
  thread_local size_t size[2] = {0, 0};
  if (size[which] < floats) {
    buf[which].reset(
        static_cast<float*>(std::aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64)));
    SAMBA_CHECK(buf[which], Status::OutOfMemory, "GEMM: cannot allocate {} bytes of packing buffer",
                floats * sizeof(float));
    size[which] = floats;
  }
  return buf[which].get();
}

// In-register transpose of an 8 x 8 block: on return r[q] holds what was
// column q (element i of r[q] = old r[i][q]).
inline void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// Copies `count` (<= 8) source vectors src[v] + p0 .. p0 + kc, each
// contiguous along the depth, into dst[p * stride + v] (depth-major). Full
// 8 x 8 blocks go through transpose8; `lanes` of each transposed vector are
// stored (all 8 for B panels, 6 for A panels).
void pack_transposed(const float* const* src, int64_t count, int64_t kc, float* dst,
                     int64_t stride) {
  int64_t p = 0;
  if (count == 8 || count == kMr) {
    const __m256i mask =
        _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, count == 8 ? -1 : 0, count == 8 ? -1 : 0);
    for (; p + 8 <= kc; p += 8) {
      __m256 r[8];
      for (int64_t v = 0; v < 8; ++v)
        r[v] = v < count ? _mm256_loadu_ps(src[v] + p) : _mm256_setzero_ps();
      transpose8(r);
      for (int q = 0; q < 8; ++q) _mm256_maskstore_ps(dst + (p + q) * stride, mask, r[q]);
    }
  }
  for (; p < kc; ++p)
    for (int64_t v = 0; v < count; ++v) dst[p * stride + v] = src[v][p];
}

// Rows [i0, i0 + mc) x depth [p0, p0 + kc) of op(A) as kMr-row panels, each
// stored depth-major ([p][r]) and zero-padded to kMr rows.
void pack_a(const GemmOperand<float>& op, const float* a, int64_t i0, int64_t mc, int64_t p0,
            int64_t kc, float* dst) {
  for (int64_t ir = 0; ir < mc; ir += kMr) {
    const int64_t mr = std::min(kMr, mc - ir);
    float* d = dst + ir * kc;
    if (!op.trans) {
      const float* rows[kMr];
      for (int64_t r = 0; r < mr; ++r) rows[r] = a + (i0 + ir + r) * op.ld + p0;
      pack_transposed(rows, mr, kc, d, kMr);
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        const float* src = a + (p0 + p) * op.ld + i0 + ir;
        for (int64_t r = 0; r < mr; ++r) d[p * kMr + r] = src[r];
      }
    }
    for (int64_t r = mr; r < kMr; ++r)
      for (int64_t p = 0; p < kc; ++p) d[p * kMr + r] = 0.0f;
  }
}

// Depth [p0, p0 + kc) x columns [j0, j0 + nc) of op(B) as kNr-column panels,
// each stored depth-major ([p][j]) and zero-padded to kNr columns.
void pack_b(const GemmOperand<float>& op, const float* b, int64_t p0, int64_t kc, int64_t j0,
            int64_t nc, float* dst) {
  for (int64_t jr = 0; jr < nc; jr += kNr) {
    const int64_t nr = std::min(kNr, nc - jr);
    float* d = dst + jr * kc;
    if (!op.trans) {
      for (int64_t p = 0; p < kc; ++p) {
        const float* src = b + (p0 + p) * op.ld + j0 + jr;
        float* row = d + p * kNr;
        if (nr == kNr) {
          _mm256_store_ps(row, _mm256_loadu_ps(src));
          _mm256_store_ps(row + 8, _mm256_loadu_ps(src + 8));
        } else {
          for (int64_t j = 0; j < nr; ++j) row[j] = src[j];
          for (int64_t j = nr; j < kNr; ++j) row[j] = 0.0f;
        }
      }
    } else {
      // Columns of op(B) are contiguous rows of the stored matrix: transpose
      // them in 8 x 8 blocks.
      for (int64_t jh = 0; jh < nr; jh += 8) {
        const float* cols[8];
        const int64_t count = std::min<int64_t>(8, nr - jh);
        for (int64_t j = 0; j < count; ++j) cols[j] = b + (j0 + jr + jh + j) * op.ld + p0;
        pack_transposed(cols, count, kc, d + jh, kNr);
      }
      for (int64_t j = nr; j < kNr; ++j)
        for (int64_t p = 0; p < kc; ++p) d[p * kNr + j] = 0.0f;
    }
  }
}

// How the micro-kernel combines its sum with C: on the first depth block
// C = alpha * sum + beta * C (C unread when beta is 0), later ones add.
struct Store {
  float alpha;
  float beta;
  bool first;
};

inline __m256 combine(__m256 acc, const float* c, const Store& s) {
  const __m256 v = s.alpha == 1.0f ? acc : _mm256_mul_ps(acc, _mm256_set1_ps(s.alpha));
  if (!s.first) return _mm256_add_ps(v, _mm256_loadu_ps(c));
  if (s.beta == 0.0f) return v;
  return _mm256_fmadd_ps(_mm256_set1_ps(s.beta), _mm256_loadu_ps(c), v);
}

// C[mr x nr] (op) = A panel (kc x kMr) * B panel (kc x kNr). The twelve
// accumulators are named variables: an array indexed in a loop that is not
// fully unrolled would be kept in memory and reloaded every step.
void micro_kernel(int64_t kc, const float* __restrict pa, const float* __restrict pb, float* c,
                  int64_t ldc, int64_t mr, int64_t nr, const Store& s) {
  // C is touched only after the depth loop: start fetching its rows now.
  for (int64_t r = 0; r < mr; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + kNr - 1), _MM_HINT_T0);
  }
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_load_ps(pb), b1 = _mm256_load_ps(pb + 8);
    __m256 av = _mm256_broadcast_ss(pa);
    c00 = _mm256_fmadd_ps(av, b0, c00);
    c01 = _mm256_fmadd_ps(av, b1, c01);
    av = _mm256_broadcast_ss(pa + 1);
    c10 = _mm256_fmadd_ps(av, b0, c10);
    c11 = _mm256_fmadd_ps(av, b1, c11);
    av = _mm256_broadcast_ss(pa + 2);
    c20 = _mm256_fmadd_ps(av, b0, c20);
    c21 = _mm256_fmadd_ps(av, b1, c21);
    av = _mm256_broadcast_ss(pa + 3);
    c30 = _mm256_fmadd_ps(av, b0, c30);
    c31 = _mm256_fmadd_ps(av, b1, c31);
    av = _mm256_broadcast_ss(pa + 4);
    c40 = _mm256_fmadd_ps(av, b0, c40);
    c41 = _mm256_fmadd_ps(av, b1, c41);
    av = _mm256_broadcast_ss(pa + 5);
    c50 = _mm256_fmadd_ps(av, b0, c50);
    c51 = _mm256_fmadd_ps(av, b1, c51);
    pa += kMr;
    pb += kNr;
  }
  if (mr == kMr && nr == kNr) {
    auto row = [&](int64_t r, __m256 lo, __m256 hi) {
      float* out = c + r * ldc;
      _mm256_storeu_ps(out, combine(lo, out, s));
      _mm256_storeu_ps(out + 8, combine(hi, out + 8, s));
    };
    row(0, c00, c01);
    row(1, c10, c11);
    row(2, c20, c21);
    row(3, c30, c31);
    row(4, c40, c41);
    row(5, c50, c51);
    return;
  }
  // Edge block: go through a full-size staging block.
  alignas(32) float tmp[kMr * kNr];
  const __m256 all[kMr * 2] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51};
  for (int i = 0; i < kMr * 2; ++i) _mm256_store_ps(tmp + i * 8, all[i]);
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t j = 0; j < nr; ++j) {
      float& out = c[r * ldc + j];
      const float v = s.alpha * tmp[r * kNr + j];
      out = !s.first ? out + v : (s.beta == 0.0f ? v : v + s.beta * out);
    }
}

}  // namespace

bool has_packed_sgemm() { return true; }

bool prefer_packed_sgemm(int64_t rows, int64_t cols, int64_t k) {
  return rows >= kMr && cols >= kNr && k >= 8;
}

void packed_sgemm_tile(const GemmArgs<float>& g, const float* a, const float* b, float* c,
                       int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
  const int64_t k = g.k;
  const int64_t nc_max = std::min(kNc, (cols + kNr - 1) / kNr * kNr);
  const int64_t mc_max = std::min(kMc, (rows + kMr - 1) / kMr * kMr);
  const int64_t depth_blocks = (k + kKc - 1) / kKc;
  // Equal depth blocks, rounded up to whole 8 x 8 pack transposes.
  const int64_t kc_max = std::min(k, ((k + depth_blocks - 1) / depth_blocks + 7) / 8 * 8);
  float* pa = scratch(0, static_cast<size_t>(mc_max * kc_max));
  float* pb = scratch(1, static_cast<size_t>(nc_max * kc_max));
  for (int64_t jc = 0; jc < cols; jc += kNc) {
    const int64_t nc = std::min(kNc, cols - jc);
    for (int64_t pc = 0; pc < k; pc += kc_max) {
      const int64_t kc = std::min(kc_max, k - pc);
      const bool last = pc + kc == k;
      const Store s{g.alpha, g.beta, pc == 0};
      pack_b(g.b, b, pc, kc, c0 + jc, nc, pb);
      for (int64_t ic = 0; ic < rows; ic += kMc) {
        const int64_t mc = std::min(kMc, rows - ic);
        pack_a(g.a, a, r0 + ic, mc, pc, kc, pa);
        for (int64_t jr = 0; jr < nc; jr += kNr) {
          const int64_t nr = std::min(kNr, nc - jr);
          const int64_t col = c0 + jc + jr;
          for (int64_t ir = 0; ir < mc; ir += kMr) {
            const int64_t mr = std::min(kMr, mc - ir);
            float* ct = c + (r0 + ic + ir) * g.ldc + col;
            micro_kernel(kc, pa + ir * kc, pb + jr * kc, ct, g.ldc, mr, nr, s);
            // The block is final and still in L1: finish it now.
            if (last) apply_epilogue(ct, mr, nr, g.ldc, g.bias ? g.bias + col : nullptr, g.act);
          }
        }
      }
    }
  }
}

#endif

}  // namespace samba::ops::detail
