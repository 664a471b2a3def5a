// The AVX-512 level's fp32 GEMM kernels (compiled with -mavx512f/bw/vl/dq and
// the auto-vectorizer off, see cmake/SambaIsa.cmake): the packed kernel at 16
// lanes, a 6 x 32 register block, also behind the bf16 GEMM on panels widened
// to fp32 (bf16_gemm.h) where the CPU lacks AVX512_BF16. Products with few rows keep the AVX2 dot
// kernel: they are bound by reading the weight, not by the FMA width; so does
// x @ Wᵀ at 12 to 32 rows (the transposed kernel), whose 16-row panels a
// 32-wide block would half pad, unless the weight was packed at load: then
// 8 x 32 register blocks read it from its panels (prepacked_rows.h).
#include <immintrin.h>

#include "engine/kernels/sgemm_kernels.h"
#include "engine/kernels/x86/bf16_gemm.h"
#include "engine/kernels/x86/packed_sgemm.h"
#include "engine/kernels/x86/prepacked_rows.h"

namespace samba::ops::detail {

namespace {

struct Vec512 {
  using V = __m512;
  static constexpr int64_t kLanes = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_load_ps(p); }
  static V loadu(const float* p) { return _mm512_loadu_ps(p); }
  static void storeu(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V broadcast(const float* p) { return _mm512_set1_ps(*p); }
  // The first n (0 to 16) floats at p, zeros above; nothing past them is read.
  static V loadu_n(const float* p, int64_t n) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1u), p);
  }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
};
using Packed = PackedSgemm<Vec512>;

// Cache blocks: a B panel of 256 x 32 floats (32 KB) against L1, the 144-row
// block of A (144 KB) in L2, 2048 columns of B (2 MB) in L3.
constexpr int64_t kDepthBlock = 256;
void packed_tile(const GemmArgs<float>& g, const float* a, const float* b, float* c, int64_t r0,
                 int64_t rows, int64_t c0, int64_t cols) {
  Packed::tile<kDepthBlock, 144, 2048>(g, a, b, c, r0, rows, c0, cols);
}

using Rows = PrepackedRows<Vec512, kDepthBlock>;

using WidenedBf16 = Bf16Gemm<WidenedBf16Kernel<Vec512>>;

}  // namespace

const SgemmKernels& sgemm_kernels_avx512() {
  static const SgemmKernels k = [] {
    SgemmKernels t = sgemm_kernels_avx2();
    t.level = IsaLevel::Avx512;
    t.col_block = Packed::kNr;
    t.prefer_packed = &Packed::prefer;
    t.packed_tile = &packed_tile;
    t.prefer_direct = &Packed::prefer_direct;
    t.direct_tile = &Packed::direct_tile;
    t.bf16_tile_f32 = &WidenedBf16::tile<float>;
    t.bf16_tile_bf16 = &WidenedBf16::tile<uint16_t>;
    t.prepacked_b_floats = &Packed::prepacked_b_floats;
    t.prepack_b = &Packed::prepack_b<kDepthBlock>;
    t.prefer_prepacked_rows = &Rows::prefer;
    t.prepacked_rows_tile = &Rows::tile;
    return t;
  }();
  return k;
}

}  // namespace samba::ops::detail
