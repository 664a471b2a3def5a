// The AVX2 + FMA level's fp32 GEMM kernels (compiled with -mavx2 -mfma, see
// cmake/SambaIsa.cmake): the packed kernel at 8 lanes, the dot kernel for
// products with few rows against a weight stored as rows, and the bf16
// GEMM on panels widened to fp32 (bf16_gemm.h). Like every level
// file, it holds only intrinsics and TU-local code (packed_sgemm.h says why).
#include <immintrin.h>

#include "engine/kernels/sgemm_kernels.h"
#include "engine/kernels/x86/bf16_gemm.h"
#include "engine/kernels/x86/packed_sgemm.h"

namespace samba::ops::detail {

namespace {

struct Vec256 {
  using V = __m256;
  static constexpr int64_t kLanes = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_load_ps(p); }
  static V loadu(const float* p) { return _mm256_loadu_ps(p); }
  static void storeu(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  // The first n (0 to 8) floats at p, zeros above; nothing past them is read.
  static V loadu_n(const float* p, int64_t n) {
    alignas(32) static constexpr int32_t kMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                      0,  0,  0,  0,  0,  0,  0,  0};
    return _mm256_maskload_ps(p, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMask + 8 - n)));
  }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
};
using Packed = PackedSgemm<Vec256>;

// Sums of the lanes of three vectors: {sum a, sum b, sum c, 0}.
inline __m128 hsum3(__m256 a, __m256 b, __m256 c) {
  const __m256 ab = _mm256_hadd_ps(a, b);  // a01 a23 b01 b23 | a45 a67 b45 b67
  const __m256 cz = _mm256_hadd_ps(c, _mm256_setzero_ps());
  const __m256 s = _mm256_hadd_ps(ab, cz);  // a0-3 b0-3 c0-3 0 | a4-7 b4-7 c4-7 0
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

// out[i][j] = dot(a_i, b_j) for R rows of A and C rows of B over k elements.
// R = 4, C = 3 fills the 16 vector registers (12 accumulators, 3 B vectors,
// one A vector): 7 loads per 12 FMAs, so the loop runs at the FMA rate from L1
// and L2. Smaller R and C serve the edges with the same code.
template <int R, int C>
void block(const float* const* a, const float* const* b, int64_t k, float out[R][4]) {
  __m256 acc[R][3];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < 3; ++j) acc[i][j] = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) {
    __m256 bv[C];
    for (int j = 0; j < C; ++j) bv[j] = _mm256_loadu_ps(b[j] + p);
    for (int i = 0; i < R; ++i) {
      const __m256 av = _mm256_loadu_ps(a[i] + p);
      for (int j = 0; j < C; ++j) acc[i][j] = _mm256_fmadd_ps(av, bv[j], acc[i][j]);
    }
  }
  if (p < k) {
    // The last partial vector, loaded with a mask (masked-off lanes read as 0).
    alignas(32) static constexpr int32_t kLanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                       0,  0,  0,  0,  0,  0,  0,  0};
    const __m256i mask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLanes + 8 - (k - p)));
    __m256 bv[C];
    for (int j = 0; j < C; ++j) bv[j] = _mm256_maskload_ps(b[j] + p, mask);
    for (int i = 0; i < R; ++i) {
      const __m256 av = _mm256_maskload_ps(a[i] + p, mask);
      for (int j = 0; j < C; ++j) acc[i][j] = _mm256_fmadd_ps(av, bv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < R; ++i) _mm_storeu_ps(out[i], hsum3(acc[i][0], acc[i][1], acc[i][2]));
}

// All R rows from `i` against columns [j, j + C) of the tile.
template <int R, int C>
void rows_block(const GemmArgs<float>& g, const float* a, const float* b, float* c, int64_t i,
                int64_t j) {
  const float* ap[R];
  const float* bp[C];
  for (int r = 0; r < R; ++r) ap[r] = a + (i + r) * g.a.ld;
  for (int q = 0; q < C; ++q) bp[q] = b + (j + q) * g.b.ld;
  float out[R][4];
  block<R, C>(ap, bp, g.k, out);
  for (int r = 0; r < R; ++r) {
    float* dst = c + (i + r) * g.ldc + j;
    for (int q = 0; q < C; ++q)
      dst[q] = g.beta == 0.0f ? g.alpha * out[r][q] : g.alpha * out[r][q] + g.beta * dst[q];
  }
}

// Every row of the tile (blocks of four, then the rest) against C columns.
template <int C>
void column_group(const GemmArgs<float>& g, const float* a, const float* b, float* c, int64_t r0,
                  int64_t rows, int64_t j) {
  int64_t i = r0;
  const int64_t end = r0 + rows;
  for (; i + 4 <= end; i += 4) rows_block<4, C>(g, a, b, c, i, j);
  switch (end - i) {
    case 3:
      return rows_block<3, C>(g, a, b, c, i, j);
    case 2:
      return rows_block<2, C>(g, a, b, c, i, j);
    case 1:
      return rows_block<1, C>(g, a, b, c, i, j);
    default:
      return;
  }
}

// Rows up to which the dot kernel is used: beyond, packing the weight once
// per tile costs less than reading it once per four rows.
constexpr int64_t kDotMaxRows = 32;

bool prefer_dot(const GemmArgs<float>& g, int64_t rows) {
  return rows <= kDotMaxRows && !g.a.trans && g.b.trans && g.k >= 8;
}

void dot_tile(const GemmArgs<float>& g, const float* a, const float* b, float* c, int64_t r0,
              int64_t rows, int64_t c0, int64_t cols) {
  // op(B) column j is row j of the stored matrix: contiguous in k.
  int64_t j = c0;
  const int64_t end = c0 + cols;
  for (; j + 3 <= end; j += 3) column_group<3>(g, a, b, c, r0, rows, j);
  if (end - j == 2) column_group<2>(g, a, b, c, r0, rows, j);
  if (end - j == 1) column_group<1>(g, a, b, c, r0, rows, j);
}

// Cache blocks: a B panel of 320 x 16 floats (20 KB) in L1, the 144-row
// block of A (180 KB) in L2, 2048 columns of B (2.5 MB) in L3.
constexpr int64_t kDepthBlock = 320;
void packed_tile(const GemmArgs<float>& g, const float* a, const float* b, float* c, int64_t r0,
                 int64_t rows, int64_t c0, int64_t cols) {
  Packed::tile<kDepthBlock, 144, 2048>(g, a, b, c, r0, rows, c0, cols);
}

using WidenedBf16 = Bf16Gemm<WidenedBf16Kernel<Vec256>>;

}  // namespace

const SgemmKernels& sgemm_kernels_avx2() {
  static const SgemmKernels k{IsaLevel::Avx2,
                              Packed::kNr,
                              &Packed::prefer,
                              &packed_tile,
                              &prefer_dot,
                              &dot_tile,
                              &Packed::prefer_direct,
                              &Packed::direct_tile,
                              &Packed::prefer_transposed,
                              &Packed::transposed_tile,
                              &WidenedBf16::tile<float>,
                              &WidenedBf16::tile<uint16_t>,
                              &Packed::prepacked_b_floats,
                              &Packed::prepack_b<kDepthBlock>};
  return k;
}

}  // namespace samba::ops::detail
